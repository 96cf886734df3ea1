"""The requests a trial sends, and the answers the callable itself gives to them.

A few different requests (every element of request k is k + 1, so that rows mixed up in a batch
show), or the arrays of an ``.npz`` file; the reference answer of each is the callable's own,
called here on that request alone. Answers compare exactly, floats within a tolerance (a batch
may sum in another order than a single row).
"""

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..model_config import Tensor
from ..proxy.types import Request
from ..relay_server.calling import BatchCall

__all__ = ["Sample", "make_samples", "reference_answers", "differences", "REQUESTS"]

REQUESTS = 4  # different requests per trial
RTOL = {np.dtype(np.float16): 1e-2}
DEFAULT_RTOL, ATOL = 1e-4, 1e-6


@dataclasses.dataclass
class Sample:
    """One request's inputs and, once known, the answer it should get."""

    inputs: Dict[str, np.ndarray]
    expected: Optional[Dict[str, np.ndarray]] = None


def make_samples(inputs: Sequence[Tensor], batching: bool, shapes: Mapping[str, Sequence[int]],
                 data: Optional[Mapping[str, np.ndarray]] = None) -> List[Sample]:
    """:data:`REQUESTS` requests for ``inputs``: one row each (with batching), every variable
    dimension of the size ``shapes`` gives (else 1), request k filled with k + 1; or the arrays
    of ``data``, sent as they are, as one request."""
    if data is not None:
        missing = [spec.name for spec in inputs if spec.name not in data and not spec.optional]
        if missing:
            raise ValueError(f"the input data has no {', '.join(missing)} (it has {', '.join(sorted(data))})")
        return [Sample({spec.name: np.asarray(data[spec.name]) for spec in inputs if spec.name in data})]
    samples = []
    for index in range(REQUESTS):
        arrays = {}
        for spec in inputs:
            if spec.optional:
                continue
            dims = list(shapes.get(spec.name) or [1 if dim == -1 else dim for dim in spec.shape])
            if len(dims) != len(spec.shape) or any(want not in (-1, got) for want, got in zip(spec.shape, dims)):
                raise ValueError(f"--shape {spec.name}: {dims} does not fit the input's shape {list(spec.shape)}")
            arrays[spec.name] = _filled(spec.dtype, ([1] if batching else []) + dims, index + 1)
        samples.append(Sample(arrays))
    return samples


def _filled(dtype, shape: List[int], value: int) -> np.ndarray:
    if dtype is np.bytes_ or dtype is object or np.dtype(dtype).kind in "OSU":
        return np.full(shape, str(value).encode(), dtype=object)
    if np.dtype(dtype) == np.bool_:
        return np.full(shape, value % 2 == 1, dtype=np.bool_)
    return np.full(shape, value, dtype=dtype)


def reference_answers(func: Callable, samples: Sequence[Sample]) -> None:
    """Call ``func`` on each sample alone (as Triton would, one request in the batch) and keep its
    answer as the expected one. Raises what the callable raised, or TypeError for an answer that
    is not one dict of outputs."""
    call = BatchCall(func)
    try:
        for sample in samples:
            responses = call([Request(data={name: array.copy() for name, array in sample.inputs.items()})])
            if not isinstance(responses, (list, tuple)) or len(responses) != 1 or not isinstance(responses[0], dict):
                raise TypeError(f"it returned {type(responses).__name__}, not one dict of outputs per request")
            sample.expected = {str(name): _plain(value) for name, value in responses[0].items()}
    finally:
        call.close()


def _plain(value) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind in "SU":
        return np.char.encode(array, "utf-8") if array.dtype.kind == "U" else array.astype(object)
    return array


def differences(expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> Optional[str]:
    """What differs between two answers (None: the same), said briefly."""
    common = [name for name in expected if name in got]  # --output may declare fewer than it returns
    if not common:
        return f"outputs {sorted(got)}, expected {sorted(expected)}"
    for name in common:
        want, have = expected[name], got[name]
        if tuple(have.shape) != tuple(want.shape):
            return f"output {name}: shape {list(have.shape)}, expected {list(want.shape)}"
        if want.dtype.kind in "fc" and have.dtype.kind in "fc":
            rtol = RTOL.get(want.dtype, DEFAULT_RTOL)
            if not np.allclose(have, want, rtol=rtol, atol=ATOL, equal_nan=True):
                return f"output {name}: {_brief(have)}, expected {_brief(want)}"
        elif want.dtype.kind == "O" or have.dtype.kind in "OS":
            if [_as_bytes(item) for item in have.ravel()] != [_as_bytes(item) for item in want.ravel()]:
                return f"output {name}: {_brief(have)}, expected {_brief(want)}"
        elif not np.array_equal(have, want):
            return f"output {name}: {_brief(have)}, expected {_brief(want)}"
    return None


def _as_bytes(item) -> bytes:
    return item if isinstance(item, bytes) else str(item).encode()


def _brief(array: np.ndarray) -> str:
    flat = array.ravel()
    shown = ", ".join(repr(item) if isinstance(item, bytes) else f"{item:.6g}" if isinstance(item, float)
                      else str(item) for item in flat[:4].tolist())
    return f"[{shown}{', ...' if flat.size > 4 else ''}]"

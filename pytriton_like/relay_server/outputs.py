"""Check and convert what a callable returned against the model's declared outputs."""

import logging
from collections.abc import Mapping  # typing.Mapping's isinstance is several times slower
from typing import Any, Dict, Optional, Sequence

import numpy as np

from ..model_config.triton_model_config import TensorSpec

__all__ = ["OutputChecker", "OutputError"]

logger = logging.getLogger(__name__)

_BYTES_KINDS = "OSU"


class OutputError(ValueError):
    """One response's outputs do not match the model's declared outputs."""


class OutputChecker:
    """Turns one response into arrays fit for the relay.

    Without ``strict``, an output is cast to its declared dtype when numpy deems the cast safe
    (``same_kind``: float64 to float32, int64 to int32...), a declared output missing from a
    response is a warning, once per model (the client's result lacks it), and an undeclared one
    is left out (Triton refuses outputs its model config does not declare). With ``strict``, a
    missing output, an undeclared name, another dtype or a batch size other than the request's is
    an error naming the output.

    Args:
        model_name: names the model in the warning.
        partial: responses may leave out declared outputs (a decoupled model's stream).
    """

    def __init__(
        self,
        outputs: Sequence[TensorSpec],
        batching: bool,
        strict: bool,
        *,
        model_name: str = "",
        partial: bool = False,
    ):
        self._specs: Dict[str, TensorSpec] = {spec.name: spec for spec in outputs}
        # per output: the numpy dtype it must have, or None for bytes/str (worked out once, not per response)
        self._dtypes: Dict[str, Optional[np.dtype]] = {
            spec.name: None if spec.dtype in (np.bytes_, np.str_, object) else np.dtype(spec.dtype) for spec in outputs
        }
        self._batching = batching
        self._strict = strict
        self._model_name = model_name
        self._check_missing = not partial
        self._warned_missing = False

    def plain_dtypes(self) -> Optional[Dict[str, np.dtype]]:
        """The declared outputs' dtypes when a response holding exactly those, as arrays of those
        dtypes, passes :meth:`check` unchanged (not strict, no bytes outputs); None otherwise."""
        if self._strict or any(dtype is None for dtype in self._dtypes.values()):
            return None
        return dict(self._dtypes)

    def check(self, response: Any, batch_size: Optional[int], wanted) -> Dict[str, np.ndarray]:
        """The response's outputs as arrays (only ``wanted`` ones when given)."""
        if not isinstance(response, Mapping):
            raise OutputError(f"each response must be a dict of output name to array, got {type(response).__name__}")
        arrays = {}
        declared = 0
        for name, value in response.items():
            spec = self._specs.get(name)
            if spec is None:
                if self._strict:
                    raise OutputError(f"output {name!r} is not declared; declared outputs: {', '.join(self._specs)}")
                continue
            declared += 1
            if wanted and name not in wanted:
                continue
            arrays[name] = self._check_one(spec, np.asarray(value), batch_size)
        if declared < len(self._specs) and self._check_missing:
            self._missing([name for name in self._specs if name not in response], response)
        return arrays

    def _missing(self, names, response: Mapping) -> None:
        got = ", ".join(map(str, response)) or "nothing"
        outputs = ("output " if len(names) == 1 else "outputs ") + ", ".join(map(repr, names))
        if self._strict:
            raise OutputError(f"declared {outputs} missing from the callable's result (it returned: {got})")
        if not self._warned_missing:
            self._warned_missing = True
            logger.warning(
                "model %s: declared %s missing from the inference callable's result (it returned: %s); clients"
                " get no such output. bind(..., strict=True) makes this an error; this warning is not repeated",
                self._model_name,
                outputs,
                got,
            )

    def _check_one(self, spec: TensorSpec, array: np.ndarray, batch_size: Optional[int]) -> np.ndarray:
        name = spec.name
        expected = self._dtypes[name]
        if expected is None:
            if array.dtype.kind not in _BYTES_KINDS:
                raise OutputError(f"output {name!r} must hold bytes or str, got dtype {array.dtype}")
        elif array.dtype != expected:
            if self._strict or not np.can_cast(array.dtype, expected, casting="same_kind"):
                raise OutputError(f"output {name!r} has dtype {array.dtype}, expected {expected}")
            array = array.astype(expected)
        if self._strict and self._batching and batch_size is not None:
            if array.ndim == 0 or array.shape[0] != batch_size:
                rows = "no batch axis" if array.ndim == 0 else f"{array.shape[0]} rows"
                raise OutputError(f"output {name!r} has {rows}, expected {batch_size} (the request's batch size)")
        return array

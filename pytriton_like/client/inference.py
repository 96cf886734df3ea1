"""One inference request and its result, without I/O.

Input checks, the batch axis, building tritonclient ``InferInput`` /
``InferRequestedOutput`` objects and turning an ``InferResult`` into a dict of numpy
arrays. The sync, asyncio and futures clients all go through these functions.
"""

import dataclasses
import functools
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from tritonclient.utils import np_to_triton_dtype

from ..model_config.triton_model_config import TensorSpec, TritonModelConfig
from .arguments import (  # the argument checks: exported here too, where they were
    ParametersT,
    ParameterValueT,
    SequenceIdT,
    verify_flag,
    verify_headers,
    verify_inputs_args,
    verify_parameters,
    verify_sequence,
)
from .exceptions import PyTritonClientModelDoesntSupportBatchingError, PyTritonClientValueError
from .connections import tritonclient_module
from .shared_memory import read_output
from .url import Protocol

__all__ = [
    "InferRequest",
    "ParametersT",
    "verify_inputs_args",
    "verify_parameters",
    "verify_headers",
    "verify_sequence",
    "verify_flag",
    "SequenceIdT",
    "batches",
    "bind_inputs",
    "build_request",
    "plan_request",
    "wire_arrays",
    "parse_result",
]


_BYTES = "BYTES"


@dataclasses.dataclass(frozen=True)
class InferRequest:
    """Everything a client hands tritonclient's ``infer`` for one request.

    Attributes:
        model_name: the model to run.
        model_version: the version to run; ``""`` means the latest.
        inputs: tritonclient ``InferInput`` objects with their data set.
        outputs: tritonclient ``InferRequestedOutput`` objects, one per output in the model config.
        request_id: id of the request, unique within the client.
        parameters: custom request parameters, or ``None``.
        headers: HTTP headers / gRPC metadata (keys lower-cased, values strings), or ``None``.
        strip_batch_axis: the request is one sample sent with a batch axis of 1 that the
            result must lose again.
        sequence_id: correlation id of the sequence the request belongs to, or ``None``.
        sequence_start: the request starts its sequence.
        sequence_end: the request ends its sequence.
    """

    model_name: str
    model_version: str
    inputs: List[Any]
    outputs: List[Any]
    request_id: str
    parameters: Optional[Dict[str, ParameterValueT]]
    headers: Optional[Dict[str, str]]
    strip_batch_axis: bool
    sequence_id: SequenceIdT = None
    sequence_start: bool = False
    sequence_end: bool = False
    # the shared-memory region of the request (client/shared_memory.py) and where its outputs go in it
    shared_region: Any = None
    shared_outputs: Dict[str, int] = dataclasses.field(default_factory=dict)

    def infer_kwargs(self) -> Dict[str, Any]:
        """Keyword arguments of tritonclient's ``infer`` (HTTP and gRPC, sync and asyncio)."""
        kwargs = {
            "model_name": self.model_name,
            "model_version": self.model_version,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "request_id": self.request_id,
            "parameters": self.parameters,
            "headers": self.headers,
        }
        if self.sequence_id is not None or self.sequence_start or self.sequence_end:
            kwargs.update(
                sequence_id=0 if self.sequence_id is None else self.sequence_id,  # tritonclient's "none"
                sequence_start=self.sequence_start,
                sequence_end=self.sequence_end,
            )
        return kwargs


def bind_inputs(
    config: TritonModelConfig, inputs: Sequence[np.ndarray], named_inputs: Mapping[str, np.ndarray]
) -> Dict[str, np.ndarray]:
    """Names positional inputs after the model's inputs, in config order, and checks the names.

    Raises:
        PyTritonClientValueError: more positional inputs than the model has, an unknown
            input name, or a required input left out.
    """
    known = [spec.name for spec in config.inputs]
    if inputs:
        if len(inputs) > len(known):
            raise PyTritonClientValueError(
                f"model {config.model_name!r} takes {len(known)} inputs ({', '.join(known)}), got {len(inputs)}"
            )
        bound = dict(zip(known, inputs))
    else:
        unknown = [name for name in named_inputs if name not in known]
        if unknown:
            raise PyTritonClientValueError(
                f"model {config.model_name!r} has no input(s) {', '.join(map(repr, unknown))}; "
                f"its inputs are {', '.join(map(repr, known))}"
            )
        bound = dict(named_inputs)
    missing = [spec.name for spec in config.inputs if not spec.optional and spec.name not in bound]
    if missing:
        raise PyTritonClientValueError(
            f"model {config.model_name!r} requires input(s) {', '.join(map(repr, missing))}; "
            f"got {', '.join(map(repr, bound)) or 'none'}"
        )
    return bound


def build_request(
    protocol: Protocol,
    config: TritonModelConfig,
    inputs: Mapping[str, np.ndarray],
    *,
    model_name: str,
    model_version: Optional[str],
    request_id: str,
    parameters: Optional[Dict[str, ParameterValueT]],
    headers: Optional[Dict[str, str]],
    sample: bool,
    sequence_id: SequenceIdT = None,
    sequence_start: bool = False,
    sequence_end: bool = False,
    shared: Optional[Tuple[Any, Any]] = None,
) -> InferRequest:
    """Builds the tritonclient request for bound inputs (see :func:`bind_inputs`).

    A sample sent to a batching model gets a batch axis of 1 here; the result loses it
    in :func:`parse_result`.

    Args:
        protocol: selects tritonclient.http or tritonclient.grpc request objects.
        config: the model's configuration.
        inputs: input arrays by input name.
        model_name: the model to run.
        model_version: the version to run (``None``: the latest).
        request_id: id of the request.
        parameters: checked custom parameters (see :func:`verify_parameters`).
        headers: checked headers (see :func:`verify_headers`).
        sample: ``True`` for ``infer_sample``, ``False`` for ``infer_batch``.
        sequence_id: checked correlation id (see :func:`verify_sequence`), or ``None``.
        sequence_start: the request starts its sequence.
        sequence_end: the request ends its sequence.
        shared: ``(region, layout)`` of a client using shared memory (client/shared_memory.py):
            the inputs of the layout are copied into the region, its outputs requested there.

    Raises:
        PyTritonClientModelDoesntSupportBatchingError: a batch for a model that does not batch.
        PyTritonClientValueError: an array whose dtype Triton cannot carry or that does not
            match the model's input, or a batch larger than the model's ``max_batch_size``.
    """
    arrays, add_batch_axis = plan_request(config, inputs, sample=sample, model_name=model_name,
                                          model_version=model_version)
    lib = tritonclient_module(protocol, asyncio=False)  # imported at the first request
    region, layout = shared if shared is not None else (None, None)
    wrapped = []
    for name, array in arrays.items():
        infer_input = lib.InferInput(name, list(array.shape), _datatype(array))
        if layout is not None and name in layout.inputs:
            offset, nbytes = layout.inputs[name]
            region.write(offset, array)
            infer_input.set_shared_memory(region.name, nbytes, offset)
        else:
            infer_input.set_data_from_numpy(array)
        wrapped.append(infer_input)
    outputs = []
    shared_outputs: Dict[str, int] = {}
    for spec in config.outputs:
        requested = lib.InferRequestedOutput(spec.name)
        if layout is not None and spec.name in layout.outputs:
            offset, nbytes = layout.outputs[spec.name]
            requested.set_shared_memory(region.name, nbytes, offset)
            shared_outputs[spec.name] = offset
        outputs.append(requested)
    return InferRequest(
        model_name=model_name,
        model_version=model_version or "",
        inputs=wrapped,
        outputs=outputs,
        request_id=request_id,
        parameters=parameters,
        headers=headers,
        strip_batch_axis=add_batch_axis,
        sequence_id=sequence_id,
        sequence_start=sequence_start,
        sequence_end=sequence_end,
        shared_region=region if shared_outputs or (layout is not None and layout.inputs) else None,
        shared_outputs=shared_outputs,
    )


def plan_request(
    config: TritonModelConfig,
    inputs: Mapping[str, np.ndarray],
    *,
    sample: bool,
    model_name: str,
    model_version: Optional[str],
) -> Tuple[Dict[str, np.ndarray], bool]:
    """The arrays a request of bound inputs sends (see :func:`wire_arrays`), and whether its
    result must lose the batch axis of 1 added to a sample; the request is checked first.

    Raises:
        PyTritonClientModelDoesntSupportBatchingError: a batch for a model that does not batch.
        PyTritonClientValueError: an array whose dtype Triton cannot carry or that does not
            match the model's input, or a batch larger than the model's ``max_batch_size``.
    """
    if not sample and not batches(config):
        raise PyTritonClientModelDoesntSupportBatchingError(
            f"model {config.model_name!r} does not support batching (max_batch_size 0); use infer_sample",
            model_name=model_name,
            model_version=model_version,
        )
    if not sample:
        _check_batch_size(config, inputs, model_name, model_version)
    add_batch_axis = sample and batches(config)
    return wire_arrays(config, inputs, add_batch_axis), add_batch_axis


def wire_arrays(
    config: TritonModelConfig, inputs: Mapping[str, np.ndarray], add_batch_axis: bool
) -> Dict[str, np.ndarray]:
    """The arrays as they go on the wire: checked against the model's inputs, ``str`` encoded,
    with a batch axis of 1 added for a sample (a view).

    Raises:
        PyTritonClientValueError: an array whose dtype Triton cannot carry or that does not
            match the model's input.
    """
    specs = {spec.name: spec for spec in config.inputs}
    arrays = {}
    for name, array in inputs.items():
        array, _ = _wire_array(name, array, specs.get(name))
        arrays[name] = array[np.newaxis, ...] if add_batch_axis else array
    return arrays


def _datatype(array: np.ndarray) -> str:
    return _triton_dtype(array.dtype)


def batches(config: TritonModelConfig) -> bool:
    """Whether a client treats the model as batching: ``max_batch_size > 0``, as PyTriton's clients do.

    A config read from the server has ``batching`` equal to this; a hand-made one passed as
    ``model_config`` may not, and its ``max_batch_size`` decides.
    """
    return config.max_batch_size > 0


def _check_batch_size(
    config: TritonModelConfig, inputs: Mapping[str, np.ndarray], model_name: str, model_version: Optional[str]
) -> None:
    """Refuse a batch larger than the model's ``max_batch_size`` before it is sent (Triton would refuse it)."""
    limit = config.max_batch_size
    for name, array in inputs.items():
        rows = array.shape[0] if array.ndim else 1
        if rows > limit:
            raise PyTritonClientValueError(
                f"model {config.model_name!r} takes batches of at most {limit} (its max_batch_size), got {rows}"
                f" rows in input {name!r}; send the batch in parts of {limit} rows or fewer",
                model_name=model_name,
                model_version=model_version,
            )


@functools.lru_cache(maxsize=256)
def _triton_dtype(dtype: np.dtype) -> Optional[str]:
    """tritonclient's name of a numpy dtype, remembered: every request asks it of its inputs."""
    return np_to_triton_dtype(dtype)


def _wire_array(name: str, array: np.ndarray, spec: Optional[TensorSpec]) -> Tuple[np.ndarray, str]:
    """The array as Triton will carry it (str arrays encoded to UTF-8) and its Triton dtype."""
    if array.dtype.type is np.str_:
        array = np.char.encode(array, "utf-8")
    datatype = _triton_dtype(array.dtype)
    if datatype is None:
        raise PyTritonClientValueError(
            f"input {name!r} has dtype {array.dtype}, which Triton cannot carry; use bool, (u)int8-64, "
            "float16/32/64, or bytes/str/object for BYTES"
        )
    expected = _spec_datatype(spec)
    if expected is not None and expected != datatype:
        raise PyTritonClientValueError(f"input {name!r} of the model is {expected}, got an array of {array.dtype}")
    return array, datatype


def _spec_datatype(spec: Optional[TensorSpec]) -> Optional[str]:
    """Triton's dtype name of a config tensor (STRING and BYTES both as BYTES); None if unknown."""
    if spec is None:
        return None
    dtype = spec.dtype
    if isinstance(dtype, str):  # a Triton type numpy cannot hold (e.g. BF16): leave it to the server
        return None
    if dtype is object or dtype in (np.bytes_, np.str_, np.object_):
        return _BYTES
    return _triton_dtype(np.dtype(dtype))


def parse_result(result: Any, request: InferRequest) -> Dict[str, np.ndarray]:
    """Turns a tritonclient ``InferResult`` (HTTP or gRPC) into arrays by output name.

    Arrays of numeric outputs are views of the response buffer (read-only); BYTES outputs
    are object arrays of ``bytes``. Outputs of a sample lose the batch axis added by
    :func:`build_request`.
    """
    response = result.get_response()
    outputs = response.get("outputs", []) if isinstance(response, dict) else response.outputs
    arrays = {}
    for output in outputs:
        name, datatype, shape = (
            (output["name"], output["datatype"], output["shape"])
            if isinstance(output, dict)
            else (output.name, output.datatype, list(output.shape))
        )
        if name in request.shared_outputs:
            arrays[name] = read_output(request.shared_region, request.shared_outputs[name], datatype, shape)
        else:
            arrays[name] = result.as_numpy(name)
    if request.strip_batch_axis:
        arrays = {name: array[0] if array.ndim else array for name, array in arrays.items()}
    return arrays



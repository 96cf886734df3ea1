"""The arguments of an inference call, checked before anything is sent (no I/O, no model config).

:class:`CallArgs` holds one ``infer_sample`` / ``infer_batch`` call's checked arguments; the
``verify_*`` functions check each kind. What needs the model's config (binding the inputs to
its tensors) is in :mod:`.inference`.
"""

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from tritonclient.utils import TRITON_RESERVED_REQUEST_PARAMS, TRITON_RESERVED_REQUEST_PARAMS_PREFIX

from .exceptions import PyTritonClientValueError

__all__ = [
    "CallArgs",
    "ParametersT",
    "ParameterValueT",
    "SequenceIdT",
    "verify_inputs_args",
    "verify_parameters",
    "verify_headers",
    "verify_sequence",
    "verify_flag",
]

ParameterValueT = Union[str, int, bool, float]


ParametersT = Optional[Mapping[str, ParameterValueT]]


SequenceIdT = Optional[Union[int, str]]


def verify_inputs_args(inputs: Sequence[Any], named_inputs: Mapping[str, Any]) -> None:
    """Checks that inputs are given either positionally or by name, not both, and not none.

    Raises:
        PyTritonClientValueError: no inputs, or positional and named inputs mixed.
    """
    if not inputs and not named_inputs:
        raise PyTritonClientValueError("Provide input data: no inputs given; pass numpy arrays positionally or by input name")
    if inputs and named_inputs:
        raise PyTritonClientValueError(
            "Use either positional either keyword method arguments convention: inputs given both positionally"
            f" ({len(inputs)}) and by name ({', '.join(named_inputs)})"
        )
    for value in (*inputs, *named_inputs.values()):
        if not isinstance(value, np.ndarray):
            name = next(label for label, item in _labelled(inputs, named_inputs) if item is value)
            raise PyTritonClientValueError(f"input {name} must be a numpy array, got {type(value).__name__}")


def verify_parameters(parameters: ParametersT) -> Optional[Dict[str, ParameterValueT]]:
    """Checks custom request parameters and returns them as a plain dict.

    Raises:
        PyTritonClientValueError: not a dict, a key that is not a string or that Triton
            reserves (``priority``, ``timeout``, ``triton_*``...), or a value that is not
            a str, int, bool or float.
    """
    if parameters is None:
        return None
    _verify_mapping("parameters", parameters, (str, int, bool, float))
    for key in parameters:
        if key in TRITON_RESERVED_REQUEST_PARAMS or key.startswith(TRITON_RESERVED_REQUEST_PARAMS_PREFIX):
            raise PyTritonClientValueError(
                f"parameter {key!r} is reserved by Triton; reserved: "
                f"{', '.join(TRITON_RESERVED_REQUEST_PARAMS)} and names starting with "
                f"{TRITON_RESERVED_REQUEST_PARAMS_PREFIX!r}"
            )
    return dict(parameters)


def verify_headers(headers: ParametersT) -> Optional[Dict[str, str]]:
    """Checks request headers and returns them with lower-case keys and string values.

    Keys are lower-cased because gRPC metadata keys must be, and HTTP header names are
    case-insensitive anyway.

    Raises:
        PyTritonClientValueError: not a dict, a key that is not a string, or a value that
            is not a str, int or bool.
    """
    if headers is None:
        return None
    _verify_mapping("headers", headers, (str, int, bool))
    return {key.lower(): str(value) for key, value in headers.items()}


def verify_sequence(sequence_id: SequenceIdT, sequence_start: bool, sequence_end: bool) -> None:
    """Checks the sequence arguments of a request to a stateful model (a sequence batcher).

    Raises:
        PyTritonClientValueError: a ``sequence_id`` that is not a positive int below 2**64 or a
            non-empty string, flags that are not bools, or flags without a ``sequence_id``.
    """
    verify_flag("sequence_start", sequence_start)
    verify_flag("sequence_end", sequence_end)
    if sequence_id is None:
        if sequence_start or sequence_end:
            raise PyTritonClientValueError("sequence_start and sequence_end need a sequence_id")
        return
    if isinstance(sequence_id, str):
        if not sequence_id:
            raise PyTritonClientValueError("sequence_id must not be an empty string")
    elif isinstance(sequence_id, bool) or not isinstance(sequence_id, int):
        raise PyTritonClientValueError(
            f"sequence_id must be an int or a str, got {type(sequence_id).__name__}: {sequence_id!r}"
        )
    elif not 0 < sequence_id < 2**64:
        raise PyTritonClientValueError(f"an integer sequence_id must be within 1..2**64-1, got {sequence_id}")


def verify_flag(name: str, value: bool) -> bool:
    """``value``, if it is True or False; PyTritonClientValueError naming ``name`` otherwise."""
    if not isinstance(value, bool):
        raise PyTritonClientValueError(f"{name} must be True or False, got {value!r}")
    return value


def _verify_mapping(what: str, mapping: Any, value_types: Tuple[type, ...]) -> None:
    if not isinstance(mapping, Mapping):
        raise PyTritonClientValueError(f"{what} must be a dict, got {type(mapping).__name__}")
    allowed = ", ".join(t.__name__ for t in value_types)
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise PyTritonClientValueError(f"{what} keys must be strings, got {type(key).__name__}: {key!r}")
        if not isinstance(value, value_types):
            raise PyTritonClientValueError(
                f"{what}[{key!r}] must be one of {allowed}, got {type(value).__name__}: {value!r}"
            )


def _labelled(inputs: Sequence[Any], named_inputs: Mapping[str, Any]):
    for index, value in enumerate(inputs):
        yield f"#{index}", value
    for name, value in named_inputs.items():
        yield repr(name), value


class CallArgs:
    """The checked arguments of one ``infer_sample`` / ``infer_batch`` call, before the model config is known.

    ``sample`` is True for a sample, False for a batch, and None for inputs sent as given: with a
    batch axis exactly when the model batches (the runner's calls).
    """

    __slots__ = ("inputs", "named_inputs", "parameters", "headers", "sample", "sequence")

    def __init__(
        self,
        inputs: Sequence[np.ndarray],
        named_inputs: Mapping[str, np.ndarray],
        parameters: ParametersT,
        headers: ParametersT,
        sample: Optional[bool],
        *,
        sequence_id: SequenceIdT = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
    ):
        verify_inputs_args(inputs, named_inputs)
        self.inputs = tuple(inputs)
        self.named_inputs = dict(named_inputs)
        self.parameters = None if parameters is None else verify_parameters(parameters)
        self.headers = None if headers is None else verify_headers(headers)
        self.sample = sample
        if sequence_id is not None or sequence_start is not False or sequence_end is not False:
            verify_sequence(sequence_id, sequence_start, sequence_end)
        # build_request's keyword arguments; empty outside a sequence
        self.sequence: Dict[str, Any] = (
            {}
            if sequence_id is None
            else {"sequence_id": sequence_id, "sequence_start": sequence_start, "sequence_end": sequence_end}
        )

"""Render a :class:`TritonModelConfig` to Triton's config.pbtxt.

The file is Triton's own ``ModelConfig`` protobuf message (the ``model_config_pb2`` that
tritonclient ships) printed in protobuf's text format, so every name, escape and nesting is
the one tritonserver parses.
"""

import re
from typing import TYPE_CHECKING, Any, Iterable, Optional

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from ..exceptions import PyTritonValidationError
from ..relay.backend import BACKEND_NAME
from .common import DynamicBatcher, QueuePolicy, SequenceBatcher, SequenceStrategy
from .triton_model_config import TensorSpec, TritonModelConfig

if TYPE_CHECKING:  # ensemble.py validates with this module's functions
    from .ensemble import EnsembleConfig

__all__ = [
    "render_config",
    "render_ensemble_config",
    "BOUND_MODEL_BACKEND",
    "validate_config",
    "dtype_to_triton",
    "triton_to_dtype",
]

_NUMPY_TO_TRITON = {
    np.bool_: "BOOL",
    np.int8: "INT8",
    np.int16: "INT16",
    np.int32: "INT32",
    np.int64: "INT64",
    np.uint8: "UINT8",
    np.uint16: "UINT16",
    np.uint32: "UINT32",
    np.uint64: "UINT64",
    np.float16: "FP16",
    np.float32: "FP32",
    np.float64: "FP64",
    np.bytes_: "STRING",
    np.str_: "STRING",
    np.object_: "STRING",
    object: "STRING",
}
_TRITON_TO_NUMPY = {
    triton: dtype for dtype, triton in _NUMPY_TO_TRITON.items() if dtype not in (np.str_, np.object_, object)
} | {"BYTES": np.bytes_}

# The Triton backend that serves a bound model: the relay's, in C.
BOUND_MODEL_BACKEND = BACKEND_NAME  # the relay's backend (native/, pytriton_like/relay/backend.py)

# Triton's own rule for model names is "a valid directory name"; we also keep them URL-safe.
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def dtype_to_triton(dtype) -> str:
    """Triton's data type name (without ``TYPE_``) of a numpy scalar type or ``object``."""
    try:
        return _NUMPY_TO_TRITON[dtype]
    except KeyError:
        supported = ", ".join(sorted({getattr(d, "__name__", str(d)) for d in _NUMPY_TO_TRITON}))
        raise PyTritonValidationError(f"unsupported dtype {dtype!r}; supported: {supported}") from None


def triton_to_dtype(name: str):
    """The numpy scalar type for Triton's data type name (``FP32`` or ``TYPE_FP32``)."""
    key = name[len("TYPE_") :] if name.startswith("TYPE_") else name
    try:
        return _TRITON_TO_NUMPY[key]
    except KeyError:
        raise PyTritonValidationError(f"unsupported Triton data type {name!r}") from None


def validate_config(config: TritonModelConfig) -> None:
    """Raise :class:`PyTritonValidationError` naming what is wrong in ``config``."""
    where = f"model {config.model_name!r}"
    if not _NAME_RE.match(config.model_name):
        raise PyTritonValidationError(
            f"{where}: a model name may hold letters, digits, '_', '.' and '-' and may not start with '.' or '-'"
        )
    if config.model_version < 1:
        raise PyTritonValidationError(f"{where}: model_version must be 1 or more, got {config.model_version}")
    if config.batching and config.max_batch_size < 1:
        raise PyTritonValidationError(
            f"{where}: max_batch_size must be 1 or more when batching is on, got {config.max_batch_size}"
        )
    if not config.inputs:
        raise PyTritonValidationError(f"{where}: a model needs at least one input")
    if not config.outputs:
        raise PyTritonValidationError(f"{where}: a model needs at least one output")
    for kind, specs in (("input", config.inputs), ("output", config.outputs)):
        seen = set()
        for spec in specs:
            if spec.name in seen:
                raise PyTritonValidationError(f"{where}: {kind} name {spec.name!r} is used twice")
            seen.add(spec.name)
            _validate_tensor(where, kind, spec)
    _validate_batcher(where, config)
    if config.response_cache and config.decoupled:
        raise PyTritonValidationError(
            f"{where}: Triton's response cache does not support decoupled models; "
            "use response_cache=True or decoupled=True, not both"
        )
    _validate_sequence_batcher(where, config)


def _validate_tensor(where: str, kind: str, spec: TensorSpec) -> None:
    if not _NAME_RE.match(spec.name):
        raise PyTritonValidationError(f"{where}: {kind} name {spec.name!r} is not a valid tensor name")
    if any(dim < -1 or dim == 0 for dim in spec.shape):
        raise PyTritonValidationError(
            f"{where}: {kind} {spec.name!r} has shape {spec.shape}; each dimension must be -1 or positive"
        )
    if kind == "output" and spec.optional:
        raise PyTritonValidationError(f"{where}: output {spec.name!r} cannot be optional")
    dtype_to_triton(spec.dtype)


def _validate_batcher(where: str, config: TritonModelConfig) -> None:
    batcher = config.batcher
    if batcher is None:
        return
    for size in batcher.preferred_batch_size or ():
        if not 1 <= size <= config.max_batch_size:
            raise PyTritonValidationError(
                f"{where}: preferred_batch_size {size} is outside 1..max_batch_size ({config.max_batch_size})"
            )
    levels = batcher.priority_levels
    if batcher.preserve_ordering and levels > 1:
        raise PyTritonValidationError(f"{where}: Triton allows preserve_ordering only with at most one priority level")
    if levels and not 1 <= batcher.default_priority_level <= levels:
        raise PyTritonValidationError(
            f"{where}: default_priority_level must be within 1..priority_levels ({levels}),"
            f" got {batcher.default_priority_level}"
        )
    for level in batcher.priority_queue_policy or {}:
        if not 1 <= level <= levels:
            raise PyTritonValidationError(
                f"{where}: priority_queue_policy has level {level}, outside 1..priority_levels ({levels})"
            )


def _validate_sequence_batcher(where: str, config: TritonModelConfig) -> None:
    batcher = config.sequence_batcher
    if batcher is None:
        return
    if config.batcher is not None:
        raise PyTritonValidationError(f"{where}: a model has one scheduler: a dynamic batcher or a sequence batcher")
    if config.decoupled:
        raise PyTritonValidationError(
            f"{where}: a sequence batcher cannot serve a decoupled model here: its batches stream concurrently,"
            " so a sequence's requests could overtake each other"
        )
    if config.response_cache:
        raise PyTritonValidationError(
            f"{where}: a stateful model cannot use the response cache: its answers depend on the sequence's state"
        )
    for size in batcher.preferred_batch_size or ():
        if not 1 <= size <= config.max_batch_size:
            raise PyTritonValidationError(
                f"{where}: sequence batcher preferred_batch_size {size} is outside 1..max_batch_size"
                f" ({config.max_batch_size})"
            )


def render_config(config: TritonModelConfig, versions: Optional[Iterable[int]] = None) -> str:
    """config.pbtxt text for ``config``; validates it first.

    Args:
        versions: the version numbers to serve (a ``specific`` version policy, for every bound
            version); ``None`` leaves Triton's default policy (the latest version).
    """
    validate_config(config)
    message = model_config_pb2.ModelConfig(
        name=config.model_name,
        backend=BOUND_MODEL_BACKEND,
        max_batch_size=config.max_batch_size if config.batching else 0,
    )
    if versions is not None:
        numbers = sorted(set(versions))
        if not numbers or any(number < 1 for number in numbers):
            raise PyTritonValidationError(f"a version policy needs version numbers of 1 or more, got {numbers}")
        message.version_policy.specific.versions.extend(numbers)
    if config.batching and config.batcher is not None:
        _set_batcher(message.dynamic_batching, config.batcher)
    if config.sequence_batcher is not None:
        _set_sequence_batcher(message.sequence_batching, config.sequence_batcher)
    _add_tensors(message.input, config.inputs)
    _add_tensors(message.output, config.outputs)
    message.instance_group.add(kind=model_config_pb2.ModelInstanceGroup.KIND_CPU, count=config.instance_count)
    if config.decoupled:
        message.model_transaction_policy.decoupled = True
    if config.response_cache:
        message.response_cache.enable = True
    for key, value in config.backend_parameters.items():
        message.parameters[key].string_value = str(value)
    return _text(message)


def _text(message: Any) -> str:
    return text_format.MessageToString(message)


def _set_batcher(section: Any, batcher: DynamicBatcher) -> None:
    section.SetInParent()  # an empty dynamic_batching {} still turns the batcher on
    section.max_queue_delay_microseconds = batcher.max_queue_delay_microseconds
    section.preferred_batch_size.extend(batcher.preferred_batch_size or ())
    section.preserve_ordering = batcher.preserve_ordering
    section.priority_levels = batcher.priority_levels
    section.default_priority_level = batcher.default_priority_level
    if batcher.default_queue_policy is not None:
        _set_policy(section.default_queue_policy, batcher.default_queue_policy)
    for level, policy in (batcher.priority_queue_policy or {}).items():
        _set_policy(section.priority_queue_policy[level], policy)


def _set_sequence_batcher(section: Any, batcher: SequenceBatcher) -> None:
    section.max_sequence_idle_microseconds = batcher.max_sequence_idle_microseconds
    if batcher.strategy is SequenceStrategy.DIRECT:
        strategy = section.direct
        strategy.SetInParent()  # chooses the strategy even with every field at its default
        strategy.minimum_slot_utilization = batcher.minimum_slot_utilization
    else:
        strategy = section.oldest
        strategy.SetInParent()
        strategy.max_candidate_sequences = batcher.max_candidate_sequences
        strategy.preferred_batch_size.extend(batcher.preferred_batch_size or ())
        strategy.preserve_ordering = batcher.preserve_ordering
    strategy.max_queue_delay_microseconds = batcher.max_queue_delay_microseconds


def _set_policy(section: Any, policy: QueuePolicy) -> None:
    section.SetInParent()
    section.timeout_action = model_config_pb2.ModelQueuePolicy.TimeoutAction.Value(policy.timeout_action.value)
    section.default_timeout_microseconds = policy.default_timeout_microseconds
    section.allow_timeout_override = policy.allow_timeout_override
    section.max_queue_size = policy.max_queue_size


def _add_tensors(field: Any, specs: Iterable[TensorSpec]) -> None:
    for spec in specs:
        # Triton wants at least one dim; a scalar per sample is dims [1] reshaped to [].
        tensor = field.add(
            name=spec.name,
            data_type=model_config_pb2.DataType.Value("TYPE_" + dtype_to_triton(spec.dtype)),
            dims=spec.shape or (1,),
        )
        if not spec.shape:
            tensor.reshape.SetInParent()
        if spec.optional:
            tensor.optional = True


def render_ensemble_config(config: "EnsembleConfig") -> str:
    """config.pbtxt text of an ensemble (``platform: "ensemble"`` with its ``ensemble_scheduling``).

    Validate it first with :func:`~pytriton_like.model_config.ensemble.validate_ensemble`.
    """
    message = model_config_pb2.ModelConfig(
        name=config.model_name, platform="ensemble", max_batch_size=config.max_batch_size
    )
    _add_tensors(message.input, config.inputs)
    _add_tensors(message.output, config.outputs)
    scheduling = message.ensemble_scheduling
    scheduling.SetInParent()
    for step in config.steps:
        scheduling.step.add(
            model_name=step.model_name,
            model_version=step.model_version,
            input_map=step.input_map,
            output_map=step.output_map,
        )
    return _text(message)

"""Render a :class:`TritonModelConfig` to Triton's config.pbtxt (protobuf text format)."""

import json
import re
from typing import TYPE_CHECKING, Iterable, List

import numpy as np

from ..exceptions import PyTritonValidationError
from ..relay.backend import BACKEND_NAME
from .common import DynamicBatcher, QueuePolicy, SequenceBatcher, SequenceStrategy
from .triton_model_config import TensorSpec, TritonModelConfig

if TYPE_CHECKING:  # ensemble.py validates with this module's functions
    from .ensemble import EnsembleConfig

__all__ = [
    "render_config",
    "render_ensemble_config",
    "render_version_policy",
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


def render_config(config: TritonModelConfig) -> str:
    """config.pbtxt text for ``config``; validates it first."""
    validate_config(config)
    lines = [
        f"name: {_quote(config.model_name)}",
        f"backend: {_quote(BACKEND_NAME)}",
        f"max_batch_size: {config.max_batch_size if config.batching else 0}",
    ]
    if config.batching and config.batcher is not None:
        lines += _block("dynamic_batching", _batcher_fields(config.batcher))
    if config.sequence_batcher is not None:
        lines += _block("sequence_batching", _sequence_batcher_fields(config.sequence_batcher))
    lines += _tensors("input", config.inputs)
    lines += _tensors("output", config.outputs)
    lines += ["instance_group [", f"  {{ kind: KIND_CPU count: {config.instance_count} }}", "]"]
    if config.decoupled:
        lines += ["model_transaction_policy { decoupled: true }"]
    if config.response_cache:
        lines += ["response_cache { enable: true }"]
    for key, value in sorted(config.backend_parameters.items()):
        lines += [f"parameters {{ key: {_quote(key)} value {{ string_value: {_quote(str(value))} }} }}"]
    return "\n".join(lines) + "\n"


def render_version_policy(versions: Iterable[int]) -> str:
    """The config.pbtxt ``version_policy`` that serves exactly ``versions`` (all bound versions)."""
    numbers = sorted(set(versions))
    if not numbers or any(number < 1 for number in numbers):
        raise PyTritonValidationError(f"a version policy needs version numbers of 1 or more, got {numbers}")
    return f"version_policy: {{ specific: {{ versions: [ {', '.join(map(str, numbers))} ] }} }}\n"


def _quote(text: str) -> str:
    # JSON string escapes are a subset of protobuf text-format escapes.
    return json.dumps(text)


def _block(name: str, fields: List[str]) -> List[str]:
    return [f"{name} {{"] + [f"  {field}" for field in fields] + ["}"]


def _batcher_fields(batcher: DynamicBatcher) -> List[str]:
    fields = [f"max_queue_delay_microseconds: {batcher.max_queue_delay_microseconds}"]
    if batcher.preferred_batch_size:
        fields.append(f"preferred_batch_size: [ {', '.join(str(s) for s in batcher.preferred_batch_size)} ]")
    fields += [
        f"preserve_ordering: {_bool(batcher.preserve_ordering)}",
        f"priority_levels: {batcher.priority_levels}",
        f"default_priority_level: {batcher.default_priority_level}",
    ]
    if batcher.default_queue_policy is not None:
        fields.append(f"default_queue_policy {{ {_policy(batcher.default_queue_policy)} }}")
    for level, policy in sorted((batcher.priority_queue_policy or {}).items()):
        fields.append(f"priority_queue_policy {{ key: {level} value {{ {_policy(policy)} }} }}")
    return fields


def _sequence_batcher_fields(batcher: SequenceBatcher) -> List[str]:
    fields = []
    if batcher.max_sequence_idle_microseconds:
        fields.append(f"max_sequence_idle_microseconds: {batcher.max_sequence_idle_microseconds}")
    strategy = [f"max_queue_delay_microseconds: {batcher.max_queue_delay_microseconds}"]
    if batcher.strategy is SequenceStrategy.DIRECT:
        strategy.append(f"minimum_slot_utilization: {batcher.minimum_slot_utilization}")
    else:
        if batcher.max_candidate_sequences:
            strategy.append(f"max_candidate_sequences: {batcher.max_candidate_sequences}")
        if batcher.preferred_batch_size:
            strategy.append(f"preferred_batch_size: [ {', '.join(str(s) for s in batcher.preferred_batch_size)} ]")
        strategy.append(f"preserve_ordering: {_bool(batcher.preserve_ordering)}")
    fields.append(f"{batcher.strategy.value} {{ {' '.join(strategy)} }}")
    return fields


def _policy(policy: QueuePolicy) -> str:
    return (
        f"timeout_action: {policy.timeout_action.value}"
        f" default_timeout_microseconds: {policy.default_timeout_microseconds}"
        f" allow_timeout_override: {_bool(policy.allow_timeout_override)}"
        f" max_queue_size: {policy.max_queue_size}"
    )


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _tensors(kind: str, specs: Iterable[TensorSpec]) -> List[str]:
    entries = []
    for spec in specs:
        # Triton wants at least one dim; a scalar per sample is dims [1] reshaped to [].
        dims = spec.shape or (1,)
        entry = f"name: {_quote(spec.name)} data_type: TYPE_{dtype_to_triton(spec.dtype)} dims: [ {', '.join(map(str, dims))} ]"
        if not spec.shape:
            entry += " reshape { shape: [ ] }"
        if spec.optional:
            entry += " optional: true"
        entries.append(f"  {{ {entry} }}")
    return [f"{kind} ["] + [",\n".join(entries)] + ["]"]



def render_ensemble_config(config: "EnsembleConfig") -> str:
    """config.pbtxt text of an ensemble (``platform: "ensemble"`` with its ``ensemble_scheduling``).

    Validate it first with :func:`~pytriton_like.model_config.ensemble.validate_ensemble`.
    """
    lines = [
        f"name: {_quote(config.model_name)}",
        'platform: "ensemble"',
        f"max_batch_size: {config.max_batch_size}",
    ]
    lines += _tensors("input", config.inputs)
    lines += _tensors("output", config.outputs)
    steps = []
    for step in config.steps:
        fields = [f"model_name: {_quote(step.model_name)}", f"model_version: {step.model_version}"]
        for kind, mapping in (("input_map", step.input_map), ("output_map", step.output_map)):
            fields += [f"{kind} {{ key: {_quote(key)} value: {_quote(value)} }}" for key, value in mapping.items()]
        steps.append("    {\n" + "\n".join(f"      {field}" for field in fields) + "\n    }")
    lines += ["ensemble_scheduling {", "  step [", ",\n".join(steps), "  ]", "}"]
    return "\n".join(lines) + "\n"

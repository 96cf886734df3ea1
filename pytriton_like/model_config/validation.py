"""Checks of a :class:`TritonModelConfig` and the mapping of numpy dtypes to Triton's data types.

What :mod:`.generator` renders and :mod:`.ensemble` checks steps against; imports neither.
"""

import re

import numpy as np

from ..exceptions import PyTritonValidationError
from .common import ModelWarmup
from .triton_model_config import TensorSpec, TritonModelConfig, response_cache_enabled

__all__ = ["validate_config", "dtype_to_triton", "triton_to_dtype"]

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
    for kind, specs in (("input", config.inputs), ("output", config.outputs)):
        seen = set()
        for spec in specs:
            if spec.name in seen:
                raise PyTritonValidationError(f"{where}: {kind} name {spec.name!r} is used twice")
            seen.add(spec.name)
            _validate_tensor(where, kind, spec)
    _validate_batcher(where, config)
    if response_cache_enabled(config) and config.decoupled:
        raise PyTritonValidationError(
            f"{where}: Triton's response cache does not support decoupled models; "
            "use response_cache=True or decoupled=True, not both"
        )
    _validate_sequence_batcher(where, config)
    _validate_warmup(where, config)


def _validate_warmup(where: str, config: TritonModelConfig) -> None:
    for warmup in config.model_warmup or ():
        if not isinstance(warmup, ModelWarmup):
            raise PyTritonValidationError(f"{where}: model_warmup takes ModelWarmup items, got {warmup!r}")


def scalar_type(dtype):
    """np.float32 for np.float32, np.dtype("float32") or "float32"; object and bytes as Triton's STRING."""
    if dtype in (object, bytes, np.object_, np.bytes_):
        return np.bytes_
    return dtype if isinstance(dtype, type) and issubclass(dtype, np.generic) else np.dtype(dtype).type


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
    if response_cache_enabled(config):
        raise PyTritonValidationError(
            f"{where}: a stateful model cannot use the response cache: its answers depend on the sequence's state"
        )
    for size in batcher.preferred_batch_size or ():
        if not 1 <= size <= config.max_batch_size:
            raise PyTritonValidationError(
                f"{where}: sequence batcher preferred_batch_size {size} is outside 1..max_batch_size"
                f" ({config.max_batch_size})"
            )

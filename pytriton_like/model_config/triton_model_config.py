"""The resolved configuration of one model as Triton sees it (internal)."""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ..relay.backend import BACKEND_NAME
from .common import DeviceKind, DynamicBatcher, ModelWarmup, SequenceBatcher
from .tensor import Tensor

__all__ = ["ResponseCache", "TensorSpec", "TritonModelConfig", "response_cache_enabled", "BOUND_MODEL_BACKEND"]

# The Triton backend that serves a bound model: the relay's, in C (native/, relay/backend.py).
BOUND_MODEL_BACKEND = BACKEND_NAME


@dataclasses.dataclass(frozen=True)
class ResponseCache:
    """Triton's response cache setting of a model (``response_cache { enable: ... }``)."""

    enable: bool


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A named input or output of a model; ``dtype`` is a numpy scalar type or ``object``."""

    name: str
    shape: Tuple[int, ...]
    dtype: object
    optional: bool = False


@dataclasses.dataclass(frozen=True)
class TritonModelConfig:
    """Everything config.pbtxt says of a bound model, with tensor names resolved.

    The fields and their order are PyTriton's (``ModelClient.model_config`` returns this, and
    ``@triton_context`` hands it to a callable), plus ``sequence_batcher``.

    Attributes:
        instance_group: model instances per device kind (``{DeviceKind.KIND_CPU: 2}``); empty: one.
        response_cache: the response cache setting, ``None`` when the config has none.
        model_warmup: the warm-up requests Triton sends before the model is ready.
    """

    model_name: str
    model_version: int = 1
    max_batch_size: int = 4
    batching: bool = True
    batcher: Optional[DynamicBatcher] = None
    instance_group: Dict[DeviceKind, Optional[int]] = dataclasses.field(default_factory=dict)
    decoupled: bool = False
    backend_parameters: Dict[str, str] = dataclasses.field(default_factory=dict)
    inputs: Optional[Sequence[TensorSpec]] = None
    outputs: Optional[Sequence[TensorSpec]] = None
    response_cache: Optional[ResponseCache] = None
    model_warmup: Optional[List[ModelWarmup]] = None
    sequence_batcher: Optional[SequenceBatcher] = None

    def __post_init__(self):
        for field in ("inputs", "outputs"):
            if getattr(self, field) is None:
                object.__setattr__(self, field, [])
        if isinstance(self.response_cache, bool):  # our earlier API took a bool
            object.__setattr__(self, "response_cache", ResponseCache(enable=True) if self.response_cache else None)

    @property
    def backend(self) -> str:
        """The Triton backend of bound models."""
        return BOUND_MODEL_BACKEND

    @property
    def instance_count(self) -> int:
        """Model instances of all device kinds (1 when ``instance_group`` is empty)."""
        return sum(count or 1 for count in self.instance_group.values()) or 1


def response_cache_enabled(config: Union[TritonModelConfig, object]) -> bool:
    """Whether ``config`` turns Triton's response cache on."""
    cache = getattr(config, "response_cache", None)
    return bool(cache.enable) if isinstance(cache, ResponseCache) else bool(cache)


def resolve_tensors(tensors, prefix: str) -> Tuple[TensorSpec, ...]:
    """Names unnamed tensors ``{prefix}_1``, ``{prefix}_2``... by position, as PyTriton does."""
    specs = []
    for index, tensor in enumerate(tensors, start=1):
        if not isinstance(tensor, Tensor):
            raise TypeError(f"expected a Tensor, got {type(tensor).__name__}: {tensor!r}")
        name = tensor.name if tensor.name is not None else f"{prefix}_{index}"
        specs.append(TensorSpec(name=name, shape=tensor.shape, dtype=tensor.dtype, optional=tensor.optional))
    return tuple(specs)

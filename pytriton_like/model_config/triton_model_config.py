"""The resolved configuration of one model as Triton sees it (internal)."""

import dataclasses
from typing import Dict, Optional, Tuple

from .common import DynamicBatcher, SequenceBatcher
from .tensor import Tensor

__all__ = ["TensorSpec", "TritonModelConfig"]


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

    This is also what ``@triton_context`` hands a callable as ``model_config``.
    """

    model_name: str
    model_version: int = 1
    max_batch_size: int = 4
    batching: bool = True
    batcher: Optional[DynamicBatcher] = None
    instance_count: int = 1
    decoupled: bool = False
    inputs: Tuple[TensorSpec, ...] = ()
    outputs: Tuple[TensorSpec, ...] = ()
    response_cache: bool = False
    backend_parameters: Dict[str, str] = dataclasses.field(default_factory=dict)
    sequence_batcher: Optional[SequenceBatcher] = None


def resolve_tensors(tensors, prefix: str) -> Tuple[TensorSpec, ...]:
    """Names unnamed tensors ``{prefix}_1``, ``{prefix}_2``... by position, as PyTriton does."""
    specs = []
    for index, tensor in enumerate(tensors, start=1):
        if not isinstance(tensor, Tensor):
            raise TypeError(f"expected a Tensor, got {type(tensor).__name__}: {tensor!r}")
        name = tensor.name if tensor.name is not None else f"{prefix}_{index}"
        specs.append(TensorSpec(name=name, shape=tensor.shape, dtype=tensor.dtype, optional=tensor.optional))
    return tuple(specs)

"""Specs of a bound model: its tensors and how Triton schedules it."""

from .common import (
    DeviceKind,
    DynamicBatcher,
    ModelWarmup,
    QueuePolicy,
    SequenceBatcher,
    SequenceStrategy,
    TimeoutAction,
    WarmupInput,
)
from .ensemble import EnsembleStep
from .model_config import ModelConfig
from .tensor import Tensor

__all__ = [
    "DeviceKind",
    "DynamicBatcher",
    "EnsembleStep",
    "ModelConfig",
    "ModelWarmup",
    "QueuePolicy",
    "SequenceBatcher",
    "SequenceStrategy",
    "Tensor",
    "TimeoutAction",
    "WarmupInput",
]

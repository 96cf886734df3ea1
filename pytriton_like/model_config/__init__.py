"""Specs of a bound model: its tensors and how Triton schedules it."""

from .common import DeviceKind, DynamicBatcher, QueuePolicy, SequenceBatcher, SequenceStrategy, TimeoutAction
from .model_config import ModelConfig
from .tensor import Tensor

__all__ = [
    "DeviceKind",
    "DynamicBatcher",
    "ModelConfig",
    "QueuePolicy",
    "SequenceBatcher",
    "SequenceStrategy",
    "Tensor",
    "TimeoutAction",
]

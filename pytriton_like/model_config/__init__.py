"""Specs of a bound model: its tensors and how Triton schedules it."""

from .common import DeviceKind, DynamicBatcher, QueuePolicy, TimeoutAction
from .ensemble import EnsembleStep
from .model_config import ModelConfig
from .tensor import Tensor

__all__ = ["DeviceKind", "DynamicBatcher", "ModelConfig", "QueuePolicy", "Tensor", "TimeoutAction"]
__all__ += ["EnsembleStep"]

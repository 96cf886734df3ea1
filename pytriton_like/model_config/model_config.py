"""``ModelConfig``: how Triton schedules a bound model."""

import dataclasses

from .common import DynamicBatcher

__all__ = ["ModelConfig"]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Scheduling options of a bound model.

    Args:
        batching: whether the model takes a batch axis (the first dimension of every tensor).
        max_batch_size: largest batch Triton sends to the callable.
        batcher: dynamic batcher settings, used when ``batching`` is on.
        response_cache: serve repeated identical requests from Triton's response cache
            (needs a cache configured in ``TritonConfig``).
        decoupled: the callable may send zero, one or many responses per request (streaming; gRPC).
    """

    batching: bool = True
    max_batch_size: int = 4
    batcher: DynamicBatcher = dataclasses.field(default_factory=DynamicBatcher)
    response_cache: bool = False
    decoupled: bool = False

"""``ModelConfig``: how Triton schedules a bound model."""

import dataclasses
from typing import List, Optional

from ..exceptions import PyTritonValidationError
from .common import DynamicBatcher, ModelWarmup, SequenceBatcher

__all__ = ["ModelConfig"]


@dataclasses.dataclass
class ModelConfig:
    """Scheduling options of a bound model.

    Mutable, as PyTriton's (code sets ``config.model_warmup = ...`` on one it made); ``bind()``
    takes what it needs, so changing a config later changes no bound model.

    Args:
        batching: whether the model takes a batch axis (the first dimension of every tensor).
        max_batch_size: largest batch Triton sends to the callable.
        batcher: dynamic batcher settings, used when ``batching`` is on.
        response_cache: serve repeated identical requests from Triton's response cache
            (needs a cache configured in ``TritonConfig``).
        decoupled: the callable may send zero, one or many responses per request (streaming; gRPC).
        model_warmup: requests Triton sends the callable when the model loads, before it reports
            the model ready (see docs/warmup.md).
        sequence_batcher: serve a stateful model: Triton's sequence batcher replaces the dynamic
            batcher and routes each sequence's requests to one instance, in order
            (see docs/stateful_models.md). Leave ``batcher`` at its default then.
    """

    batching: bool = True
    max_batch_size: int = 4
    batcher: DynamicBatcher = dataclasses.field(default_factory=DynamicBatcher)
    response_cache: bool = False
    decoupled: bool = False
    model_warmup: Optional[List[ModelWarmup]] = None
    sequence_batcher: Optional[SequenceBatcher] = None

    def __post_init__(self):
        if self.sequence_batcher is not None and self.batcher != DynamicBatcher():
            raise PyTritonValidationError(
                "a model has one scheduler: give either sequence_batcher or a dynamic batcher, not both"
                " (the sequence batcher has its own max_queue_delay_microseconds and preferred_batch_size)"
            )

"""Specs of Triton's scheduling options: dynamic and sequence batchers, queue policies, device kinds."""

import dataclasses
import enum
from typing import Any, Dict, Optional, Sequence

from ..exceptions import PyTritonValidationError

__all__ = [
    "DeviceKind",
    "TimeoutAction",
    "QueuePolicy",
    "DynamicBatcher",
    "SequenceStrategy",
    "SequenceBatcher",
    "WarmupInput",
    "ModelWarmup",
]


class DeviceKind(enum.Enum):
    """Where a model instance runs (Triton's ``instance_group.kind``)."""

    KIND_AUTO = "KIND_AUTO"
    KIND_CPU = "KIND_CPU"
    KIND_GPU = "KIND_GPU"


class TimeoutAction(enum.Enum):
    """What Triton does with a request whose queue timeout expired."""

    REJECT = "REJECT"
    DELAY = "DELAY"


@dataclasses.dataclass(frozen=True)
class QueuePolicy:
    """Triton's ``ModelQueuePolicy``: how requests wait in the scheduler queue.

    Args:
        timeout_action: what to do with a request that timed out in the queue.
        default_timeout_microseconds: queue timeout of a request (0: none).
        allow_timeout_override: whether a request may set its own timeout.
        max_queue_size: longest queue (0: unbounded); past it requests are rejected.
    """

    timeout_action: TimeoutAction = TimeoutAction.REJECT
    default_timeout_microseconds: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0


@dataclasses.dataclass
class DynamicBatcher:
    """Triton's dynamic batcher settings (``dynamic_batching`` in config.pbtxt).

    Mutable, as PyTriton's (code adjusts ``preferred_batch_size`` of a config it holds); a model
    takes a copy when it is bound, so changing a batcher later changes no bound model.

    Args:
        max_queue_delay_microseconds: how long a request may wait for others to join its batch.
        preferred_batch_size: batch sizes the batcher tries to form.
        preserve_ordering: return responses in the order requests came.
        priority_levels: number of priority levels (0: priorities off).
        default_priority_level: priority of a request that does not set one.
        default_queue_policy: queue policy of every priority level without its own.
        priority_queue_policy: queue policy per priority level.
    """

    max_queue_delay_microseconds: int = 0
    preferred_batch_size: Optional[Sequence[int]] = None
    preserve_ordering: bool = False
    priority_levels: int = 0
    default_priority_level: int = 0
    default_queue_policy: Optional[QueuePolicy] = None
    priority_queue_policy: Optional[Dict[int, QueuePolicy]] = None


class SequenceStrategy(enum.Enum):
    """How Triton's sequence batcher assigns sequences to model instances.

    ``DIRECT``: each sequence holds one batch slot of one instance from its start to its end.
    ``OLDEST``: each instance keeps a pool of candidate sequences and batches the oldest
    requests among them, one per sequence.
    """

    DIRECT = "direct"
    OLDEST = "oldest"


@dataclasses.dataclass(frozen=True)
class SequenceBatcher:
    """Triton's sequence batcher settings (``sequence_batching`` in config.pbtxt), for stateful models.

    Every request of one sequence (one correlation id) goes to the same model instance, in the
    order the client sent them; the callable sees each request's ``sequence_id``,
    ``sequence_start`` and ``sequence_end`` (see docs/stateful_models.md).

    Args:
        strategy: ``"direct"`` (default) or ``"oldest"`` (a :class:`SequenceStrategy` or its value).
        max_sequence_idle_microseconds: how long a sequence may have no request queued before
            Triton ends it and frees its slot (0: Triton's default, 1 s).
        max_queue_delay_microseconds: how long a request may wait for others to join its batch.
        minimum_slot_utilization: ``direct`` only: the share of batch slots (0 to 1) that must
            hold a request before a batch runs early (within ``max_queue_delay_microseconds``).
        max_candidate_sequences: ``oldest`` only: sequences each instance batches from (0: Triton's default).
        preferred_batch_size: ``oldest`` only: batch sizes the batcher tries to form.
        preserve_ordering: ``oldest`` only: return responses in the order requests came.
    """

    strategy: SequenceStrategy = SequenceStrategy.DIRECT
    max_sequence_idle_microseconds: int = 0
    max_queue_delay_microseconds: int = 0
    minimum_slot_utilization: float = 0.0
    max_candidate_sequences: int = 0
    preferred_batch_size: Optional[Sequence[int]] = None
    preserve_ordering: bool = False

    def __post_init__(self):
        try:
            strategy = SequenceStrategy(self.strategy)
        except ValueError:
            choices = ", ".join(repr(member.value) for member in SequenceStrategy)
            raise PyTritonValidationError(
                f"SequenceBatcher strategy must be one of {choices}, got {self.strategy!r}"
            ) from None
        object.__setattr__(self, "strategy", strategy)
        if self.preferred_batch_size is not None:
            object.__setattr__(self, "preferred_batch_size", tuple(int(size) for size in self.preferred_batch_size))
        if strategy is SequenceStrategy.DIRECT:
            oldest_only = {
                "max_candidate_sequences": self.max_candidate_sequences != 0,
                "preferred_batch_size": bool(self.preferred_batch_size),
                "preserve_ordering": self.preserve_ordering,
            }
            named = [name for name, given in oldest_only.items() if given]
            if named:
                raise PyTritonValidationError(
                    f"SequenceBatcher: {', '.join(named)} apply to the 'oldest' strategy only, not 'direct'"
                )
        elif self.minimum_slot_utilization:
            raise PyTritonValidationError(
                "SequenceBatcher: minimum_slot_utilization applies to the 'direct' strategy only, not 'oldest'"
            )
        for name in ("max_sequence_idle_microseconds", "max_queue_delay_microseconds", "max_candidate_sequences"):
            if getattr(self, name) < 0:
                raise PyTritonValidationError(f"SequenceBatcher: {name} must be 0 or more, got {getattr(self, name)}")
        if not 0.0 <= self.minimum_slot_utilization <= 1.0:
            raise PyTritonValidationError(
                f"SequenceBatcher: minimum_slot_utilization must be within 0..1, got {self.minimum_slot_utilization}"
            )


@dataclasses.dataclass
class WarmupInput:
    """One input of a warm-up request (Triton's ``ModelWarmup.Input``), as PyTriton's.

    Args:
        dtype: numpy dtype of the input (``np.float32``, ``np.bytes_``...).
        shape: shape of one sample, without the batch axis.
        zero_data: send zeros (for strings: empty strings).
        random_data: send random values.
        input_data_file: send the contents of this file (path relative to the model's
            ``warmup`` folder, as Triton reads it).
    """

    dtype: Any
    shape: Sequence[int]
    zero_data: Optional[bool] = False
    random_data: Optional[bool] = False
    input_data_file: Optional[str] = None


@dataclasses.dataclass
class ModelWarmup:
    """A warm-up request Triton sends the model before it reports it ready (Triton's ``ModelWarmup``).

    Args:
        name: a name for the warm-up, shown in Triton's log.
        batch_size: batch size of the warm-up request (1 for a model without batching).
        inputs: every input of the model, by name.
        count: how many times the request is sent.
    """

    name: str
    batch_size: int
    inputs: Dict[str, WarmupInput]
    count: int

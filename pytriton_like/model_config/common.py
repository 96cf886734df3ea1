"""Specs of Triton's scheduling options: dynamic batcher, queue policies, device kinds."""

import dataclasses
import enum
from typing import Dict, Optional, Sequence

__all__ = ["DeviceKind", "TimeoutAction", "QueuePolicy", "DynamicBatcher"]


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


@dataclasses.dataclass(frozen=True)
class DynamicBatcher:
    """Triton's dynamic batcher settings (``dynamic_batching`` in config.pbtxt).

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

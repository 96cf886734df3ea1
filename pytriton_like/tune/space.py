"""The settings a search may try: the values of each dimension, the neighbours of a point, the grid.

Five dimensions (:class:`~pytriton_like.tune.settings.Settings`' fields): the largest batch, the
queue delay, preferred batch sizes (one size below the largest batch, tried only with a delay:
without one the batcher sends what it has at once), instances as threads and worker processes
(never both above 1: a worker process is one instance). A model served without batching keeps
no batching: its tensors have no batch axis to add.
"""

import dataclasses
import itertools
import os
from typing import Iterator, List, Optional, Sequence, Tuple

from .settings import Settings

__all__ = ["Space", "default_space", "usable_cores", "DEFAULT_MAX_BATCH_SIZES", "DEFAULT_QUEUE_DELAYS_US"]

DEFAULT_MAX_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
DEFAULT_QUEUE_DELAYS_US = (0, 100, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
# More instances as threads than this rarely pay on a CPU (docs/inference_callable.md).
_MAX_DEFAULT_INSTANCES = 4


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclasses.dataclass(frozen=True)
class Space:
    """The values each dimension may take; every point is a valid :class:`Settings`."""

    max_batch_sizes: Tuple[int, ...]
    queue_delays_us: Tuple[int, ...]
    instances: Tuple[int, ...]
    workers: Tuple[int, ...]
    preferred: bool = True

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if field.name != "preferred":
                values = tuple(sorted(set(getattr(self, field.name))))
                if not values:
                    raise ValueError(f"the space has no value of {field.name}")
                object.__setattr__(self, field.name, values)

    def contains(self, settings: Settings) -> bool:
        return (
            settings.max_batch_size in self.max_batch_sizes
            and settings.max_queue_delay_microseconds in self._delays(settings.max_batch_size)
            and settings.preferred_batch_sizes in self._preferred(settings)
            and settings.instances in self.instances
            and settings.workers in self.workers
        )

    def with_point(self, settings: Settings) -> "Space":
        """This space with ``settings``' values added (the given settings are always a point)."""
        return Space(
            max_batch_sizes=self.max_batch_sizes + (settings.max_batch_size,),
            queue_delays_us=self.queue_delays_us + (settings.max_queue_delay_microseconds,),
            instances=self.instances + (settings.instances,),
            workers=self.workers + (settings.workers,),
            preferred=self.preferred or bool(settings.preferred_batch_sizes),
        )

    def size(self) -> int:
        return sum(1 for _ in self.grid())

    def grid(self) -> Iterator[Settings]:
        """Every point, in no particular order."""
        for size in self.max_batch_sizes:
            for delay in self._delays(size):
                for instances, workers in self._parallel():
                    base = Settings(size, delay, (), instances, workers)
                    for preferred in self._preferred(base):
                        yield dataclasses.replace(base, preferred_batch_sizes=preferred)

    def by_distance(self, start: Settings) -> List[Settings]:
        """The grid, nearest to ``start`` first (steps along each dimension, summed): a search cut
        short by its time budget has still looked around the given settings."""
        return sorted(self.grid(), key=lambda point: (self.distance(start, point), _order(point)))

    def distance(self, one: Settings, other: Settings) -> int:
        return (
            _steps(self.max_batch_sizes, one.max_batch_size, other.max_batch_size)
            + _steps(self.queue_delays_us, one.max_queue_delay_microseconds, other.max_queue_delay_microseconds)
            + _steps(self.instances, one.instances, other.instances)
            + _steps(self.workers, one.workers, other.workers)
            + (one.preferred_batch_sizes != other.preferred_batch_sizes)
        )

    def neighbours(self, point: Settings, batch_ms: Optional[float] = None) -> List[Tuple[str, Settings]]:
        """``(move, settings)`` one step away along one dimension; a move names the dimension and
        the direction (``max_batch_size+``), so that a search can keep going the way that paid.

        With ``batch_ms`` (how long a batch took at this point), one more move, ``delay~``: the
        shortest delay of the space above it. Clients in a closed loop fall into two halves that
        take turns (one half's batch runs while the other's waits); a delay longer than a batch
        holds the waiting half until the running one comes back, and one full batch follows.
        Shorter delays change nothing there, so stepping up one at a time would stop on that plateau.
        """
        found = []
        if batch_ms is not None and point.max_batch_size > 1:
            longer = [delay for delay in self.queue_delays_us if delay > batch_ms * 1e3]
            if longer and longer[0] != point.max_queue_delay_microseconds:
                moved = _moved(point, max_queue_delay_microseconds=longer[0])
                if moved is not None and self.contains(moved):
                    found.append(("delay~", moved))
        for name, field, values in (
            ("max_batch_size", "max_batch_size", self.max_batch_sizes),
            ("workers", "workers", self.workers),
            ("instances", "instances", self.instances),
            ("delay", "max_queue_delay_microseconds", self._delays(point.max_batch_size)),
        ):
            current = getattr(point, field)
            for sign, value in (("+", _next(values, current, 1)), ("-", _next(values, current, -1))):
                if value is None:
                    continue
                moved = _moved(point, **{field: value})
                if moved is not None and moved.max_queue_delay_microseconds not in self._delays(moved.max_batch_size):
                    # from a batch of 1 (no delay) to a larger one: the smallest delay of the space
                    moved = _moved(moved, max_queue_delay_microseconds=min(self.queue_delays_us))
                if moved is not None and self.contains(moved) and all(moved != seen for _, seen in found):
                    found.append((name + sign, moved))
        options = self._preferred(point)
        if len(options) > 1:
            at = options.index(point.preferred_batch_sizes) if point.preferred_batch_sizes in options else 0
            for sign, index in (("+", at + 1), ("-", at - 1)):
                if 0 <= index < len(options):
                    found.append(("preferred" + sign, dataclasses.replace(point, preferred_batch_sizes=options[index])))
        return found

    def _delays(self, max_batch_size: int) -> Tuple[int, ...]:
        return self.queue_delays_us if max_batch_size > 1 else (0,)

    def _parallel(self) -> Iterator[Tuple[int, int]]:
        for instances, workers in itertools.product(self.instances, self.workers):
            if instances == 1 or workers == 1:
                yield instances, workers

    def _preferred(self, settings: Settings) -> List[Tuple[int, ...]]:
        """None, then one preferred size from the largest below the batch size down: only with a
        delay (without one the batcher never waits) and only sizes of the space."""
        options: List[Tuple[int, ...]] = [()]
        if self.preferred and settings.max_queue_delay_microseconds > 0:
            below = sorted((size for size in self.max_batch_sizes if 1 < size < settings.max_batch_size), reverse=True)
            options += [(size,) for size in below]
        if settings.preferred_batch_sizes and settings.preferred_batch_sizes not in options:
            options.append(settings.preferred_batch_sizes)
        return options


def default_space(given: Settings, *, cores: int, max_batch_sizes: Sequence[int] = (),
                  queue_delays_us: Sequence[int] = (), instances: Sequence[int] = (),
                  workers: Sequence[int] = (), preferred: bool = True) -> Space:
    """The space searched for ``given``: each dimension's values as given, else its defaults (batch
    sizes 1 to 128, delays 0 to 100 ms, 1 to 4 instances, 1 worker per core); the given settings'
    own values are always in."""
    if not given.batching:
        sizes: Tuple[int, ...] = (0,)
        delays: Tuple[int, ...] = (0,)
    else:
        sizes = tuple(size for size in (max_batch_sizes or DEFAULT_MAX_BATCH_SIZES) if size > 0)
        delays = tuple(queue_delays_us or DEFAULT_QUEUE_DELAYS_US)
    space = Space(
        max_batch_sizes=sizes or (given.max_batch_size,),
        queue_delays_us=delays,
        instances=tuple(instances or range(1, min(_MAX_DEFAULT_INSTANCES, 2 * cores) + 1)),
        workers=tuple(workers or range(1, cores + 1)),
        preferred=preferred and given.batching,
    )
    return space.with_point(given)


def _next(values: Sequence[int], current: int, step: int):
    """The value ``step`` places from ``current`` in ``values`` (current or not in them), or None."""
    ordered = sorted(values)
    if current in ordered:
        index = ordered.index(current) + step
    else:
        index = sum(1 for value in ordered if value < current) + (step if step < 0 else 0)
    return ordered[index] if 0 <= index < len(ordered) else None


def _steps(values: Sequence[int], one: int, other: int) -> int:
    ordered = sorted(values)
    position = {value: index for index, value in enumerate(ordered)}
    return abs(position.get(one, 0) - position.get(other, 0))


def _moved(point: Settings, **change) -> Optional[Settings]:
    """``point`` with ``change``, kept consistent: a batch size at or below a preferred size drops
    it, one of 1 drops the delay; None where no valid settings result (instances with workers)."""
    fields = {**point.as_dict(), **change}
    size = fields["max_batch_size"]
    fields["preferred_batch_sizes"] = [p for p in fields["preferred_batch_sizes"] if p < size]
    if size <= 1:
        fields["max_queue_delay_microseconds"] = 0
    if not fields["max_queue_delay_microseconds"]:
        fields["preferred_batch_sizes"] = []
    if fields["instances"] > 1 and fields["workers"] > 1:
        return None
    return Settings.from_dict(fields)


def _order(point: Settings) -> Tuple:
    return (point.workers, point.instances, point.max_batch_size, point.max_queue_delay_microseconds,
            point.preferred_batch_sizes)

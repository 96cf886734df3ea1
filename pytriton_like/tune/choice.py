"""What the user asks of the settings (:class:`Goal`), how a trial scores, and the choice.

- Objective ``throughput`` (the default): a trial's score is its highest throughput at a level
  whose p99 latency is within the budget; levels stop rising once the budget is passed or the
  throughput stops growing.
- Objective ``latency``: its p99 at the highest level (the load the user expects), lowest first;
  every level is driven.

Measurements within :data:`NOISE` of the best count as a tie, and the tie goes to the cheapest
settings (fewer processes, fewer instances, smaller batches, shorter delay), then the lower
concurrency: the same speed for less.
"""

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

from .settings import Settings
from .trial import Measurement, Trial

__all__ = ["Goal", "Score", "Pick", "Choice", "choose", "pareto_front", "NOISE"]

# Differences smaller than this share of a number are noise on a busy machine: no move, a tie.
NOISE = 0.05
_SATURATED_LEVELS = 2


@dataclasses.dataclass(frozen=True)
class Goal:
    """The constraint and the objective: ``latency_budget_ms`` (p99; None: any) and ``objective``."""

    latency_budget_ms: Optional[float] = None
    objective: str = "throughput"

    def __post_init__(self):
        if self.objective not in ("throughput", "latency"):
            raise ValueError(f"objective must be throughput or latency, got {self.objective!r}")
        if self.latency_budget_ms is not None and not self.latency_budget_ms > 0:
            raise ValueError(f"the latency budget must be above 0 ms, got {self.latency_budget_ms}")

    def meets(self, measurement: Measurement) -> bool:
        return self.latency_budget_ms is None or measurement.p99_ms <= self.latency_budget_ms

    def stop_after(self, settings: Settings, measurements: List[Measurement]) -> Optional[str]:
        """Why the levels above the last one need not be driven (None: go on).

        Past the budget, more clients only wait longer; but not while batches wait for a delay to
        fill them: more clients fill them sooner.
        """
        last = measurements[-1]
        waits = settings.max_queue_delay_microseconds > 0 and last.concurrency < settings.max_batch_size
        if not self.meets(last) and not waits:
            return f"p99 {last.p99_ms:.1f} ms over the budget at concurrency {last.concurrency}"
        if self.objective == "throughput" and len(measurements) > _SATURATED_LEVELS:
            before = max(m.throughput for m in measurements[:-_SATURATED_LEVELS])
            if all(m.throughput < before * (1 + NOISE) for m in measurements[-_SATURATED_LEVELS:]):
                return f"throughput stopped rising at concurrency {measurements[-_SATURATED_LEVELS - 1].concurrency}"
        return None

    def best(self, trial: Trial, levels: Sequence[int]) -> Optional[Measurement]:
        """The trial's measurement that counts (None: it has none within the budget)."""
        if not trial.usable:
            return None
        if self.objective == "latency":
            top = [m for m in trial.measurements if m.concurrency == max(levels)]
            return top[0] if top and self.meets(top[0]) else None
        within = [m for m in trial.measurements if self.meets(m)]
        if not within:
            return None
        return _cheapest_of_ties(trial, within, key=lambda m: m.throughput)

    def score(self, trial: Trial, levels: Sequence[int]) -> "Score":
        best = self.best(trial, levels)
        if best is not None:
            return Score(True, self._value(best))
        if trial.usable:  # nothing within the budget: the nearest to it is the better
            return Score(False, -min(m.p99_ms for m in trial.measurements))
        return Score(False, -math.inf)

    def _value(self, measurement: Measurement) -> float:
        return measurement.throughput if self.objective == "throughput" else -measurement.p99_ms


@dataclasses.dataclass(frozen=True, order=True)
class Score:
    """A trial's rank: within the budget first, then the value (higher is better)."""

    feasible: bool
    value: float

    def beats(self, other: "Score") -> bool:
        """Better by more than noise."""
        if self.feasible != other.feasible:
            return self.feasible
        if math.isinf(other.value):
            return not math.isinf(self.value)
        return self.value > other.value + NOISE * abs(other.value)


@dataclasses.dataclass(frozen=True)
class Pick:
    trial: Trial
    measurement: Measurement


@dataclasses.dataclass(frozen=True)
class Choice:
    """The recommendation (None when no trial met the budget), the closest when none did, and the
    given settings' numbers (at the recommendation's concurrency if they were measured there)."""

    recommended: Optional[Pick]
    closest: Optional[Pick]
    given: Optional[Pick]
    excluded: List[Trial]


def choose(trials: Sequence[Trial], goal: Goal, levels: Sequence[int]) -> Choice:
    """The best usable trial by ``goal``; ties (within :data:`NOISE`) go to the cheapest settings."""
    candidates = [(trial, goal.best(trial, levels)) for trial in trials]
    candidates = [(trial, best) for trial, best in candidates if best is not None]
    recommended = None
    if candidates:
        top = max(goal.score(trial, levels).value for trial, _ in candidates)
        ties = [(trial, best) for trial, best in candidates
                if goal.score(trial, levels).value >= top - NOISE * abs(top)]
        trial, best = min(ties, key=lambda pair: (_cost(pair[0]), pair[1].concurrency))
        recommended = Pick(trial, best)
    closest = None
    usable = [trial for trial in trials if trial.usable]
    if recommended is None and usable:
        trial, best = min(((t, m) for t in usable for m in t.measurements), key=lambda pair: pair[1].p99_ms)
        closest = Pick(trial, best)
    given = None
    for trial in trials:
        if trial.given and trial.usable:  # at the recommendation's concurrency where it has a number there
            same = [m for m in trial.measurements if recommended and m.concurrency == recommended.measurement.concurrency]
            best = (same or [goal.best(trial, levels) or min(trial.measurements, key=lambda m: m.p99_ms)])[0]
            given = Pick(trial, best)
    excluded = [trial for trial in trials if trial.status.value not in ("ok", "pending", "running")]
    return Choice(recommended, closest, given, excluded)


def pareto_front(points: Sequence[Tuple[float, float]]) -> List[int]:
    """The indexes of the ``(p99 ms, throughput)`` points no other point beats on both (lower
    latency and higher throughput), by latency."""
    order = sorted(range(len(points)), key=lambda index: (points[index][0], -points[index][1]))
    front, best = [], -math.inf
    for index in order:
        if points[index][1] > best:
            front.append(index)
            best = points[index][1]
    return front


def _cost(trial: Trial) -> Tuple:
    settings = trial.settings
    return (settings.workers, settings.instances, settings.max_batch_size, settings.max_queue_delay_microseconds,
            len(settings.preferred_batch_sizes))


def _cheapest_of_ties(trial: Trial, measurements: Sequence[Measurement], key) -> Measurement:
    """The highest by ``key``, or among those within noise of it the one at the lowest concurrency."""
    top = max(key(m) for m in measurements)
    ties = [m for m in measurements if key(m) >= top - NOISE * abs(top)]
    return min(ties, key=lambda m: m.concurrency)

"""Which settings to try next: a quick hill climb (the default) or the whole grid.

- :class:`QuickSearch`, as Model Analyzer's quick mode: from the given settings, try the
  neighbours (one step along one dimension); the first that beats the current point by more than
  noise becomes the current point, and the same move is tried again first (a batch size that
  paid when doubled is doubled again); the untried neighbours of the point it left come after the
  new point's, so that a lucky win along one dimension does not drop the others. Where
  neighbours only tie with it (within noise), their own neighbours are tried too (three such
  points at most): a larger batch may pay only with a delay. It ends when no neighbour of the
  current point, or of those points, beats it.
- :class:`GridSearch` (``--search exhaustive``): every point of the space, nearest to the given
  settings first, so that one cut short by the time budget has looked around them.

Both are told each finished trial (:meth:`observe`) and asked for the next settings
(:meth:`next`, None when done).
"""

from typing import Dict, List, Optional, Sequence, Tuple

from .choice import Goal, Score
from .settings import Settings
from .space import Space
from .trial import Trial

__all__ = ["QuickSearch", "GridSearch", "make_search", "STRATEGIES"]

STRATEGIES = ("quick", "exhaustive")
# How many points that only tie with the best are looked around before the climb ends (a plateau of
# equals could otherwise take the whole time budget).
PLATEAU_PATIENCE = 3


class _Search:
    def __init__(self, space: Space, given: Settings, goal: Goal, levels: Sequence[int]):
        self.space = space
        self.given = given
        self.goal = goal
        self.levels = list(levels)
        self.tried: Dict[Settings, Trial] = {}

    def score(self, settings: Settings) -> Score:
        return self.goal.score(self.tried[settings], self.levels)

    def observe(self, trial: Trial) -> None:
        self.tried[trial.settings] = trial

    def next(self) -> Optional[Settings]:
        raise NotImplementedError

    def untried(self) -> int:
        """How many points of the space were not tried."""
        return sum(1 for point in self.space.grid() if point not in self.tried)


class QuickSearch(_Search):
    """Hill climbing from the given settings: first improvement, the paying move repeated first;
    on a plateau (neighbours as good as the current point, within noise) their neighbours too."""

    def __init__(self, space: Space, given: Settings, goal: Goal, levels: Sequence[int]):
        super().__init__(space, given, goal, levels)
        self.current: Optional[Settings] = None
        self._queue: List[Tuple[Settings, Settings]] = []  # (the point looked around, its neighbour to try)
        self._moves: Dict[Settings, str] = {}  # the move that first reached each point
        self._expanded: List[Settings] = []
        self._plateaus_left = PLATEAU_PATIENCE
        self.converged = False

    def observe(self, trial: Trial) -> None:
        super().observe(trial)
        if self.current is None or self.score(trial.settings).beats(self.score(self.current)):
            left, self.current = self.current, trial.settings
            self._plateaus_left = PLATEAU_PATIENCE
            self._expand(self.current, left)

    def next(self) -> Optional[Settings]:
        if self.given not in self.tried:
            return self.given
        while True:
            while self._queue:
                _, point = self._queue.pop(0)
                if point not in self.tried:
                    return point
            plateau = self._plateau() if self._plateaus_left > 0 else None
            if plateau is None:
                self.converged = True
                return None
            self._plateaus_left -= 1
            self._expand(plateau)

    def _plateau(self) -> Optional[Settings]:
        """The best tried point not expanded yet that the current one does not beat."""
        assert self.current is not None
        current = self.score(self.current)
        level = [point for point in self.tried if point not in self._expanded and self.tried[point].usable
                 and not current.beats(self.score(point))]
        return max(level, key=self.score, default=None)

    def _expand(self, point: Settings, left: Optional[Settings] = None) -> None:
        """Queue ``point``'s untried neighbours, the move that reached it first; then those of ``left``
        (the point the climb just left) still queued: a win along one dimension that was only noise
        must not drop the moves along the others."""
        self._expanded.append(point)
        best = self.goal.best(self.tried[point], self.levels) if point in self.tried else None
        batch_ms = best.p50_ms if best is not None else None  # a request's time: about a batch's, and its wait
        last = self._moves.get(point)
        neighbours = [(move, near) for move, near in self.space.neighbours(point, batch_ms) if near not in self.tried]
        neighbours.sort(key=lambda pair: _priority(pair[0], last))
        for move, near in neighbours:
            self._moves.setdefault(near, move)
        ahead = [near for _, near in neighbours]
        behind = [(origin, near) for origin, near in self._queue if origin == left and near not in ahead]
        self._queue = [(point, near) for near in ahead] + behind


# Which way to look first: up the batch size, a delay longer than a batch, more threads (cheaper), more processes,
# a longer delay, then back.
_MOVES = ("max_batch_size+", "delay~", "instances+", "workers+", "delay+", "preferred+",
          "max_batch_size-", "delay-", "preferred-", "instances-", "workers-")


def _priority(move: str, last: Optional[str]) -> Tuple[int, int]:
    return (0 if move == last else 1, _MOVES.index(move) if move in _MOVES else len(_MOVES))


class GridSearch(_Search):
    """Every point of the space, nearest to the given settings first."""

    def __init__(self, space: Space, given: Settings, goal: Goal, levels: Sequence[int]):
        super().__init__(space, given, goal, levels)
        self._order = [given] + [point for point in space.by_distance(given) if point != given]

    def next(self) -> Optional[Settings]:
        while self._order:
            point = self._order.pop(0)
            if point not in self.tried:
                return point
        return None


def make_search(strategy: str, space: Space, given: Settings, goal: Goal, levels: Sequence[int]) -> _Search:
    """The search ``strategy`` names (``quick`` or ``exhaustive``)."""
    if strategy == "quick":
        return QuickSearch(space, given, goal, levels)
    if strategy == "exhaustive":
        return GridSearch(space, given, goal, levels)
    raise ValueError(f"the search is quick or exhaustive, not {strategy!r}")

"""Streams the library cancels itself, by a key the request carries (no gRPC cancellation involved).

A request of a decoupled model may carry the parameter :data:`CANCEL_KEY_PARAMETER`, a text
unique to it (the OpenAI endpoint tags each streamed request with a random one). Whoever holds
the key can end that request's stream through the library — the endpoint, when its HTTP client
went away — instead of cancelling the gRPC stream, which tritonserver 2.51 does not survive
under load (docs/troubleshooting.md). :class:`CancelKeys` is the relay server's bookkeeping:
which batch carries which key, which of a batch's requests were cancelled, and the keys
cancelled before their batch arrived (a request may still wait in Triton's queue), remembered
for a while and at most so many.
"""

import collections
import time
from typing import Callable, Dict, Hashable, Iterable, Optional, OrderedDict, Set

__all__ = ["CANCEL_KEY_PARAMETER", "CancelKeys"]

CANCEL_KEY_PARAMETER = "pytriton_like_cancel_key"

# Keys cancelled before their batch arrived: how long and how many are remembered. A request that
# waits longer than this in Triton's queue runs although cancelled (its pieces are discarded).
REMEMBER_S = 60.0
MAX_REMEMBERED = 10_000


class _Batch:
    __slots__ = ("uncancelled", "keyless")

    def __init__(self, uncancelled: Set[str], keyless: int):
        self.uncancelled = uncancelled  # the keys of its requests not cancelled yet
        self.keyless = keyless  # its requests without a key: they keep the batch running


class CancelKeys:
    """Which batch carries which cancel key (use it from one thread: the relay server's loop).

    Args:
        remember_s: how long a key cancelled before its batch came is remembered.
        max_remembered: how many such keys are remembered at most (the oldest go first).
        clock: seconds, monotonic.
    """

    def __init__(self, remember_s: float = REMEMBER_S, max_remembered: int = MAX_REMEMBERED,
                 clock: Callable[[], float] = time.monotonic):
        self._remember_s = remember_s
        self._max_remembered = max_remembered
        self._clock = clock
        self._batches: Dict[Hashable, _Batch] = {}
        self._owners: Dict[str, Hashable] = {}  # key -> the batch carrying it
        self._early: OrderedDict[str, float] = collections.OrderedDict()  # key -> until when it is remembered

    def add(self, batch: Hashable, keys: Iterable[Optional[str]]) -> bool:
        """A batch arrived, with one key (or None) per request; whether every request of it was
        cancelled already (then it is not registered: end it without calling the callable)."""
        self._expire()
        uncancelled: Set[str] = set()
        keyless = cancelled = 0
        for key in keys:
            if key is None:
                keyless += 1
            elif self._early.pop(key, None) is not None:
                cancelled += 1
            else:
                uncancelled.add(key)
        if not uncancelled and not keyless:
            return cancelled > 0
        if uncancelled:
            self._batches[batch] = _Batch(uncancelled, keyless)
            for key in uncancelled:
                self._owners[key] = batch
        return False

    def cancel(self, key: str) -> Optional[Hashable]:
        """The request with ``key`` is cancelled: the batch to end now (every request of it is
        cancelled), else None. A key of no batch here is remembered for a batch arriving later."""
        batch = self._owners.pop(key, None)
        if batch is None:
            self._remember(key)
            return None
        state = self._batches[batch]
        state.uncancelled.discard(key)
        if state.uncancelled or state.keyless:
            return None
        del self._batches[batch]
        return batch

    def remove(self, batch: Hashable) -> None:
        """The batch ended: forget its keys."""
        state = self._batches.pop(batch, None)
        if state is not None:
            for key in state.uncancelled:
                self._owners.pop(key, None)

    def remembered(self) -> int:
        """How many keys cancelled before their batch are remembered now."""
        self._expire()
        return len(self._early)

    def _remember(self, key: str) -> None:
        self._expire()
        self._early[key] = self._clock() + self._remember_s
        self._early.move_to_end(key)
        while len(self._early) > self._max_remembered:
            self._early.popitem(last=False)

    def _expire(self) -> None:
        now = self._clock()
        early = self._early
        while early:
            key, until = next(iter(early.items()))
            if until > now:
                return
            del early[key]

"""Waiting for what tritonserver tells only when asked: a model ready or unloaded, the server up.

Triton has no notification for these; asking again with a short back-off is the only way to wait,
and that wait is written here once: :class:`Backoff` (the delays) and :func:`poll` (ask until yes,
or the time is up; :func:`poll_async` in a coroutine). The clients' readiness wait
(client/readiness.py), the server's control calls, the stop, ``RemoteTriton``, and a shared-memory
client's unregistration of a region the server still holds use it.
"""

import asyncio
import time
from typing import Awaitable, Callable

__all__ = ["Backoff", "poll", "poll_async"]

_FIRST_DELAY_S = 0.01
_MAX_DELAY_S = 0.5


class Backoff:
    """The delays between two questions: doubling from 10 ms up to 0.5 s, never past a deadline.

    Args:
        timeout_s: the whole wait.
        clock: monotonic clock, replaceable in tests.
    """

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.deadline = clock() + timeout_s
        self._delay = _FIRST_DELAY_S

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - self._clock())

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self._clock() >= self.deadline

    def next_delay(self) -> float:
        """How long to wait before the next question."""
        delay = min(self._delay, self.remaining())
        self._delay = min(self._delay * 2, _MAX_DELAY_S)
        return delay


def poll(condition: Callable[[], bool], timeout_s: float, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Ask ``condition`` until it says True (returns True) or ``timeout_s`` passed (returns False),
    waiting :class:`Backoff`'s delays in between; it is asked at least once."""
    backoff = Backoff(timeout_s)
    while not condition():
        if backoff.expired():
            return False
        sleep(backoff.next_delay())
    return True


async def poll_async(condition: Callable[[], Awaitable[bool]], timeout_s: float) -> bool:
    """:func:`poll` in a coroutine: awaits ``condition`` until it says True, or ``timeout_s`` passed."""
    backoff = Backoff(timeout_s)
    while not await condition():
        if backoff.expired():
            return False
        await asyncio.sleep(backoff.next_delay())
    return True

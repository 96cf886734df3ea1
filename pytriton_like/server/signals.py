"""What asks a serving ``Triton`` to stop: SIGINT/SIGTERM, ``stop()``, the server's exit, a failed callable.

SIGINT stops at once; SIGTERM drains first (docs/deployment.md); a second signal while draining
stops without waiting. A signal while the server is still starting cuts the start short
(:class:`SignalWhileStarting`), unless tritonserver answers already: then the start finishes and
the drain follows, since a load balancer may have sent it requests.
"""

import contextlib
import logging
import signal
import threading
from typing import Callable, Iterator, Optional

from ..console import Console

__all__ = ["SignalSafeEvent", "SignalWhileStarting", "StopRequests", "handling_signals"]

logger = logging.getLogger(__name__)


class SignalWhileStarting(KeyboardInterrupt):
    """Raised by serve()'s signal handler to cut a start short; serve() returns after it."""


class SignalSafeEvent:
    """An event that a signal handler may set (``set``, ``is_set`` and ``wait`` as ``threading.Event``'s).

    ``threading.Event.set()`` takes the lock that ``wait()`` holds for a moment as it begins and
    ends waiting. Python runs a signal handler in the main thread, between two steps of whatever
    that thread was doing: a handler that sets the event the main thread is waiting on, in that
    moment, waits for the main thread, which waits for the handler; the process hangs. Here
    ``set()`` only releases a lock, which never waits, and ``wait()`` waits to acquire it.
    """

    def __init__(self) -> None:
        self._gate = threading.Lock()
        self._gate.acquire()  # closed until set()
        self._unset = [True]  # emptied by the first set(): list.pop() is one step, so the gate opens once

    def set(self) -> None:
        """Set it; the waiters return True. Setting it again does nothing."""
        try:
            self._unset.pop()
        except IndexError:
            return
        self._gate.release()

    def is_set(self) -> bool:
        """Whether it was set."""
        return not self._unset

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until it is set or ``timeout`` seconds passed (``None``: no limit); True if it is set."""
        if self._gate.acquire(timeout=-1 if timeout is None else max(timeout, 0)):
            self._gate.release()  # open for the next waiter
            return True
        return self.is_set()  # another waiter may hold the gate for a moment


class StopRequests:
    """The requests to stop a serving ``Triton``.

    Attributes:
        requested: set once anything asked to stop.
        drain: the stop was asked by SIGTERM: report not ready and serve on for a while first.
        drain_over: set by a second signal, ``stop()`` or the server's exit: a drain ends at once.
    """

    def __init__(self, console: Console):
        self.requested = SignalSafeEvent()
        self.drain = False
        self.drain_over = SignalSafeEvent()
        self._console = console

    def stop_now(self) -> None:
        """Stop, and end a drain that runs."""
        self.requested.set()
        self.drain_over.set()

    def on_signal(self, signum: int, *, starting: bool, answering: bool, running: bool) -> None:
        """Take SIGINT or SIGTERM.

        Args:
            starting: the start has not finished.
            answering: tritonserver answers already (its endpoints started).
            running: the start finished.

        Raises:
            SignalWhileStarting: to cut a start short.
        """
        name = signal.Signals(signum).name
        if signum == signal.SIGTERM and starting and not self.requested.is_set() and answering:
            # the start finishes, then the drain
            self._console.say("received SIGTERM as the start ends; stopping")
            self.drain = True
            self.requested.set()
            return
        if not running:
            self.requested.set()
            self._console.say("received %s while starting; stopping", name)
            raise SignalWhileStarting(f"received {name} while starting")
        if self.requested.is_set():
            logger.info("received %s; stopping without waiting", name)
            self.drain_over.set()
            return
        self._console.say("received %s; stopping", name)
        self.drain = signum == signal.SIGTERM
        self.requested.set()


@contextlib.contextmanager
def handling_signals(handler: Callable[[int, object], None]) -> Iterator[None]:
    """``handler`` takes SIGINT and SIGTERM in the block (from the main thread only: elsewhere Python cannot)."""
    restore = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            restore[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, previous in restore.items():
            signal.signal(signum, previous)

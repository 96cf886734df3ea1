"""One supervisor for the processes a ``Triton`` owns: tritonserver, the OpenAI endpoint's process
and the worker processes.

Each is a :class:`Child`: it is started (``start``: the process is spawned, always on the
supervisor's thread, so that a parent-death signal tied to the spawning thread lasts as long as
the supervisor), waited for (``ready``: blocks until the process serves, or raises), stopped,
and it says how it ended. The :class:`Supervisor` watches every child it launched, on one
thread. When a child exits without being stopped:

- it is started again: the first time at once, then after a back-off that doubles from 0.5 s up
  to 10 s with each restart still within the policy's window;
- at most :attr:`RestartPolicy.max_restarts` times within :attr:`RestartPolicy.window_s`, and
  until :data:`MAX_FAILED_STARTS` restarts in a row failed to serve (a child that cannot start is
  not one a client crashed); then the supervisor gives up on it (:meth:`Child.given_up`), and its
  owner decides what that means (tritonserver and the endpoint: ``serve()`` raises, so that an
  orchestrator takes over; a worker process: its model serves with the others);
- each exit and restart is logged at ERROR with how the child ended (its exit code or signal,
  and what it printed last where that helps);
- the wait for a restarted child to serve runs on a thread of its own: a slow restart never keeps
  the supervisor from seeing another child's exit.

:data:`RESTART_GRACE_S` is how long what depends on a dead child waits for it to be back before
the loss shows: the relay's backend instance holds the batch it has for its worker process
(handed to the C side as ``restart_wait_ms`` in relay.conf), and a model whose worker processes
are all dead is unloaded, so that clients see it not ready, only when none is back within it.
"""

import abc
import collections
import dataclasses
import logging
import multiprocessing.connection
import os
import signal
import threading
import time
from concurrent.futures import Future
from typing import Any, Deque, Dict, Optional, Set, Tuple

from .exceptions import PyTritonValidationError

__all__ = ["Child", "RestartPolicy", "Supervisor", "MAX_FAILED_STARTS", "RESTART_GRACE_S", "describe_exit"]

logger = logging.getLogger(__name__)

RESTART_GRACE_S = 5.0
MAX_FAILED_STARTS = 3
_FIRST_BACKOFF_S = 0.5
_MAX_BACKOFF_S = 10.0


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """How often a child that exits is started again.

    Attributes:
        max_restarts: restarts allowed within ``window_s``; one exit more and the supervisor
            gives up on the child (0: never restarted).
        window_s: the length of the window, in seconds.
    """

    max_restarts: int = 5
    window_s: float = 300.0

    def __post_init__(self):
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise PyTritonValidationError(f"max_restarts must be a whole number >= 0, got {self.max_restarts!r}")
        if not self.window_s > 0:
            raise PyTritonValidationError(f"the restart window must be > 0 seconds, got {self.window_s!r}")

    @staticmethod
    def backoff_s(recent: int) -> float:
        """The wait before a restart when ``recent`` restarts happened within the window already."""
        return 0.0 if recent == 0 else min(_MAX_BACKOFF_S, _FIRST_BACKOFF_S * 2 ** (recent - 1))


class Child(abc.ABC):
    """A process the supervisor starts, watches and starts again.

    Attributes:
        name: how logs name it (``"tritonserver"``, ``"worker 1 of model 'Double'"``).
        policy: how often it is started again.
    """

    name: str
    policy: RestartPolicy

    @abc.abstractmethod
    def start(self) -> None:
        """Spawn the process (and clear what a dead one left); quick: the supervisor's thread calls it."""

    @abc.abstractmethod
    def ready(self) -> None:
        """Block until the process serves; raise an exception saying why when it cannot."""

    @abc.abstractmethod
    def sentinel(self) -> Any:
        """What becomes ready to read once the process exited (a descriptor, or an object with ``fileno``)."""

    @abc.abstractmethod
    def exit_cause(self) -> str:
        """How the process ended, in words (``"killed by SIGKILL"``)."""

    def exit_details(self) -> str:
        """What helps to tell why it ended (the end of its log), for the log line of its exit."""
        return ""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the process, or clear what a dead one left."""

    def inbox(self) -> Optional[Any]:
        """A connection whose messages :meth:`receive` reads while the child runs, or None."""
        return None

    def receive(self) -> None:
        """Read one message of :meth:`inbox` (called on the supervisor's thread when one waits)."""

    def lost(self) -> None:
        """Called on the supervisor's thread as soon as the process exited unexpectedly."""

    def back(self) -> None:
        """Called once a restarted process serves again."""

    def given_up(self, cause: str) -> None:
        """Called when the policy's bound is reached: the child stays dead."""


class Supervisor:
    """Starts, watches and restarts :class:`Child` processes, on a thread of its own.

    Children are launched with :meth:`launch`; before a child is stopped on purpose, :meth:`forget`
    it (or :meth:`pause` them all). :meth:`close` ends the thread: stop the children first, since
    a worker process's parent-death signal is tied to the thread that spawned it.
    """

    def __init__(self, name: str = "pytriton_like-supervisor"):
        self._lock = threading.Lock()
        self._watched: Set[Child] = set()
        self._due: Dict[Child, float] = {}  # restarts waiting for their time
        self._history: Dict[Child, Deque[float]] = {}  # when each child was restarted, within its window
        self._counts: Dict[Child, int] = {}  # restarts in all
        self._failed_starts: Dict[Child, int] = {}  # restarts in a row that did not come to serve
        self._starts: Deque[Tuple[Child, Optional[Future]]] = collections.deque()  # to spawn on the thread
        self._forgotten: Set[Child] = set()
        self._paused = False
        self._closed = False
        self._wake_reader, self._wake_writer = os.pipe()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def launch(self, child: Child) -> "Future[None]":
        """Start ``child`` and watch it once it serves; the future ends then, or holds why it could
        not start. A child whose first start fails is not started again."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the supervisor is closed")
            self._forgotten.discard(child)
            self._starts.append((child, future))
        self._wake()
        return future

    def forget(self, child: Child) -> None:
        """Stop watching and restarting ``child`` (before it is stopped on purpose)."""
        with self._lock:
            self._watched.discard(child)
            self._due.pop(child, None)
            self._forgotten.add(child)
        self._wake()

    def pause(self) -> None:
        """Restart nothing from now on, and ignore exits (the owners are stopping their children)."""
        with self._lock:
            self._paused = True
            self._due.clear()
        self._wake()

    def restarts(self, child: Child) -> int:
        """How many times ``child`` was started again."""
        with self._lock:
            return self._counts.get(child, 0)

    def close(self) -> None:
        """End the watching thread (stop the children first)."""
        self.pause()
        with self._lock:
            self._closed = True
        self._wake()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        for fd in (self._wake_reader, self._wake_writer):
            try:
                os.close(fd)
            except OSError:
                pass

    def _wake(self) -> None:
        try:
            os.write(self._wake_writer, b"x")
        except OSError:  # closed: nothing to wake
            pass

    # -- the supervisor's thread --------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                starts, self._starts = list(self._starts), collections.deque()
                now = time.monotonic()
                for child, due in list(self._due.items()):
                    if due <= now:
                        del self._due[child]
                        starts.append((child, None))
                waitables: Dict[Any, Tuple[Optional[Child], str]] = {self._wake_reader: (None, "wake")}
                for child in self._watched:
                    waitables[child.sentinel()] = (child, "exit")
                    inbox = child.inbox()
                    if inbox is not None:
                        waitables[inbox] = (child, "message")
                timeout = max(0.0, min(self._due.values()) - now) if self._due else None
            for child, future in starts:
                self._start(child, future)
            if starts:
                continue  # a start may have changed what is due or watched
            try:
                ready = multiprocessing.connection.wait(list(waitables), timeout)
            except (OSError, ValueError):  # a child forgotten meanwhile closed what was waited on
                continue
            for item in ready:
                child, what = waitables[item]
                if child is None:
                    os.read(self._wake_reader, 4096)
                    continue
                with self._lock:
                    watched = child in self._watched
                    if what == "exit":
                        self._watched.discard(child)
                if not watched:
                    continue
                if what == "message":
                    self._receive(child)
                else:
                    self._exited(child, child.exit_cause(), child.exit_details())

    def _receive(self, child: Child) -> None:
        try:
            child.receive()
        except Exception:  # noqa: BLE001 - a bad message must not end the watching
            logger.exception("%s: reading its message failed", child.name)

    def _start(self, child: Child, future: Optional[Future]) -> None:
        """Spawn ``child`` here, then wait for it to serve on a thread of its own."""
        try:
            child.start()
        except Exception as exc:  # noqa: BLE001 - the first start's caller raises it; a restart counts it as an exit
            self._failed(child, future, exc)
            return
        threading.Thread(
            target=self._await_ready, args=(child, future), name=f"pytriton_like-starting-{child.name}", daemon=True
        ).start()

    def _await_ready(self, child: Child, future: Optional[Future]) -> None:
        try:
            child.ready()
        except Exception as exc:  # noqa: BLE001 - see _start
            self._failed(child, future, exc)
            return
        with self._lock:
            wanted = not self._paused and child not in self._forgotten
            if wanted:
                self._watched.add(child)
            self._failed_starts.pop(child, None)
        if not wanted:  # stopping meanwhile: its owner no longer knows it runs
            if future is not None:
                future.set_exception(RuntimeError(f"{child.name} started while stopping"))
            child.stop()
            return
        self._wake()
        if future is not None:
            future.set_result(None)
            return
        logger.warning("%s serves again (restart %d)", child.name, self.restarts(child))
        try:
            child.back()
        except Exception:  # noqa: BLE001 - the child serves: a hook's failure is logged only
            logger.exception("%s: after its restart", child.name)

    def _failed(self, child: Child, future: Optional[Future], exc: BaseException) -> None:
        if future is not None:  # a first start: its caller decides
            future.set_exception(exc)
            return
        self._exited(child, f"its restart failed: {exc}", failed_start=True)

    def _exited(self, child: Child, cause: str, details: str = "", failed_start: bool = False) -> None:
        """``child`` ended without being stopped: restart it after its back-off, or give up on it."""
        with self._lock:
            if self._paused or child in self._forgotten:
                return
            now = time.monotonic()
            history = self._history.setdefault(child, collections.deque())
            while history and history[0] < now - child.policy.window_s:
                history.popleft()
            recent = len(history)
            failed_starts = self._failed_starts.get(child, 0) + failed_start
            self._failed_starts[child] = failed_starts
            give_up = recent >= child.policy.max_restarts or failed_starts >= MAX_FAILED_STARTS
            if not give_up:
                delay = child.policy.backoff_s(recent)
                history.append(now)
                self._counts[child] = self._counts.get(child, 0) + 1
                self._due[child] = now + delay
        self._hook(child, "lost")
        policy = child.policy
        details = f"; {details}" if details else ""
        if give_up:
            why = (
                f"its last {failed_starts} restarts in a row failed" if failed_starts >= MAX_FAILED_STARTS
                else f"it was started again {recent} times within {policy.window_s:g} s, the most allowed"
            )
            logger.error("%s exited unexpectedly (%s); %s: giving up on it%s", child.name, cause, why, details)
            self._hook(child, "given_up", cause)
            return
        logger.error(
            "%s exited unexpectedly (%s); starting it again in %.1f s (restart %d of at most %d within %g s)%s",
            child.name, cause, delay, recent + 1, policy.max_restarts, policy.window_s, details,
        )
        self._wake()

    @staticmethod
    def _hook(child: Child, name: str, *args: Any) -> None:
        try:
            getattr(child, name)(*args)
        except Exception:  # noqa: BLE001 - the supervisor goes on watching the others
            logger.exception("%s: %s", child.name, name)



def describe_exit(returncode: Optional[int]) -> str:
    """A process's end in words: ``"exited with code 1"``, ``"killed by SIGABRT"``, or ``"runs"``."""
    if returncode is None:
        return "runs"
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        return f"killed by signal {-returncode}"
    if -returncode == signal.SIGKILL:
        return f"killed by {name} (the kernel's out-of-memory killer, or kill -9)"
    return f"killed by {name}"

"""One worker process of a model, as the supervisor of its pool sees it (the parent's side of
worker_process.py): spawned, waited for, told to cancel or stop, and cleared after its end."""

import contextlib
import logging
import os
import pickle
import threading
import time
from typing import Any, Callable, Optional

from ..exceptions import PyTritonUnrecoverableError
from ..relay.transport import UNIX_SCHEME
from ..supervisor import Child, describe_exit
from .worker_options import WorkerOptions
from .worker_process import WORKER_ENV, Cancel, Ready, SetupFailed, Stop, Unrecoverable, WorkerSpec, worker_main

__all__ = ["WorkerChild", "WorkerFailed"]

logger = logging.getLogger(__name__)

_environ_lock = threading.Lock()  # the worker's marker is in os.environ only while one starts


class WorkerFailed(Exception):
    """A worker process did not become ready; the message names it and says why."""


class WorkerChild(Child):
    """One worker process of a model, across its restarts.

    Args:
        spec: what the process is given.
        options: how it starts.
        context: the multiprocessing context it is started with.
        busy: the flag the process sets while it handles a batch (shared memory).
        on_unrecoverable: called when its callable raised PyTritonUnrecoverableError.
        on_lost, on_back: called when it died, and when it serves again after that.
    """

    def __init__(
        self,
        spec: WorkerSpec,
        options: WorkerOptions,
        context: Any,
        busy: Any,
        on_unrecoverable: Callable[[BaseException], None],
        on_lost: Callable[[], None],
        on_back: Callable[[], None],
    ):
        self.name = f"worker {spec.info.index} of model {spec.info.model_name!r}"
        self.spec = spec
        self.process: Optional[Any] = None
        self._options = options
        self._context = context
        self._busy = busy
        self._on_unrecoverable = on_unrecoverable
        self._on_lost, self._on_back = on_lost, on_back
        self._conn: Optional[Any] = None
        self._serving = False  # it said Ready, and was not lost since: it reads its pipe
        self._lock = threading.Lock()  # the process's start and end (the tree's threads, the pool's close)
        self._pipe_lock = threading.Lock()  # sends on the pipe, and its close (cancel() comes from other threads)
        self._closed = False

    def start(self) -> None:
        with self._lock:
            if self._closed:
                raise WorkerFailed(f"{self.name}: the model stopped")
            self._spawn()

    def _spawn(self) -> None:
        self._clear()
        receiver, sender = self._context.Pipe()
        process = self._context.Process(
            target=worker_main, args=(self.spec, sender, self._busy), name=f"pytriton_like-{self.name.replace(' ', '-')}"
        )
        with _environ_lock:  # a spawned interpreter takes the environment as it is at start
            os.environ[WORKER_ENV] = "1"
            try:
                process.start()
            except (pickle.PicklingError, AttributeError, TypeError, NotImplementedError) as exc:
                sender.close()
                receiver.close()
                raise WorkerFailed(
                    f"the callable of model {self.spec.info.model_name!r} cannot be sent to a spawned worker ({exc}):"
                    " define it at the top level of a module (not in a function, not a lambda), or use"
                    " WorkerOptions(start_method='fork')"
                ) from None
            finally:
                del os.environ[WORKER_ENV]
        sender.close()
        self.process, self._conn = process, receiver

    def ready(self) -> None:
        try:
            self._wait_ready()
        except WorkerFailed:
            self.kill()
            raise
        self._serving = True

    def _wait_ready(self) -> None:
        timeout = self._options.setup_timeout_s
        conn, process = self._conn, self.process
        if conn is None or process is None:
            raise WorkerFailed(f"{self.name}: the model stopped")
        if not conn.poll(timeout):
            raise WorkerFailed(
                f"{self.name} did not finish its setup in {timeout:g} s (WorkerOptions.setup_timeout_s):"
                " is its setup_worker() or an import hanging?"
            )
        try:
            message = conn.recv()
        except (EOFError, OSError):
            process.join(5)
            raise WorkerFailed(f"{self.name} exited before it was ready: {describe_exit(process.exitcode)}{_guard_hint()}") from None
        if isinstance(message, SetupFailed):
            raise WorkerFailed(f"{self.name} failed to start: {message.error_type}: {message.message}\n{message.traceback}")
        if not isinstance(message, Ready):
            raise WorkerFailed(f"{self.name} sent {message!r} instead of saying it is ready")

    def sentinel(self) -> int:
        return self.process.sentinel

    def exit_cause(self) -> str:
        self.process.join(5)
        return describe_exit(self.process.exitcode)

    def inbox(self) -> Optional[Any]:
        return self._conn

    def receive(self) -> None:
        try:
            message = self._conn.recv()
        except (EOFError, OSError):  # the worker is going: its sentinel says so next
            with self._pipe_lock:
                self._conn.close()
                self._conn = None
            return
        if isinstance(message, Unrecoverable):
            self._on_unrecoverable(PyTritonUnrecoverableError(message.message))

    def lost(self) -> None:
        self._serving = False
        self._on_lost()

    def back(self) -> None:
        self._on_back()

    def stop(self) -> None:
        self.ask_to_stop()
        self.finish(time.monotonic())

    def ask_to_stop(self) -> None:
        """Tell the process to stop after the batch it runs (it exits then)."""
        self._serving = False
        with self._pipe_lock:
            if self._conn is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._conn.send(Stop())

    def cancel(self, key: str) -> None:
        """Tell the process that the streamed request tagged with ``key`` is cancelled
        (relay_server/cancel_keys.py); not while it sets up (it reads its pipe once serving)."""
        with self._pipe_lock:
            if self._conn is not None and self._serving:
                with contextlib.suppress(OSError, ValueError):  # going away
                    self._conn.send(Cancel(key))

    def close(self, deadline: float, warn: bool = True) -> None:
        """Wait until ``deadline`` for the process to exit (after :meth:`ask_to_stop`), then kill it;
        it is not started again."""
        self._closed = True
        self.finish(deadline, warn)
        with contextlib.suppress(FileNotFoundError):  # a killed worker leaves its socket's name
            os.unlink(self.spec.address[len(UNIX_SCHEME):])

    def finish(self, deadline: float, warn: bool = False) -> None:
        """Wait until ``deadline`` for the process to exit, then kill it."""
        process = self.process
        if process is not None:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None and warn:
                logger.warning("%s did not stop in time; killing it", self.name)
        self.kill()

    def kill(self) -> None:
        """SIGKILL the process if it runs, and forget it."""
        with self._lock:
            process = self.process
            if process is not None and process.exitcode is None:
                process.kill()
                process.join(5)
            self._clear()

    def _clear(self) -> None:
        """Forget the last process (joined: it ended) and its pipe."""
        self._serving = False
        if self.process is not None:
            self.process.join(5)
        with self._pipe_lock:
            if self._conn is not None:
                self._conn.close()
            self.process = self._conn = None


def _guard_hint() -> str:
    return (
        "; if it printed that Triton() was created while a worker process imported your script, start Triton under"
        ' `if __name__ == "__main__":` (a spawned worker imports your script again)'
    )

"""The worker processes of one bound model version (the parent's side): start, watch, restart, stop.

One thread per pool starts every process and then watches them, so each worker's parent-death
signal is tied to a thread that lives as long as the pool. A worker that dies fails only the
batches it had (the backend answers them at once); the pool starts it again after a back-off,
a bounded number of times, and the backend instance reconnects to it (``revive_ms``).
"""

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..exceptions import PyTritonUnrecoverableError, PyTritonValidationError
from ..relay.transport import UNIX_SCHEME
from .worker_options import WorkerOptions
from .worker_process import WORKER_ENV, Cancel, Ready, SetupFailed, Stop, Unrecoverable, WorkerSpec, worker_main

__all__ = ["WorkerPool"]

logger = logging.getLogger(__name__)

_STOP_TIMEOUT_S = 15  # a running batch finishes first (the worker's own close waits 10 s)
_FIRST_BACKOFF_S = 0.5
_environ_lock = threading.Lock()  # the worker's marker is in os.environ only while one starts


class _WorkerFailed(Exception):
    """A worker did not become ready; the message names it and says why."""


class WorkerPool:
    """The ``len(specs)`` worker processes of one model version.

    Args:
        specs: one per worker, in instance order.
        options: how they start and restart.
        on_unrecoverable: called (on the pool's thread) when a worker's callable raised
            PyTritonUnrecoverableError.
        on_availability: called (on the pool's thread) with False when no worker is alive any
            more, and with True when one is back after that.
    """

    MAX_BACKOFF_S = 10.0  # the longest wait before a restart

    def __init__(
        self,
        specs: Sequence[WorkerSpec],
        options: WorkerOptions,
        on_unrecoverable: Callable[[BaseException], None],
        on_availability: Optional[Callable[[bool], None]] = None,
    ):
        if options.start_method == "fork":
            _check_forkable(specs[0].info.model_name)
        self._specs = list(specs)
        self._options = options
        self._on_unrecoverable = on_unrecoverable
        self._on_availability = on_availability or (lambda available: None)
        self._none_alive = False
        self._context = multiprocessing.get_context(options.start_method)
        self._processes: List[Optional[Any]] = [None] * len(self._specs)
        self._conns: List[Optional[Any]] = [None] * len(self._specs)
        self._send_lock = threading.Lock()  # cancel() sends from other threads than the pool's
        self._ready = [False] * len(self._specs)  # said Ready: it reads its pipe (one in its setup does not)
        # shared with each worker: whether it handles a batch (the parent's stop waits for them)
        self._busy = [self._context.RawValue("b", 0) for _ in self._specs]
        self._restarts = 0
        self._stopping = threading.Event()
        self._wake_reader, self._wake_writer = os.pipe()
        self._started: Future = Future()
        name = self._specs[0].info.model_name
        self._name = name
        self._thread = threading.Thread(target=self._run, name=f"pytriton_like-workers-{name}", daemon=True)

    def start(self) -> None:
        """Start every worker; return once each listens on its socket.

        Raises:
            PyTritonValidationError: a worker failed to start (its error, or its exit, named), or
                did not finish its setup in ``setup_timeout_s``.
        """
        self._thread.start()
        try:
            self._started.result()
        except _WorkerFailed as exc:
            self._thread.join()
            raise PyTritonValidationError(str(exc)) from None

    def busy(self) -> bool:
        """Whether a worker is handling a batch."""
        return any(flag.value for flag in self._busy)

    def alive(self) -> int:
        """How many workers are running."""
        return sum(process is not None and process.is_alive() for process in self._processes)

    def cancel(self, key: str) -> None:
        """Tell every worker that the streamed request tagged with ``key`` is cancelled (the one
        that has it ends it; the others remember the key a while, in case its batch comes later)."""
        with self._send_lock:
            for conn, ready in zip(self._conns, self._ready):
                if conn is not None and ready:
                    with contextlib.suppress(OSError, ValueError):  # a worker going away
                        conn.send(Cancel(key))

    def close(self) -> None:
        """Stop every worker (each finishes the batch it runs) and the pool's thread."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_writer, b"x")
        if self._thread.is_alive():
            self._thread.join()
        for fd in (self._wake_reader, self._wake_writer):
            with contextlib.suppress(OSError):
                os.close(fd)

    # -- the pool's thread --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            for index in range(len(self._specs)):
                self._spawn(index)
            deadline = time.monotonic() + self._options.setup_timeout_s
            for index in range(len(self._specs)):
                self._wait_ready(index, deadline)
        except BaseException as exc:  # noqa: BLE001 - the caller of start() raises it
            self._stop_all(grace_s=0)  # a worker still in its setup would not hear Stop
            self._started.set_exception(exc)
            return
        self._started.set_result(None)
        try:
            self._supervise()
        finally:
            self._stop_all()

    def _spawn(self, index: int) -> None:
        spec = self._specs[index]
        receiver, sender = self._context.Pipe()
        process = self._context.Process(
            target=worker_main,
            args=(spec, sender, self._busy[index]),
            name=f"pytriton_like-worker-{self._name}-{index}",
        )
        with _environ_lock:  # a spawned interpreter takes the environment as it is at start
            os.environ[WORKER_ENV] = "1"
            try:
                process.start()
            except (pickle.PicklingError, AttributeError, TypeError, NotImplementedError) as exc:
                sender.close()
                receiver.close()
                raise _WorkerFailed(
                    f"the callable of model {self._name!r} cannot be sent to a spawned worker ({exc}): define it"
                    " at the top level of a module (not in a function, not a lambda), or use"
                    " WorkerOptions(start_method='fork')"
                ) from None
            finally:
                del os.environ[WORKER_ENV]
        sender.close()
        self._processes[index], self._conns[index] = process, receiver

    def _wait_ready(self, index: int, deadline: float) -> None:
        conn, process = self._conns[index], self._processes[index]
        what = f"worker {index} of model {self._name!r}"
        remaining = max(0.0, deadline - time.monotonic())
        ready = multiprocessing.connection.wait([conn, self._wake_reader], remaining)
        if self._wake_reader in ready:
            raise _WorkerFailed(f"{what}: the model stopped while it started")
        if not ready:
            raise _WorkerFailed(
                f"{what} did not finish its setup in {self._options.setup_timeout_s:g} s"
                " (WorkerOptions.setup_timeout_s): is its setup_worker() or an import hanging?"
            )
        try:
            message = conn.recv()
        except EOFError:
            process.join(5)
            raise _WorkerFailed(f"{what} exited before it was ready: {_cause(process.exitcode)}{_guard_hint()}") from None
        if isinstance(message, SetupFailed):
            raise _WorkerFailed(f"{what} failed to start: {message.error_type}: {message.message}\n{message.traceback}")
        if not isinstance(message, Ready):
            raise _WorkerFailed(f"{what} sent {message!r} instead of saying it is ready")
        self._ready[index] = True

    def _supervise(self) -> None:
        """Watch the workers until the pool closes: their messages, their deaths, their restarts
        (each due at its time: deaths meanwhile are seen, so a model whose workers all died is
        known to have none alive before any comes back)."""
        restart_at: Dict[int, float] = {}
        while not self._stopping.is_set():
            watched = {self._wake_reader: None}
            for index, (process, conn) in enumerate(zip(self._processes, self._conns)):
                if process is not None:
                    watched[process.sentinel] = index
                if conn is not None:
                    watched[conn] = index
            timeout = max(0.0, min(restart_at.values()) - time.monotonic()) if restart_at else None
            for item in multiprocessing.connection.wait(list(watched), timeout):
                index = watched[item]
                if index is None or self._stopping.is_set():
                    return
                if item is self._conns[index]:
                    self._receive(index)
                elif self._processes[index] is not None and item == self._processes[index].sentinel:
                    process = self._processes[index]
                    process.join(5)
                    self._forget(index)
                    self._died(index, _cause(process.exitcode), restart_at)
            for index, due in sorted(restart_at.items()):
                if due <= time.monotonic() and not self._stopping.is_set():
                    del restart_at[index]
                    self._restart(index, restart_at)

    def _receive(self, index: int) -> None:
        try:
            message = self._conns[index].recv()
        except (EOFError, OSError):  # the worker is going: its sentinel says so next
            with self._send_lock:
                self._conns[index].close()
                self._conns[index] = None
            return
        if isinstance(message, Unrecoverable):
            self._on_unrecoverable(PyTritonUnrecoverableError(message.message))

    def _died(self, index: int, cause: str, restart_at: Dict[int, float]) -> None:
        """Worker ``index`` is gone: say so, and have it started again after a back-off, or give up on it."""
        if self.alive() == 0 and not self._none_alive:
            self._none_alive = True
            self._on_availability(False)
        if self._restarts >= self._options.max_restarts:
            logger.error(
                "worker %d of model %r died (%s); its restarts are used up (WorkerOptions.max_restarts=%d):"
                " the model serves with %d of %d workers",
                index, self._name, cause, self._options.max_restarts, self.alive(), len(self._specs),
            )
            with contextlib.suppress(FileNotFoundError):  # the backend instance stops waiting for it
                os.unlink(self._specs[index].address[len(UNIX_SCHEME):])
            return
        backoff = min(self.MAX_BACKOFF_S, _FIRST_BACKOFF_S * 2**self._restarts)
        self._restarts += 1
        logger.warning(
            "worker %d of model %r died (%s); starting it again in %.1f s (restart %d of %d)",
            index, self._name, cause, backoff, self._restarts, self._options.max_restarts,
        )
        restart_at[index] = time.monotonic() + backoff

    def _restart(self, index: int, restart_at: Dict[int, float]) -> None:
        try:
            self._spawn(index)
            self._wait_ready(index, time.monotonic() + self._options.setup_timeout_s)
        except _WorkerFailed as exc:
            if self._processes[index] is not None:
                self._processes[index].kill()
                self._processes[index].join(5)
            self._forget(index)
            self._died(index, str(exc), restart_at)
            return
        logger.info("worker %d of model %r is serving again (pid %d)", index, self._name, self._processes[index].pid)
        if self._none_alive:
            self._none_alive = False
            self._on_availability(True)

    def _forget(self, index: int) -> None:
        with self._send_lock:
            self._ready[index] = False
            if self._conns[index] is not None:
                self._conns[index].close()
            self._processes[index] = self._conns[index] = None

    def _stop_all(self, grace_s: float = _STOP_TIMEOUT_S) -> None:
        """Stop every worker: Stop, then up to ``grace_s`` for it to finish its batch, then SIGKILL."""
        running = [(index, process) for index, process in enumerate(self._processes) if process is not None]
        for index, _ in running:
            with self._send_lock, contextlib.suppress(OSError, ValueError):
                self._conns[index].send(Stop())
        deadline = time.monotonic() + grace_s
        for index, process in running:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None:
                if grace_s:
                    logger.warning("worker %d of model %r did not stop in time; killing it", index, self._name)
                process.kill()
                process.join(5)
            with contextlib.suppress(FileNotFoundError):  # a killed worker leaves its socket's name
                os.unlink(self._specs[index].address[len(UNIX_SCHEME):])
            self._forget(index)


def _check_forkable(model_name: str) -> None:
    """Raise when a forked worker could not work: CUDA initialised here cannot be used in a fork."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        raise PyTritonValidationError(
            f"model {model_name!r}: WorkerOptions(start_method='fork') after CUDA was initialised in this"
            " process: a forked worker cannot use it. Use start_method='spawn' and load the model on its"
            " device in setup_worker(worker)"
        )


def _cause(exitcode: Optional[int]) -> str:
    """A worker's end in words."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        name = signal.Signals(-exitcode).name
        if -exitcode == signal.SIGKILL:
            return f"killed by {name} (the kernel's out-of-memory killer, or kill -9)"
        return f"killed by {name}"
    return f"exited with code {exitcode}"


def _guard_hint() -> str:
    return (
        "; if it printed that Triton() was created while a worker process imported your script, start Triton under"
        ' `if __name__ == "__main__":` (a spawned worker imports your script again)'
    )

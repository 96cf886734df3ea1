"""The worker processes of one bound model version (the parent's side).

Each worker process is a :class:`WorkerChild` of the run's
:class:`~pytriton_like.supervisor.Supervisor`, which spawns it (on its own thread, which the
process's parent-death signal is tied to), watches it, and starts it again when it dies, as
``WorkerOptions`` bounds. A worker that dies fails only the batches it had (the backend answers
them at once); the backend instance connects to the restarted one. While none of the model's
workers lives for longer than the supervisor's grace, the model is unloaded (availability.py).
"""

import contextlib
import logging
import multiprocessing
import os
import pickle
import sys
import threading
import time
from typing import Any, Callable, List, Optional, Sequence

from ..exceptions import PyTritonUnrecoverableError, PyTritonValidationError
from ..relay.transport import UNIX_SCHEME
from ..supervisor import Child, RestartPolicy, Supervisor, describe_exit
from .worker_options import WorkerOptions
from .worker_process import WORKER_ENV, Cancel, Ready, SetupFailed, Stop, Unrecoverable, WorkerSpec, worker_main

__all__ = ["WorkerPool"]

logger = logging.getLogger(__name__)

_STOP_TIMEOUT_S = 15  # a running batch finishes first (the worker's own close waits 10 s)
_environ_lock = threading.Lock()  # the worker's marker is in os.environ only while one starts


class WorkerFailed(Exception):
    """A worker did not become ready; the message names it and says why."""


class WorkerChild(Child):
    """One worker process of a model, across its restarts.

    Args:
        pool: the model's pool, told when the worker is lost, back, or given up on.
        spec: what the process is given.
        busy: the flag the process sets while it handles a batch (shared memory).
    """

    def __init__(self, pool: "WorkerPool", spec: WorkerSpec, busy: Any):
        self.name = f"worker {spec.info.index} of model {spec.info.model_name!r}"
        self.policy = RestartPolicy(pool.options.max_restarts, pool.options.restart_window_s)
        self.spec = spec
        self.process: Optional[Any] = None
        self.serving = False  # started, and not lost since
        self._conn: Optional[Any] = None
        self._pool = pool
        self._busy = busy
        self._lock = threading.Lock()  # the process's start and end (the supervisor's threads, the pool's close)
        self._pipe_lock = threading.Lock()  # sends on the pipe, and its close (cancel() comes from other threads)
        self._closed = False

    def start(self) -> None:
        with self._lock:
            if self._closed:
                raise WorkerFailed(f"{self.name}: the model stopped")
            self._spawn()

    def _spawn(self) -> None:
        self._clear()
        context = self._pool.context
        receiver, sender = context.Pipe()
        process = context.Process(
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
            self._kill()
            raise

    def _wait_ready(self) -> None:
        timeout = self._pool.options.setup_timeout_s
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
            self._pool.on_unrecoverable(PyTritonUnrecoverableError(message.message))

    def lost(self) -> None:
        self.serving = False
        self._pool.lost()

    def back(self) -> None:
        self.serving = True
        self._pool.back()

    def given_up(self, cause: str) -> None:
        self._pool.given_up(self)

    def ask_to_stop(self) -> None:
        """Tell the process to stop after the batch it runs (it exits then)."""
        with self._pipe_lock:
            if self._conn is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._conn.send(Stop())

    def cancel(self, key: str) -> None:
        """Tell the process that the streamed request tagged with ``key`` is cancelled
        (relay_server/cancel_keys.py); not while it sets up (it reads its pipe once serving)."""
        with self._pipe_lock:
            if self._conn is not None and self.serving:
                with contextlib.suppress(OSError, ValueError):  # going away
                    self._conn.send(Cancel(key))

    def stop(self, grace_s: float = _STOP_TIMEOUT_S) -> None:
        """Stop, then up to ``grace_s`` for the process to finish its batch, then SIGKILL."""
        self.ask_to_stop()
        self.finish(time.monotonic() + grace_s, warn=grace_s > 0)

    def finish(self, deadline: float, warn: bool = True) -> None:
        """Wait until ``deadline`` for the process to exit (after :meth:`ask_to_stop`), then kill it;
        it is not started again."""
        self._closed = True
        process = self.process
        if process is not None:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None and warn:
                logger.warning("%s did not stop in time; killing it", self.name)
        self._kill()
        with contextlib.suppress(FileNotFoundError):  # a killed worker leaves its socket's name
            os.unlink(self.spec.address[len(UNIX_SCHEME):])

    def _kill(self) -> None:
        with self._lock:
            process = self.process
            if process is not None and process.exitcode is None:
                process.kill()
                process.join(5)
            self._clear()

    def _clear(self) -> None:
        """Forget the last process (joined: it ended) and its pipe."""
        if self.process is not None:
            self.process.join(5)
        with self._pipe_lock:
            if self._conn is not None:
                self._conn.close()
            self.process = self._conn = None


class WorkerPool:
    """The ``len(specs)`` worker processes of one model version.

    Args:
        specs: one per worker, in instance order.
        options: how they start and restart.
        supervisor: starts, watches and restarts them.
        on_unrecoverable: called when a worker's callable raised PyTritonUnrecoverableError.
        on_availability: called with False when no worker is alive any more, and with True when
            one is back after that (availability.py unloads the model if none is back within the
            supervisor's grace).
    """

    def __init__(
        self,
        specs: Sequence[WorkerSpec],
        options: WorkerOptions,
        supervisor: Supervisor,
        on_unrecoverable: Callable[[BaseException], None],
        on_availability: Optional[Callable[[bool], None]] = None,
    ):
        if options.start_method == "fork":
            _check_forkable(specs[0].info.model_name)
        self.options = options
        self.context = multiprocessing.get_context(options.start_method)
        self.on_unrecoverable = on_unrecoverable
        self._supervisor = supervisor
        self._on_availability = on_availability or (lambda available: None)
        self._lock = threading.Lock()
        self._none_alive = False
        self._name = specs[0].info.model_name
        # shared with each worker: whether it handles a batch (the parent's stop waits for them)
        self._busy = [self.context.RawValue("b", 0) for _ in specs]
        self.children: List[WorkerChild] = [WorkerChild(self, spec, busy) for spec, busy in zip(specs, self._busy)]

    def start(self) -> None:
        """Start every worker; return once each listens on its socket.

        Raises:
            PyTritonValidationError: a worker failed to start (its error, or its exit, named), or
                did not finish its setup in ``setup_timeout_s``.
        """
        launched = [self._supervisor.launch(child) for child in self.children]
        for child, future in zip(self.children, launched):
            try:
                future.result()
            except Exception as exc:  # noqa: BLE001 - whichever failed first is what the user sees
                self.close(grace_s=0)  # a worker still in its setup would not hear Stop
                raise PyTritonValidationError(str(exc)) from None
            child.serving = True

    def busy(self) -> bool:
        """Whether a worker is handling a batch."""
        return any(flag.value for flag in self._busy)

    def alive(self) -> int:
        """How many workers serve (started, and not lost since)."""
        return sum(child.serving for child in self.children)

    def cancel(self, key: str) -> None:
        """Tell every worker that the streamed request tagged with ``key`` is cancelled (the one
        that has it ends it; the others remember the key a while, in case its batch comes later)."""
        for child in self.children:
            child.cancel(key)

    def close(self, grace_s: float = _STOP_TIMEOUT_S) -> None:
        """Stop every worker: each finishes the batch it runs (up to ``grace_s``), then is killed."""
        for child in self.children:
            self._supervisor.forget(child)
        for child in self.children:
            child.ask_to_stop()
        deadline = time.monotonic() + grace_s
        for child in self.children:
            child.finish(deadline, warn=grace_s > 0)

    # -- told by the supervisor ---------------------------------------------------------------

    def lost(self) -> None:
        with self._lock:
            none_alive = self.alive() == 0 and not self._none_alive
            self._none_alive = self._none_alive or none_alive
        if none_alive:
            self._on_availability(False)

    def back(self) -> None:
        with self._lock:
            was_none, self._none_alive = self._none_alive, False
        if was_none:
            self._on_availability(True)

    def given_up(self, child: WorkerChild) -> None:
        logger.error(
            "model %r serves with %d of its %d workers: %s is not started again (WorkerOptions.max_restarts=%d"
            " within restart_window_s=%g)",
            self._name, self.alive(), len(self.children), child.name, self.options.max_restarts,
            self.options.restart_window_s,
        )


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


def _guard_hint() -> str:
    return (
        "; if it printed that Triton() was created while a worker process imported your script, start Triton under"
        ' `if __name__ == "__main__":` (a spawned worker imports your script again)'
    )

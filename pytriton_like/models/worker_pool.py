"""The worker processes of one bound model version: a pool, one node of the supervision tree.

The pool is a child of the run's supervisor and the supervisor of its worker processes
(:class:`~.worker_child.WorkerChild`, with ``WorkerOptions``' restart policy). A worker process
that dies fails only the batches it had (the backend answers them at once); the backend instance
waits for the restarted one up to the policy's grace and connects to it. When the pool gives up
(its worker processes were restarted more often than its policy allows, or one could not be
started again), it stops its worker processes and exits, as one child of the run, with the cause it
saw; the run starts it again, all its worker processes anew, as it restarts any child
(supervisor/__init__.py). While none of its worker processes serves for longer than the grace,
the model is unloaded (availability.py).

To its :class:`~.model.Model` a pool is one relay server among others: it answers ``busy``,
``cancel``, ``serving`` and ``close`` as a thread's relay server does.
"""

import logging
import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import Future
from typing import Callable, List, Optional, Sequence

from ..exceptions import PyTritonValidationError
from ..supervisor import Child, ChildState, Supervisor
from .worker_child import WorkerChild
from .worker_options import WorkerOptions
from .worker_process import WorkerSpec

__all__ = ["WorkerPool"]

logger = logging.getLogger(__name__)

_STOP_TIMEOUT_S = 15  # a running batch finishes first (the worker's own close waits 10 s)


class WorkerPool(Child):
    """The ``len(specs)`` worker processes of one model version.

    Args:
        specs: one per worker process, in instance order.
        options: how they start and restart.
        supervisor: the run's supervisor, which the pool is a child of.
        on_unrecoverable: called when a worker's callable raised PyTritonUnrecoverableError.
        on_availability: called with False when none of its worker processes serves any more, and
            with True when one serves again after that (availability.py unloads the model if none
            is back within the policy's grace).
    """

    def __init__(
        self,
        specs: Sequence[WorkerSpec],
        options: WorkerOptions,
        supervisor: Supervisor,
        on_unrecoverable: Callable[[BaseException], None],
        on_availability: Optional[Callable[[bool], None]] = None,
    ):
        model_name = specs[0].info.model_name
        if options.start_method == "fork":
            _check_forkable(model_name)
        self.name = f"the pool of model {model_name!r}"
        self.options = options
        self._run = supervisor
        self._on_availability = on_availability or (lambda available: None)
        context = multiprocessing.get_context(options.start_method)
        # shared with each worker process: whether it handles a batch (the parent's stop waits for them)
        self._busy = [context.RawValue("b", 0) for _ in specs]
        self.workers: List[WorkerChild] = [
            WorkerChild(spec, options, context, busy, on_unrecoverable, on_lost=self._worker_lost, on_back=self._worker_back)
            for spec, busy in zip(specs, self._busy)
        ]
        self._lock = threading.Lock()
        self._none_serving = False  # told to on_availability
        self._supervisor: Optional[Supervisor] = None  # of its worker processes, new at each start
        self._launched: List[Future] = []
        self._cause = ""  # why it gave up
        self._exit_reader = self._exit_writer = -1  # written when it gives up

    # -- as its model's relay server -----------------------------------------------------------

    def open(self) -> None:
        """Start every worker process, through the run's supervisor; return once each listens.

        Raises:
            PyTritonValidationError: a worker process failed to start (its error, or its exit,
                named), or did not finish its setup in ``setup_timeout_s``.
        """
        try:
            self._run.launch(self).result()
        except Exception as exc:  # noqa: BLE001 - whichever failed first is what the user sees
            self.close(grace_s=0)  # a worker still in its setup would not hear Stop
            raise PyTritonValidationError(str(exc)) from None

    def busy(self) -> bool:
        """Whether a worker process is handling a batch."""
        return any(flag.value for flag in self._busy)

    def serving(self) -> bool:
        """Whether one of its worker processes serves (and the pool has not given up)."""
        return self.alive() > 0

    def alive(self) -> int:
        """How many of its worker processes serve."""
        supervisor = self._supervisor
        if supervisor is None or supervisor.given_up is not None:
            return 0
        return sum(supervisor.state(worker) is ChildState.SERVING for worker in self.workers)

    def cancel(self, key: str) -> None:
        """Tell every worker process that the streamed request tagged with ``key`` is cancelled
        (the one that has it ends it; the others remember the key a while, in case its batch comes later)."""
        for worker in self.workers:
            worker.cancel(key)

    def close(self, grace_s: float = _STOP_TIMEOUT_S) -> None:
        """Stop every worker process: each finishes the batch it runs (up to ``grace_s``), then is killed."""
        self._run.forget(self)
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.close()
        for worker in self.workers:
            worker.ask_to_stop()
        deadline = time.monotonic() + grace_s
        for worker in self.workers:
            worker.close(deadline, warn=grace_s > 0)
        self._close_exit_pipe()

    # -- as a child of the run's supervisor ------------------------------------------------------

    def start(self) -> None:
        self._clear()
        self._supervisor = self._run.supervisor(self.options.restart_policy(), name=self.name, on_given_up=self._give_up)
        self._exit_reader, self._exit_writer = os.pipe()
        self._cause = ""
        self._launched = [self._supervisor.launch(worker) for worker in self.workers]

    def ready(self) -> None:
        for future in self._launched:
            future.result()

    def sentinel(self) -> int:
        return self._exit_reader

    def exit_cause(self) -> str:
        return f"it gave up: {self._cause}"

    def stop(self) -> None:
        self._clear()

    def lost(self) -> None:
        self._worker_lost()

    def back(self) -> None:
        self._worker_back()

    def _give_up(self, cause: str) -> None:
        """Its supervisor gave up (on the tree's thread): stop the worker processes, and exit as a child of the run."""
        policy = self.options.restart_policy()
        logger.error(
            "%s: its worker processes are stopped, and started again as one by the run (WorkerOptions.max_restarts=%d"
            " within restart_window_s=%g; docs/workers.md)", self.name, policy.max_restarts, policy.window_s,
        )
        self._cause = cause
        for worker in self.workers:
            worker.ask_to_stop()
        os.write(self._exit_writer, b"x")

    def _clear(self) -> None:
        """Kill what a pool that gave up left (its worker processes were told to stop), quickly:
        the tree's thread waits."""
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.close()
        deadline = time.monotonic() + 1.0
        for worker in self.workers:
            worker.finish(deadline)
        self._close_exit_pipe()

    def _close_exit_pipe(self) -> None:
        for fd in (self._exit_reader, self._exit_writer):
            if fd >= 0:
                os.close(fd)
        self._exit_reader = self._exit_writer = -1

    # -- told by its supervisor -----------------------------------------------------------------

    def _worker_lost(self) -> None:
        with self._lock:
            none_serving = self.alive() == 0 and not self._none_serving
            self._none_serving = self._none_serving or none_serving
        if none_serving:
            self._on_availability(False)

    def _worker_back(self) -> None:
        with self._lock:
            was_none, self._none_serving = self._none_serving, False
        if was_none:
            self._on_availability(True)


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

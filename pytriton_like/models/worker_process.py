"""The life of one worker process (the child's side): set up, serve one model instance, stop.

The parent (``worker_pool.py``) starts it with :func:`worker_main` as the target and talks to it
over a pipe with the messages below; errors cross as text, never as pickled exceptions.
"""

import contextlib
import ctypes
import dataclasses
import importlib
import inspect
import logging
import os
import signal
import sys
import traceback
from typing import Any, Callable, List, Optional

from ..exceptions import PyTritonInvalidOperationError
from ..model_config.triton_model_config import TritonModelConfig
from ..tracing import model_tracer
from .worker_options import WorkerInfo
from ..relay_server.strategy import start_model_instance
from .nested_calls import NestedCalls
from .nested_settings import NestedCallSettings
from .warmup import warm_up

__all__ = ["CallableByName", "Cancel", "Ready", "SetupFailed", "Stop", "Unrecoverable", "WORKER_ENV", "WorkerSpec", "check_not_in_worker", "portable", "worker_main"]

logger = logging.getLogger(__name__)

# Set in every worker process's environment: a script that starts Triton at its top level (no
# ``if __name__ == "__main__":``) re-runs it in each spawned worker; Triton() refuses there.
WORKER_ENV = "PYTRITON_LIKE_WORKER"
_PR_SET_PDEATHSIG = 1


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker process needs, pickled to it (spawn) or inherited (fork)."""

    info: WorkerInfo
    infer_func: Any  # the callable, or its CallableByName (spawn)
    config: TritonModelConfig
    strict: bool
    address: str
    parent_pid: int
    shm_limit: Optional[int] = None
    nested_calls: Optional[NestedCallSettings] = None  # how its callable calls models of the server
    trace_config: Optional[List[str]] = None


@dataclasses.dataclass(frozen=True)
class CallableByName:
    """A callable a spawned worker finds by name, as pickle finds a plain function: its module's
    attribute, or an object's method. Decorated callables need it: the decorators' wrappers
    (wrapt proxies) cannot be pickled themselves, but the names they stand under can."""

    module: str = ""
    qualname: str = ""
    owner: Any = None  # a bound method's object (pickled by value), with qualname its method's name

    def resolve(self) -> Callable:
        if self.owner is not None:
            return getattr(self.owner, self.qualname)
        found: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            found = getattr(found, part)
        return found


def portable(infer_func: Callable) -> Any:
    """What of ``infer_func`` is pickled to a spawned worker: a :class:`CallableByName` for a
    method or a function its module names, the object itself for anything else."""
    if inspect.ismethod(infer_func):  # wrapt's bound wrappers pass too
        return CallableByName(qualname=infer_func.__name__, owner=infer_func.__self__)
    module, qualname = getattr(infer_func, "__module__", None), getattr(infer_func, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
        by_name = CallableByName(module, qualname)
        with contextlib.suppress(ImportError, AttributeError):
            if by_name.resolve() is infer_func:
                return by_name
    return infer_func


@dataclasses.dataclass(frozen=True)
class Ready:
    """Child to parent: the worker listens on its socket."""

    pid: int


@dataclasses.dataclass(frozen=True)
class SetupFailed:
    """Child to parent: the worker could not start (its callable, ``setup_worker`` or the socket)."""

    error_type: str
    message: str
    traceback: str


@dataclasses.dataclass(frozen=True)
class Unrecoverable:
    """Child to parent: the callable raised PyTritonUnrecoverableError; the server should stop."""

    message: str


@dataclasses.dataclass(frozen=True)
class Stop:
    """Parent to child: stop serving (after the batch that runs) and exit."""


@dataclasses.dataclass(frozen=True)
class Cancel:
    """Parent to child: cancel the streamed request tagged with ``key`` (relay_server/cancel_keys.py)."""

    key: str


def check_not_in_worker(what: str) -> None:
    """Raise while a spawned worker process imports the user's script: starting a server there
    means the script does not guard its top level."""
    if os.environ.get(WORKER_ENV):
        raise PyTritonInvalidOperationError(
            f"{what} was created while a worker process imported your script: a worker started with"
            ' "spawn" imports the main module again, so start Triton under `if __name__ == "__main__":`'
            " (multiprocessing requires it), or use WorkerOptions(start_method=\"fork\")"
        )


def worker_main(spec: WorkerSpec, conn: Any, busy_flag: Any = None) -> None:
    """The worker process's target: set up, say Ready, serve until told to stop or the parent is gone.

    ``busy_flag``: shared with the parent, which reads whether a batch is being handled.
    """
    _die_with_parent(spec.parent_pid)
    os.environ.pop(WORKER_ENV, None)  # the script is imported: from here on, nothing re-runs it
    # Ctrl-C and a SIGTERM to the whole group reach the parent too, which stops the workers in
    # order (in-flight batches first): a worker must not die under a running batch on its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if spec.info.device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = spec.info.device
    nested_calls = NestedCalls(spec.nested_calls) if spec.nested_calls is not None else None
    try:
        worker = _start(spec, conn, nested_calls, busy_flag)
    except BaseException as exc:  # noqa: BLE001 - whatever failed, the parent must hear why
        conn.send(SetupFailed(type(exc).__name__, str(exc), traceback.format_exc()))
        if nested_calls is not None:
            nested_calls.close()
        sys.exit(1)
    conn.send(Ready(os.getpid()))
    try:
        while True:
            message = conn.recv()
            if not isinstance(message, Cancel):
                break  # Stop
            worker.cancel(message.key)
    except (EOFError, OSError):  # the parent is gone
        pass
    worker.close()
    if nested_calls is not None:
        nested_calls.close()


def _start(spec: WorkerSpec, conn: Any, nested_calls: Optional[NestedCalls], busy_flag: Any):
    infer_func = spec.infer_func
    if isinstance(infer_func, CallableByName):
        infer_func = infer_func.resolve()
    setup = getattr(infer_func, "setup_worker", None)
    if callable(setup):
        setup(spec.info)
    if spec.config.model_warmup:  # in each worker, before it says it is ready
        warm_up(spec.config.model_name, [infer_func], spec.config.model_warmup)

    def on_unrecoverable(error: BaseException) -> None:
        conn.send(Unrecoverable(str(error)))

    return start_model_instance(
        config=spec.config,
        infer_func=infer_func,
        strict=spec.strict,
        address=spec.address,
        on_unrecoverable=on_unrecoverable,
        shm_limit=spec.shm_limit,
        nested_calls=nested_calls,
        tracer=model_tracer(spec.trace_config),
        busy_flag=busy_flag,
    )


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when the thread that started it ends (the supervision tree's thread lives
    as long as the run); and exit now if the parent died before this line."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


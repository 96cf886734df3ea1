"""How a model's worker processes start (``WorkerOptions``) and what each is told (``WorkerInfo``).

``Triton.bind(..., workers=N)`` with N > 1 runs the callable in N processes, one model instance
each (docs/workers.md). These specs say how they start; nothing here starts anything.
"""

import dataclasses
from typing import Optional, Sequence, Tuple

from ..exceptions import PyTritonValidationError
from ..supervisor import RestartPolicy

__all__ = ["START_METHODS", "WorkerInfo", "WorkerOptions", "check_workers"]

# "spawn": a fresh interpreter (the callable pickled, the main module imported again);
# "fork": a copy of this process (what it loaded is shared copy-on-write).
START_METHODS = ("spawn", "fork")


@dataclasses.dataclass(frozen=True)
class WorkerOptions:
    """How the worker processes of a model bound with ``workers=N`` start and restart.

    Attributes:
        start_method: ``"spawn"`` (default): each worker is a fresh interpreter; the callable is
            pickled, so it must be a module-level function or a picklable object, and a script
            must start Triton under ``if __name__ == "__main__":``. ``"fork"``: each worker is a
            copy of this process, so a model loaded here is shared copy-on-write; not once CUDA
            is initialised in this process (a forked child cannot use it).
        devices: device ids handed out in turn: worker *i* gets ``devices[i % len(devices)]`` as
            its ``CUDA_VISIBLE_DEVICES`` and as ``WorkerInfo.device``. Empty: the environment as is.
        setup_timeout_s: how long a worker may take to start (imports, ``setup_worker``) before
            the start fails with a message naming it.
        max_restarts: how many times the model's worker processes, all together, are started again
            within ``restart_window_s`` (default 60; a worker process that had served steadily is
            started again at once, one that dies soon after its start after a back-off). One
            death more, or a worker process that cannot be started again three times in a row,
            and the pool gives up: its worker processes are stopped and started again as one,
            which counts as one restart of ``TritonConfig.max_restarts`` (docs/workers.md).
        restart_window_s: the window, in seconds, that ``max_restarts`` counts restarts in
            (default 60).

    Example:
        >>> WorkerOptions(start_method="spawn", devices=["0", "1"])  # doctest: +ELLIPSIS
        WorkerOptions(start_method='spawn', devices=('0', '1'), ...)
    """

    start_method: str = "spawn"
    devices: Sequence[str] = ()
    setup_timeout_s: float = 120.0
    max_restarts: Optional[int] = None
    restart_window_s: Optional[float] = None

    def __post_init__(self):
        if self.start_method not in START_METHODS:
            raise PyTritonValidationError(
                f"WorkerOptions.start_method must be one of {', '.join(START_METHODS)}, got {self.start_method!r}"
            )
        if isinstance(self.devices, str):
            raise PyTritonValidationError(
                f"WorkerOptions.devices takes a list of device ids, e.g. [{self.devices!r}], not a string"
            )
        object.__setattr__(self, "devices", tuple(str(device) for device in self.devices))
        if self.setup_timeout_s <= 0:
            raise PyTritonValidationError(f"WorkerOptions.setup_timeout_s must be > 0, got {self.setup_timeout_s}")
        try:
            object.__setattr__(self, "_restart_policy", RestartPolicy.bounded(self.max_restarts, self.restart_window_s))
        except PyTritonValidationError as exc:
            message = str(exc).replace("the restart window", "restart_window_s")
            raise PyTritonValidationError(f"WorkerOptions.{message}") from None

    def restart_policy(self) -> RestartPolicy:
        """How the worker processes are restarted, and how long what depends on them waits (the
        bound from ``max_restarts`` and ``restart_window_s``, the rest the policy's defaults)."""
        return self._restart_policy  # type: ignore[attr-defined] # set in __post_init__

    def device_of(self, index: int) -> Optional[str]:
        """The device worker ``index`` gets, or None."""
        return self.devices[index % len(self.devices)] if self.devices else None


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """What a worker process is told: handed to the callable's ``setup_worker(worker)`` hook.

    Attributes:
        model_name: the model the worker serves.
        index: which worker, from 0 (the model instance's index).
        count: how many workers the model has.
        device: the device id from ``WorkerOptions.devices`` (also its ``CUDA_VISIBLE_DEVICES``), or None.
    """

    model_name: str
    index: int
    count: int
    device: Optional[str] = None


def check_workers(model_name: str, workers: int, infer_funcs: Tuple) -> None:
    """Raise unless ``workers`` fits the callables bound with it."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise PyTritonValidationError(f"model {model_name!r}: workers must be a whole number >= 1, got {workers!r}")
    if workers > 1 and len(infer_funcs) > 1:
        raise PyTritonValidationError(
            f"model {model_name!r}: infer_func is a list of {len(infer_funcs)} callables (one thread each) and"
            f" workers={workers}: pass one callable with workers=N for N processes, or a list for threads"
        )

"""``RestartPolicy``: how one supervisor restarts its children, and how long what depends on a child
waits for it. The only place where these numbers have defaults."""

import dataclasses
import signal
from typing import Optional

from ..exceptions import PyTritonValidationError

__all__ = ["RestartPolicy", "describe_exit"]


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """How one supervisor restarts its children (a frozen value that checks its own consistency).

    A child that exits without being stopped is started again:

    - at once when it had served steadily (``steady_s`` or longer): a child that served is not in a
      crash loop, whatever made it exit (Kubernetes resets its CrashLoopBackOff after a container
      ran steadily);
    - else (its restart failed to serve, or it exited soon after it served) after a back-off: the
      first such exit in a row at once, the next after ``first_backoff_s``, doubling up to
      ``max_backoff_s``.

    Every restart counts towards the supervisor's *restart intensity*, all its children together
    (Erlang/OTP's): past ``max_restarts`` within ``window_s``, or after ``max_failed_starts``
    restarts of one child in a row that failed to serve, the supervisor gives up (what that means
    is its owner's: ``pytriton_like.supervisor``'s docstring says it per level). The default bound,
    one restart a second over a minute, leaves room for what clients can cause: 16 raw gRPC
    clients cancelling streams made tritonserver 2.51 abort about 20 times a minute, each time
    after 0.1 to 9 s of serving (bench/reliability.py storm grpc).

    Attributes:
        max_restarts: restarts allowed within ``window_s``, all children together; one exit more
            and the supervisor gives up (0: the first exit).
        window_s: the window's length, in seconds.
        max_failed_starts: restarts of one child in a row that fail to serve before the supervisor
            gives up (a child that cannot start is not one a client crashed).
        steady_s: how long a child must have served for its next exit to restart it at once.
        first_backoff_s: the back-off of the second quick exit in a row.
        max_backoff_s: the longest back-off; shorter than ``grace_s``.
        grace_s: how long what depends on a child waits for it to be back before its loss shows
            (a backend instance holds its batch for its worker process, a model whose worker
            processes are all lost is unloaded only then). Longer than any back-off, so that a
            child waiting its turn is not taken for gone.
    """

    max_restarts: int = 60
    window_s: float = 60.0
    max_failed_starts: int = 3
    steady_s: float = 1.0
    first_backoff_s: float = 0.5
    max_backoff_s: float = 4.0
    grace_s: float = 5.0

    def __post_init__(self):
        for name in ("max_restarts", "max_failed_starts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "max_restarts" else 1):
                least = 0 if name == "max_restarts" else 1
                raise PyTritonValidationError(f"{name} must be a whole number >= {least}, got {value!r}")
        if not self.window_s > 0:
            raise PyTritonValidationError(f"the restart window must be > 0 seconds, got {self.window_s!r}")
        for name in ("steady_s", "first_backoff_s", "max_backoff_s"):
            if not getattr(self, name) >= 0:
                raise PyTritonValidationError(f"{name} must be 0 or more, got {getattr(self, name)!r}")
        if self.first_backoff_s > self.max_backoff_s:
            raise PyTritonValidationError(
                f"the first back-off ({self.first_backoff_s:g} s) is longer than the longest ({self.max_backoff_s:g} s)"
            )
        if not self.grace_s > self.max_backoff_s:
            raise PyTritonValidationError(
                f"the grace ({self.grace_s:g} s) must be longer than the longest back-off ({self.max_backoff_s:g} s):"
                " what depends on a child would take it for gone while it waits to be restarted"
            )

    @classmethod
    def bounded(cls, max_restarts: Optional[int] = None, window_s: Optional[float] = None) -> "RestartPolicy":
        """The default policy with the bound given (``None``: the default's), as ``TritonConfig`` and
        ``WorkerOptions`` state it."""
        defaults = cls()
        return cls(
            max_restarts=defaults.max_restarts if max_restarts is None else max_restarts,
            window_s=defaults.window_s if window_s is None else window_s,
        )

    def backoff_s(self, quick_exits: int) -> float:
        """The wait before a restart after ``quick_exits`` exits in a row that came soon after a start
        (0: the child had served steadily)."""
        if quick_exits <= 1:
            return 0.0
        return min(self.max_backoff_s, self.first_backoff_s * 2 ** (quick_exits - 2))


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

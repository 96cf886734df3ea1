"""What a supervisor supervises: a :class:`Child` (the process, or a supervisor of processes, behind
one small interface) and the :class:`ChildRecord` it keeps of each: one state, named transitions."""

import abc
import enum
from typing import Any, Optional

from .policy import RestartPolicy

__all__ = ["Child", "ChildState", "ChildRecord"]


class Child(abc.ABC):
    """A process (or a group of them, such as a model's worker processes) that a supervisor starts,
    watches and starts again.

    Attributes:
        name: how logs name it (``"tritonserver"``, ``"worker process 1 of model 'Double'"``).
    """

    name: str

    @abc.abstractmethod
    def start(self) -> None:
        """Spawn the process (and clear what a dead one left); quick: the supervisor's thread calls it,
        and a parent-death signal tied to the spawning thread lasts as long as that thread."""

    @abc.abstractmethod
    def ready(self) -> None:
        """Block until the child serves; raise an exception saying why when it cannot."""

    @abc.abstractmethod
    def sentinel(self) -> Any:
        """What becomes ready to read once the child exited (a descriptor, or an object with ``fileno``)."""

    @abc.abstractmethod
    def exit_cause(self) -> str:
        """How the child ended, in words (``"killed by SIGKILL"``)."""

    def exit_details(self) -> str:
        """What helps to tell why it ended (the end of its log), for the log line of its exit."""
        return ""

    def ended_on_purpose(self) -> str:
        """Why the child was made to end so that it starts again (its memory, say), or "": it ended by itself."""
        return ""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the child, or clear what a dead one left."""

    def inbox(self) -> Optional[Any]:
        """A connection whose messages :meth:`receive` reads while the child serves, or None."""
        return None

    def receive(self) -> None:
        """Read one message of :meth:`inbox` (called on the supervisor's thread when one waits)."""

    def lost(self) -> None:
        """Called on the supervisor's thread as soon as the child exited unexpectedly."""

    def back(self) -> None:
        """Called once a restarted child serves again."""


class ChildState(enum.Enum):
    """Where a supervised child is."""

    STARTING = "starting"  # spawned (first start or restart); waiting for it to serve
    SERVING = "serving"  # watched: its exit is seen at once
    LOST = "lost"  # exited without being stopped (or its restart failed); being decided on
    WAITING = "waiting to restart"  # its back-off runs
    GIVEN_UP = "given up"  # not started again: its supervisor gave up
    STOPPED = "stopped"  # stopped on purpose (forgotten), or its supervisor gave up on another child


class ChildRecord:
    """What a supervisor knows of one child: its state and what its next restart is decided on.

    Each change is one named transition; one that does not apply to the state the child is in
    returns False and changes nothing (a child stopped on purpose while its restart was starting
    stays stopped). Not thread-safe: the supervisor's lock guards every record.

    ::

        STARTING --serving()--> SERVING --lost()--> LOST --wait()--> WAITING --starting()--> STARTING
        STARTING --lost(failed_start=True)--> LOST --give_up()--> GIVEN_UP
        any --stop()--> STOPPED

    Attributes:
        child: the child.
        state: where it is.
        restarts: how many times it was started again.
        failed_starts: its restarts in a row that did not come to serve.
        quick_exits: its exits in a row that came before it had served steadily (its back-off).
        serving_since: when it last began to serve (monotonic seconds), or None.
        due: when it is started again, while it waits.
    """

    def __init__(self, child: Child):
        self.child = child
        self.state = ChildState.STARTING
        self.restarts = 0
        self.failed_starts = 0
        self.quick_exits = 0
        self.serving_since: Optional[float] = None
        self.due: Optional[float] = None

    def __repr__(self) -> str:
        return f"<{self.child.name}: {self.state.value}>"

    def serving(self, now: float) -> bool:
        """It serves (its start came to serve): watched from now on."""
        if self.state is not ChildState.STARTING:
            return False
        self.state = ChildState.SERVING
        self.failed_starts = 0
        self.serving_since = now
        return True

    def lost(self, now: float, policy: RestartPolicy, failed_start: bool = False) -> bool:
        """It exited without being stopped (``failed_start``: its restart failed to serve)."""
        if self.state is not (ChildState.STARTING if failed_start else ChildState.SERVING):
            return False
        steady = self.serving_since is not None and now - self.serving_since >= policy.steady_s
        self.quick_exits = 0 if steady and not failed_start else self.quick_exits + 1
        self.failed_starts += failed_start
        self.state = ChildState.LOST
        return True

    def served_s(self, now: float) -> Optional[float]:
        """How long it served before its exit (None: it did not come to serve)."""
        return None if self.serving_since is None else now - self.serving_since

    def wait(self, due: float) -> bool:
        """It is started again at ``due``."""
        if self.state is not ChildState.LOST:
            return False
        self.state = ChildState.WAITING
        self.restarts += 1
        self.due = due
        return True

    def starting(self) -> bool:
        """Its restart begins (its back-off ended)."""
        if self.state is not ChildState.WAITING:
            return False
        self.state = ChildState.STARTING
        self.serving_since = self.due = None
        return True

    def give_up(self) -> bool:
        """It is not started again."""
        if self.state is not ChildState.LOST:
            return False
        self.state = ChildState.GIVEN_UP
        return True

    def stop(self) -> ChildState:
        """It is stopped on purpose (or its supervisor gave up); returns the state it was in."""
        was, self.state = self.state, ChildState.STOPPED
        self.due = None
        return was

"""``Supervisor``: one node of the supervision tree: its children, its restart intensity, its giving up."""

import collections
import logging
import threading
import time
from concurrent.futures import Future
from typing import Callable, Deque, Dict, List, Optional

from .child import Child, ChildRecord, ChildState
from .policy import RestartPolicy
from .watcher import Watcher

__all__ = ["Supervisor"]

logger = logging.getLogger(__name__)


class Supervisor:
    """Starts, watches and restarts its :class:`Child` children, as its :class:`RestartPolicy` says.

    The first supervisor of a tree owns the thread that spawns and watches every child of the tree
    (:class:`~.watcher.Watcher`); :meth:`supervisor` makes one under it, sharing that thread, with
    a policy of its own (a model's worker processes are the children of their pool's supervisor,
    the pool a child of the run's).

    Args:
        policy: how its children are restarted, and when it gives up.
        name: how logs name it (``"the run"``, ``"the pool of model 'Double'"``).
        on_given_up: called (on the tree's thread) with what made it give up, a sentence: it restarts
            none of its children from then on, and its owner says what giving up means.
        parent: the supervisor whose thread it shares (None: a tree of its own).
    """

    def __init__(
        self,
        policy: Optional[RestartPolicy] = None,
        *,
        name: str = "the supervisor",
        on_given_up: Optional[Callable[[str], None]] = None,
        parent: Optional["Supervisor"] = None,
    ):
        self.name = name
        self.policy = policy if policy is not None else RestartPolicy()
        self._on_given_up = on_given_up or (lambda cause: None)
        self._root = parent is None
        self._watcher = Watcher(f"pytriton_like-{name.replace(' ', '-')}") if parent is None else parent._watcher
        self._lock = self._watcher.lock
        self._records: Dict[Child, ChildRecord] = {}
        self._launches: Dict[Child, Future] = {}  # first starts under way, told how they end
        self._restarts: Deque[float] = collections.deque()  # when its children were restarted, within the window
        self._given_up: Optional[str] = None
        with self._lock:
            if self._watcher.closed:
                raise RuntimeError("the supervisor is closed")
            self._watcher.add(self)

    def supervisor(self, policy: RestartPolicy, *, name: str, on_given_up: Callable[[str], None]) -> "Supervisor":
        """A supervisor under this one, on the same thread (see the class)."""
        return Supervisor(policy, name=name, on_given_up=on_given_up, parent=self)

    # -- what its owner asks -----------------------------------------------------------------

    def launch(self, child: Child) -> "Future[None]":
        """Start ``child`` and watch it once it serves; the future ends then, or holds why it could
        not start. A child whose first start fails is not started again."""
        future: Future = Future()
        with self._lock:
            if self._watcher.closed:
                raise RuntimeError("the supervisor is closed")
            record = self._records[child] = ChildRecord(child)
            self._launches[child] = future
            self._watcher.start(self, record)
        self._watcher.wake()
        return future

    def forget(self, child: Child) -> None:
        """Stop watching and restarting ``child`` (before it is stopped on purpose)."""
        with self._lock:
            record = self._records.pop(child, None)
            if record is not None:
                record.stop()
        self._watcher.wake()

    def pause(self) -> None:
        """Restart nothing from now on, anywhere in the tree, and ignore exits (the owners are
        stopping their children)."""
        with self._lock:
            self._watcher.paused = True
        self._watcher.wake()

    def restarts(self, child: Child) -> int:
        """How many times ``child`` was started again."""
        with self._lock:
            record = self._records.get(child)
            return record.restarts if record is not None else 0

    def state(self, child: Child) -> Optional[ChildState]:
        """Where ``child`` is (None: not a child of this supervisor, or forgotten)."""
        with self._lock:
            record = self._records.get(child)
            return record.state if record is not None else None

    def serving(self) -> bool:
        """Whether it has not given up and every child of it serves."""
        with self._lock:
            return self._given_up is None and all(r.state is ChildState.SERVING for r in self._records.values())

    @property
    def given_up(self) -> Optional[str]:
        """What made it give up (a sentence), or None."""
        return self._given_up

    def close(self) -> None:
        """Forget every child; the first supervisor of a tree ends the tree's thread (stop the
        children first: a worker process's parent-death signal is tied to that thread)."""
        with self._lock:
            for record in self._records.values():
                record.stop()
            self._records.clear()
            self._watcher.remove(self)
        if self._root:
            self._watcher.close()
        else:
            self._watcher.wake()

    # -- on the tree's thread ----------------------------------------------------------------

    def records(self) -> List[ChildRecord]:
        """Its children's records (under the tree's lock)."""
        return list(self._records.values())

    def has(self, record: ChildRecord) -> bool:
        """Whether ``record`` is the record of a child it supervises now."""
        return self._records.get(record.child) is record

    def spawn(self, record: ChildRecord) -> None:
        """Spawn the child here, on the tree's thread, then wait for it to serve on a thread of its own."""
        try:
            record.child.start()
        except Exception as exc:  # noqa: BLE001 - a first start's launcher raises it; a restart counts it as an exit
            self._failed(record, exc)
            return
        threading.Thread(
            target=self._await_ready, args=(record,), name=f"pytriton_like-starting-{record.child.name}", daemon=True
        ).start()

    def exited(self, record: ChildRecord) -> None:
        """A serving child's exit was seen."""
        child = record.child
        with self._lock:
            if self._watcher.paused or not self.has(record) or record.state is not ChildState.SERVING:
                return
        self._lost(record, child.exit_cause(), child.exit_details())

    def _await_ready(self, record: ChildRecord) -> None:
        child = record.child
        try:
            child.ready()
        except Exception as exc:  # noqa: BLE001 - see spawn
            self._failed(record, exc)
            return
        with self._lock:
            future = self._launches.pop(child, None)
            # one transition, under the lock: an exit seen from now on finds it serving
            served = not self._watcher.paused and self.has(record) and record.serving(time.monotonic())
        if not served:  # forgotten or paused meanwhile: its owner no longer knows it runs
            if future is not None:
                future.set_exception(RuntimeError(f"{child.name} started while stopping"))
            child.stop()
            return
        self._watcher.wake()
        if future is not None:
            future.set_result(None)
            return
        logger.warning("%s serves again (restart %d)", child.name, record.restarts)
        _hook(child, "back")

    def _failed(self, record: ChildRecord, exc: BaseException) -> None:
        with self._lock:
            future = self._launches.pop(record.child, None)
            if future is not None and self.has(record):
                del self._records[record.child]
        if future is not None:  # a first start: its launcher decides
            future.set_exception(exc)
            return
        self._lost(record, str(exc), failed_start=True)

    def _lost(self, record: ChildRecord, cause: str, details: str = "", failed_start: bool = False) -> None:
        """The child ended without being stopped: restart it after its back-off, or give up."""
        child, policy = record.child, self.policy
        with self._lock:
            now = time.monotonic()
            served = record.served_s(now)
            if self._watcher.paused or not self.has(record) or not record.lost(now, policy, failed_start):
                return
            purpose = "" if failed_start else child.ended_on_purpose()
            if failed_start:
                what = f"{child.name} could not be started again ({cause})"
            elif purpose:
                what = f"{child.name} was stopped to be started again ({purpose})" + (
                    f" after serving {served:.1f} s" if served else "")
            else:
                what = f"{child.name} exited unexpectedly ({cause})" + (f" after serving {served:.1f} s" if served else "")
            while self._restarts and self._restarts[0] < now - policy.window_s:
                self._restarts.popleft()
            recent = len(self._restarts)
            why = None
            if record.failed_starts >= policy.max_failed_starts:
                why = f"its last {record.failed_starts} restarts in a row failed to serve"
            elif recent >= policy.max_restarts:
                why = f"{self.name} restarted its children {recent} times within {policy.window_s:g} s, the most it allows"
            if why is None:
                delay = policy.backoff_s(record.quick_exits)
                record.wait(now + delay)
                self._restarts.append(now)
            else:
                record.give_up()
                self._given_up = f"{what}; {why}"
                for other in self._records.values():
                    if other is not record:
                        other.stop()
        _hook(child, "lost")
        details = f"; {details}" if details else ""
        if why is not None:
            logger.error("%s: %s gives up%s", self._given_up, self.name, details)
            try:
                self._on_given_up(self._given_up)
            except Exception:  # noqa: BLE001 - the tree goes on watching the others
                logger.exception("%s: giving up", self.name)
            return
        logger.error(
            "%s; starting it again %s (restart %d of at most %d within %g s)%s",
            what, f"in {delay:.1f} s" if delay else "at once", recent + 1, policy.max_restarts, policy.window_s, details,
        )
        self._watcher.wake()


def _hook(child: Child, name: str) -> None:
    try:
        getattr(child, name)()
    except Exception:  # noqa: BLE001 - the supervisor goes on watching the others
        logger.exception("%s: %s", child.name, name)

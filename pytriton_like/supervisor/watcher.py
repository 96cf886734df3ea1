"""The one thread of a supervision tree: it spawns every child, waits for every serving child's exit
and messages, and begins each restart when its back-off ends. What to do about an exit is decided by
the child's own supervisor (tree.py)."""

import collections
import logging
import multiprocessing.connection
import os
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Protocol, Tuple

from .child import ChildRecord, ChildState

__all__ = ["Watcher"]

logger = logging.getLogger(__name__)


class Supervisor(Protocol):
    """What the thread asks of each supervisor of its tree (tree.py's)."""

    def records(self) -> List[ChildRecord]:
        """Its children's records (under the tree's lock)."""

    def has(self, record: ChildRecord) -> bool:
        """Whether ``record`` is the record of a child it supervises now."""

    def spawn(self, record: ChildRecord) -> None:
        """Spawn the child (on the tree's thread)."""

    def exited(self, record: ChildRecord) -> None:
        """A serving child's exit was seen."""


class Watcher:
    """The thread shared by the supervisors of one tree, with the lock that guards their records.

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str):
        self.lock = threading.Lock()
        self.paused = False  # nothing is started again, exits are ignored: the owners stop their children
        self._closed = False
        self._supervisors: List[Supervisor] = []
        self._starts: Deque[Tuple[Supervisor, ChildRecord]] = collections.deque()  # to spawn on the thread
        self._wake_reader, self._wake_writer = os.pipe()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def add(self, supervisor: Supervisor) -> None:
        """Watch the children of ``supervisor`` too (under :attr:`lock`)."""
        self._supervisors.append(supervisor)

    def remove(self, supervisor: Supervisor) -> None:
        """Stop watching the children of ``supervisor`` (under :attr:`lock`)."""
        if supervisor in self._supervisors:
            self._supervisors.remove(supervisor)

    def start(self, supervisor: Supervisor, record: ChildRecord) -> None:
        """Have the thread spawn ``record``'s child (under :attr:`lock`; then :meth:`wake`)."""
        self._starts.append((supervisor, record))

    def on_thread(self) -> bool:
        """Whether the caller runs on the watching thread."""
        return threading.current_thread() is self._thread

    def wake(self) -> None:
        """Have the thread look at the records again."""
        try:
            os.write(self._wake_writer, b"x")
        except OSError:  # closed: nothing to wake
            pass

    def close(self) -> None:
        """End the thread (its supervisors' children stopped first)."""
        with self.lock:
            self.paused = self._closed = True
        self.wake()
        if self._thread.is_alive() and not self.on_thread():
            self._thread.join()
        for fd in (self._wake_reader, self._wake_writer):
            try:
                os.close(fd)
            except OSError:
                pass

    def _run(self) -> None:
        while True:
            with self.lock:
                if self._closed:
                    return
                starts, self._starts = list(self._starts), collections.deque()
                now = time.monotonic()
                waitables: Dict[Any, Tuple[Optional[Supervisor], Optional[ChildRecord], str]] = {
                    self._wake_reader: (None, None, "wake")
                }
                due: List[float] = []
                for supervisor in self._supervisors:
                    for record in supervisor.records():
                        if record.state is ChildState.WAITING:
                            if record.due <= now and record.starting():
                                starts.append((supervisor, record))
                            else:
                                due.append(record.due)
                        elif record.state is ChildState.SERVING:
                            waitables[record.child.sentinel()] = (supervisor, record, "exit")
                            inbox = record.child.inbox()
                            if inbox is not None:
                                waitables[inbox] = (supervisor, record, "message")
                timeout = max(0.0, min(due) - now) if due else None
            for supervisor, record in starts:
                supervisor.spawn(record)
            if starts:
                continue  # a start may have changed what is due or watched
            try:
                ready = multiprocessing.connection.wait(list(waitables), timeout)
            except (OSError, ValueError):  # a child forgotten meanwhile closed what was waited on
                continue
            for item in ready:
                supervisor, record, what = waitables[item]
                if supervisor is None:
                    os.read(self._wake_reader, 4096)
                elif what == "message":
                    self._receive(supervisor, record)
                else:
                    supervisor.exited(record)

    @staticmethod
    def _receive(supervisor: Supervisor, record: ChildRecord) -> None:
        if record.state is not ChildState.SERVING or not supervisor.has(record):
            return
        try:
            record.child.receive()
        except Exception:  # noqa: BLE001 - a bad message must not end the watching
            logger.exception("%s: reading its message failed", record.child.name)

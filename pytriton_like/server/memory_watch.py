"""``MemoryWatch``: tritonserver restarted on purpose once its memory grew past a bound and stayed there.

tritonserver 2.51 can abort when it answers a gRPC stream its client cancelled, so the relay's
backend answers such a stream nothing more (native/responses.h); Triton then keeps about 40 KB for
each until it stops. Under clients that cancel many streams that memory grows without end: the
watch restarts the server when its resident memory has stayed more than ``growth_bytes`` above what
it held once it served (and after each model load or unload) for ``sustained_s``, at once, as a
crash would be, instead of leaving it to the kernel's out-of-memory killer. A large request's memory
comes and goes within seconds, and does not count.
"""

import logging
import os
import threading
import time
from typing import Callable, Optional

__all__ = ["MemoryWatch", "resident_bytes"]

logger = logging.getLogger(__name__)

_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes(pid: int) -> Optional[int]:
    """A process's resident memory (``/proc/<pid>/statm``), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


class MemoryWatch:
    """Watches one tritonserver process at a time (a restarted server is watched anew).

    Args:
        growth_bytes: how far above its baseline the server's memory may stay.
        sustained_s: how long it must stay above before the server is restarted.
        interval_s: how often the memory is read.
        memory: reads a process's memory (tests give their own).
    """

    def __init__(self, growth_bytes: int, sustained_s: float = 60.0, interval_s: float = 5.0,
                 memory: Callable[[int], Optional[int]] = resident_bytes):
        self.growth_bytes = growth_bytes
        self.sustained_s = sustained_s
        self.interval_s = interval_s
        self._memory = memory
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pid: Optional[int] = None
        self._end: Callable[[str], None] = lambda reason: None
        self._baseline = 0
        self._over_since: Optional[float] = None
        self._thread: Optional[threading.Thread] = None

    def watch(self, pid: int, end: Callable[[str], None]) -> None:
        """Watch the process ``pid``, which now serves; ``end(reason)`` restarts it (its supervisor
        sees it end). Its memory now is the baseline."""
        with self._lock:
            self._pid, self._end = pid, end
            self._baseline = self._memory(pid) or 0
            self._over_since = None
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pytriton_like-memory-watch", daemon=True)
                self._thread.start()

    def rebaseline(self) -> None:
        """The server's models changed (a load or an unload): its memory now is the baseline."""
        with self._lock:
            if self._pid is not None:
                self._baseline = self._memory(self._pid) or self._baseline
                self._over_since = None

    def close(self) -> None:
        """Stop watching (the server is stopped on purpose)."""
        self._stop.set()
        with self._lock:
            self._pid = None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.check(time.monotonic())

    def check(self, now: float) -> None:
        """One reading: restarts the server when it has been past the bound for ``sustained_s``."""
        with self._lock:
            pid = self._pid
            if pid is None:
                return
            used = self._memory(pid)
            if used is None or used - self._baseline <= self.growth_bytes:
                self._over_since = None
                return
            if self._over_since is None:
                self._over_since = now
                return
            if now - self._over_since < self.sustained_s:
                return
            self._pid, end = None, self._end  # once per process: the restarted one is watched anew
            grown, held = (used - self._baseline) / 2**20, (now - self._over_since)
        reason = (
            f"its memory stayed {grown:,.0f} MiB above what it held after its start for {held:.0f} s"
            " (TritonConfig.server_memory_growth_bytes; docs/reliability.md)"
        )
        logger.warning("tritonserver (pid %d) is restarted on purpose: %s", pid, reason)
        end(reason)

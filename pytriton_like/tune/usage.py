"""The CPU and memory a serving process and its descendants use, read from /proc.

The serving process of a trial is ``pytriton_like serve``; tritonserver, the reaper and the
worker processes are its descendants (tritonserver runs in a session of its own, so a session or
process group would miss it: the tree is followed by parent pid). Memory is the resident set
summed over the tree, so pages shared by forked processes count once per process.
"""

import os
from typing import Dict, List, Tuple

__all__ = ["ProcessTree", "own_cpu_seconds"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat(pid: str) -> Tuple[int, float]:
    """``(parent pid, CPU seconds)`` of one process (user + system)."""
    with open(f"/proc/{pid}/stat", "rb") as file:
        fields = file.read().rsplit(b")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm", "rb") as file:
        return int(file.read().split()[1]) * _PAGE


def own_cpu_seconds() -> float:
    """CPU seconds this process spent so far (every thread, user + system)."""
    times = os.times()
    return times.user + times.system


class ProcessTree:
    """A process and its descendants: :meth:`cpu_seconds` so far, :meth:`rss_bytes` now.

    CPU of a descendant that exited is lost (not waited for by us); the tree of a trial's server
    keeps its processes while it is measured.
    """

    def __init__(self, root_pid: int):
        self.root_pid = root_pid
        self._members: List[int] = [root_pid]

    def refresh(self) -> Dict[int, float]:
        """Find the tree's processes again; ``{pid: CPU seconds}`` of each."""
        parents: Dict[int, List[int]] = {}
        cpu: Dict[int, float] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    parent, seconds = _stat(name)
                except (OSError, ValueError, IndexError):
                    continue  # gone meanwhile
                parents.setdefault(parent, []).append(int(name))
                cpu[int(name)] = seconds
        members, stack = [], [self.root_pid]
        while stack:
            pid = stack.pop()
            if pid in cpu and pid not in members:
                members.append(pid)
                stack.extend(parents.get(pid, ()))
        self._members = members
        return {pid: cpu[pid] for pid in members}

    @property
    def pids(self) -> List[int]:
        return list(self._members)

    def cpu_seconds(self) -> float:
        return sum(self.refresh().values())

    def rss_bytes(self) -> int:
        total = 0
        for pid in self._members:
            try:
                total += _rss(pid)
            except (OSError, ValueError, IndexError):
                pass
        return total

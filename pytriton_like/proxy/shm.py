"""Shared-memory arenas that carry large tensors between the stub and the user process.

Stdlib only (runs in the Python-backend stub too). A segment is a file in /dev/shm named
``pytriton_like-<owner pid>-<tag>-<generation>``: the owner pid is the user process, which
unlinks every segment with its pid at stop and, at start, those of owners no longer alive.
``multiprocessing.shared_memory`` is not used: it registers segments with a resource tracker
that unlinks them when the *attaching* process exits.
"""

import mmap
import os
from typing import Callable, Dict, Optional

__all__ = ["SHM_DIR", "SEGMENT_PREFIX", "STUB_REGION_PREFIX", "ArenaWriter", "ArenaReader", "aligned", "is_segment_name", "unlink_segments", "unlink_orphaned_segments", "process_alive"]

SHM_DIR = "/dev/shm"
SEGMENT_PREFIX = "pytriton_like-"
# Triton names the shared-memory region it makes for each Python-backend stub so.
STUB_REGION_PREFIX = "triton_python_backend_shm_region_"
_ALIGN = 64


class ArenaWriter:
    """One segment that one writer fills per message, from offset 0; it grows by replacement.

    Only one message may use the arena at a time: the writer reuses it once the reply to the
    previous message came back.
    """

    def __init__(self, owner_pid: int, tag: str, limit: Optional[int] = None):
        self._stem = f"{SEGMENT_PREFIX}{owner_pid}-{tag}-"
        self._limit = limit
        self._generation = 0
        self._map: Optional[mmap.mmap] = None
        self.name: Optional[str] = None
        self._offset = 0

    def reset(self, needed: int) -> None:
        """Start a new message that needs ``needed`` bytes (each block aligned)."""
        self._offset = 0
        if needed and (self._map is None or len(self._map) < needed):
            if self._limit is not None and needed > self._limit:
                raise MemoryError(
                    f"a message needs {needed} bytes of shared memory, more than the relay's limit of"
                    f" {self._limit} bytes (TritonConfig.shm_limit_bytes)"
                )
            size = max(needed, 2 * len(self._map) if self._map else needed, 1 << 20)
            self._replace(size if self._limit is None else max(needed, min(size, self._limit)), needed)

    def put(self, data: memoryview) -> int:
        """Copy ``data`` (a C-contiguous buffer) into the arena; return its offset."""
        offset = self._offset
        nbytes = data.nbytes
        self._map[offset : offset + nbytes] = data.cast("B")
        self._offset = offset + aligned(nbytes)
        return offset

    def _replace(self, size: int, needed: int) -> None:
        """A new segment of ``size`` bytes, or of just ``needed`` if that is all there is."""
        self.close()
        self._generation += 1
        name = f"{self._stem}{self._generation}"
        fd = os.open(os.path.join(SHM_DIR, name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            for attempt in dict.fromkeys((size, needed)):
                try:
                    # Reserve the pages now: on a full /dev/shm, writing to a merely truncated
                    # file would kill the process with SIGBUS instead of failing here.
                    os.posix_fallocate(fd, 0, attempt)
                    self._map = mmap.mmap(fd, attempt)
                    break
                except OSError as exc:
                    error = exc
            else:
                os.unlink(os.path.join(SHM_DIR, name))
                raise MemoryError(
                    f"a message needs {needed} bytes of shared memory and {SHM_DIR} cannot give them:"
                    f" {error.strerror}"
                )
        finally:
            os.close(fd)
        self.name = name

    def close(self) -> None:
        """Unlink the segment; the reader keeps its mapping until it drops it."""
        if self.name is not None:
            _unlink(self.name)
            self.name = None
        if self._map is not None:
            _close_map(self._map)
            self._map = None


def is_segment_name(name: str, prefix: str = SEGMENT_PREFIX) -> bool:
    """Whether ``name`` is a segment name with ``prefix`` (and nothing that leaves /dev/shm)."""
    return name.startswith(prefix) and "/" not in name and "\0" not in name


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up so that the next block starts aligned."""
    return (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN


class ArenaReader:
    """Maps the segments a writer names, keeping only the newest."""

    def __init__(self):
        self._name: Optional[str] = None
        self._map: Optional[mmap.mmap] = None

    def view(self, name: str, offset: int, nbytes: int) -> memoryview:
        """A view of ``nbytes`` at ``offset`` of segment ``name``."""
        if name != self._name:
            self._attach(name)
        return memoryview(self._map)[offset : offset + nbytes]

    def _attach(self, name: str) -> None:
        fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
        try:
            new_map = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
        self.close()
        self._name, self._map = name, new_map

    def close(self) -> None:
        if self._map is not None:
            _close_map(self._map)
        self._name, self._map = None, None


def _close_map(mapping: mmap.mmap) -> None:
    try:
        mapping.close()
    except BufferError:
        # Arrays handed out still point into it; the mapping goes when they do.
        pass


def _unlink(name: str) -> None:
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


def unlink_segments(owner_pid: int, tag_prefix: str = "") -> Dict[str, int]:
    """Unlink the segments of ``owner_pid`` whose tag starts with ``tag_prefix``.

    Returns the names unlinked with their sizes.
    """
    stem = f"{SEGMENT_PREFIX}{owner_pid}-{tag_prefix}"
    return _unlink_where(lambda pid, name: name.startswith(stem))


def unlink_orphaned_segments() -> Dict[str, int]:
    """Unlink the segments whose owner process is gone (e.g. killed with SIGKILL)."""
    return _unlink_where(lambda pid, name: not process_alive(pid))


def _unlink_where(predicate: Callable[[int, str], bool]) -> Dict[str, int]:
    removed = {}
    try:
        names = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return removed
    for name in names:
        if not name.startswith(SEGMENT_PREFIX):
            continue
        try:
            pid = int(name[len(SEGMENT_PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        if predicate(pid, name):
            path = os.path.join(SHM_DIR, name)
            try:
                size = os.stat(path).st_size
                os.unlink(path)
            except FileNotFoundError:
                continue
            removed[name] = size
    return removed


def process_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

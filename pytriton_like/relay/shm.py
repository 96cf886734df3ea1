"""Shared memory between the backend and the relay server: arenas that are sealed memfds.

An arena is written by one end and read by the other, one batch at a time per slot. Its file
descriptor travels over the relay's Unix socket with the first message that uses it
(SCM_RIGHTS), so it has no name: nothing of it is ever in /dev/shm, and when both processes are
gone (even killed with SIGKILL) the kernel frees it. It is sealed against shrinking and growing:
a reader can map it without fear of SIGBUS. It grows by replacement. Its pages are allocated
(``MADV_POPULATE_WRITE``) before they are written, and given back after a large batch: the backend
punches a hole from :data:`ARENA_KEEP_BYTES` to the end of what a batch used in both arenas of the
slot once it has read them (native/transport.c ``arena_trim``), so an arena that grew for one large
request holds at most that much memory afterwards; its size (address space only) stays.

Named segments in /dev/shm remain for others: the Python-backend stubs of hand-written models
(``backend: "python"``) make regions there, and so do the shared-memory clients
(``pytriton_like-<pid>-c<n>-<k>``, client/shared_memory.py); :func:`unlink_orphaned_segments`
and the names here clean up after killed processes.
"""

import errno
import fcntl
import mmap
import os
from typing import Callable, Dict, Optional

__all__ = [
    "ARENA_KEEP_BYTES",
    "Arena",
    "map_received",
    "give_back",
    "SHM_DIR",
    "SEGMENT_PREFIX",
    "STUB_REGION_PREFIX",
    "is_segment_name",
    "aligned",
    "unlink_segments",
    "unlink_orphaned_segments",
    "process_alive",
]

SHM_DIR = "/dev/shm"
# Named segments of ours (the owner's pid after it): the shared-memory clients', and the relay's
# before the native relay; those of killed processes are removed at the next start.
SEGMENT_PREFIX = "pytriton_like-"
_SEGMENT_ALIGN = 64
# Triton names the shared-memory region it makes for each Python-backend stub so.
STUB_REGION_PREFIX = "triton_python_backend_shm_region_"
_MIN_ARENA = 1 << 20
# The pages an arena keeps between batches; the backend gives back the rest after each batch that
# used them. native/transport.h (ARENA_KEEP) says the same.
ARENA_KEEP_BYTES = 16 << 20
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux 5.14


class Arena:
    """The writer's end of one slot's arena.

    Args:
        limit: the largest arena in bytes (TritonConfig.shm_limit_bytes); None: no limit.
    """

    def __init__(self, limit: Optional[int] = None):
        self._limit = limit
        self._map: Optional[mmap.mmap] = None
        self._fd: Optional[int] = None  # kept, to allocate pages the backend gave back
        self._reserved = 0  # bytes from the start whose pages are allocated
        self.pending_fd: Optional[int] = None  # the new arena's descriptor, until sent

    @property
    def size(self) -> int:
        return len(self._map) if self._map is not None else 0

    def reserve(self, needed: int) -> bool:
        """Make room for ``needed`` bytes; whether the arena was replaced (its fd is then pending).

        Raises:
            MemoryError: ``needed`` is over the limit, or the system cannot give the memory.
        """
        if needed <= self.size:
            replaced = False
            if needed > self._reserved:  # pages the backend gave back after an earlier large batch
                _allocate(self._map, self._fd, self._reserved, needed)
        else:
            self._replace(needed)
            replaced = True
        # the backend gives back what this batch uses beyond ARENA_KEEP_BYTES once it has read it
        self._reserved = min(max(self._reserved, needed), ARENA_KEEP_BYTES)
        return replaced

    def _replace(self, needed: int) -> None:
        if self._limit is not None and needed > self._limit:
            raise MemoryError(
                f"a message needs {needed} bytes of shared memory, more than the relay's limit of"
                f" {self._limit} bytes (TritonConfig.shm_limit_bytes)"
            )
        size = max(needed, 2 * self.size, _MIN_ARENA)
        if self._limit is not None:
            size = max(needed, min(size, self._limit))
        fd = os.memfd_create("pytriton_like-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        new_map = None
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            new_map = mmap.mmap(fd, size)
            # Allocate the pages now: a write to a page the system cannot give would kill the
            # process instead of failing here. The rest of the size is address space only.
            _allocate(new_map, fd, 0, needed)
        except BaseException:
            if new_map is not None:
                new_map.close()
            os.close(fd)
            raise
        self.close()
        self._map, self._fd, self.pending_fd, self._reserved = new_map, fd, fd, needed

    def write(self, offset: int, data: memoryview) -> None:
        """Copy ``data`` (a flat byte view) to ``offset``."""
        self._map[offset : offset + data.nbytes] = data

    def sent(self) -> None:
        """The pending descriptor went to the peer (the arena keeps its own)."""
        self.pending_fd = None

    def close(self) -> None:
        self.pending_fd = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._reserved = 0
        if self._map is not None:
            _close_map(self._map)
            self._map = None


def map_received(fd: int) -> mmap.mmap:
    """Map an arena whose descriptor the peer sent (read-write: the callable may change its
    inputs in place); takes ``fd``. ValueError if it is not a sealed, non-empty memfd."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        if seals & fcntl.F_SEAL_SHRINK == 0:
            raise ValueError("an arena not sealed against shrinking")
        size = os.fstat(fd).st_size
        if size <= 0:
            raise ValueError("an empty arena")
        return mmap.mmap(fd, size)
    except OSError as exc:
        raise ValueError(f"cannot map an arena: {exc}") from None
    finally:
        os.close(fd)


def _allocate(mapping: mmap.mmap, fd: int, start: int, end: int) -> None:
    """Allocate the pages of [start, end): MADV_POPULATE_WRITE allocates and maps them in one pass
    (an error, not a signal, when the system has no memory); posix_fallocate on kernels without it
    (about 4x slower here: the write then faults each page in again)."""
    first = start - start % mmap.PAGESIZE
    try:
        try:
            mapping.madvise(_MADV_POPULATE_WRITE, first, end - first)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            os.posix_fallocate(fd, start, end - start)
    except OSError as exc:
        raise MemoryError(
            f"a message needs {end} bytes of shared memory and the system cannot give them: {exc.strerror}"
        ) from None


def give_back(mapping: mmap.mmap, end: int) -> None:
    """Give back the pages of a received arena from ARENA_KEEP_BYTES to ``end``, through our
    (writable) mapping: the relay server does it for inputs its callable is done with, before it places
    the outputs, so a large request's input and output are not both in memory twice. The backend
    writes the arena again only after the batch's answer, and allocates the pages first."""
    end = min(end, len(mapping))
    if end > ARENA_KEEP_BYTES:
        try:
            mapping.madvise(mmap.MADV_REMOVE, ARENA_KEEP_BYTES, end - ARENA_KEEP_BYTES)
        except OSError:
            pass  # the backend gives them back after the answer anyway


def _close_map(mapping: mmap.mmap) -> None:
    try:
        mapping.close()
    except BufferError:
        # Arrays handed out still point into it; the mapping goes when they do.
        pass


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up so that the next block starts aligned (64 bytes)."""
    return (nbytes + _SEGMENT_ALIGN - 1) // _SEGMENT_ALIGN * _SEGMENT_ALIGN


def is_segment_name(name: str, prefix: str = SEGMENT_PREFIX) -> bool:
    """Whether ``name`` is a segment name with ``prefix`` (and nothing that leaves /dev/shm)."""
    return name.startswith(prefix) and "/" not in name and "\0" not in name


def unlink_segments(owner_pid: int, tag_prefix: str = "") -> Dict[str, int]:
    """Unlink the /dev/shm segments of ``owner_pid`` whose tag starts with ``tag_prefix``."""
    stem = f"{SEGMENT_PREFIX}{owner_pid}-{tag_prefix}"
    return _unlink_where(lambda pid, name: name.startswith(stem))


def unlink_orphaned_segments() -> Dict[str, int]:
    """Unlink the /dev/shm segments of ours whose owner process is gone (e.g. killed with SIGKILL)."""
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

"""System shared memory for a client on the server's host: large tensors pass through registered regions, not the socket.

No server I/O here: the clients register and unregister the regions this module makes and
names (``RegionPool``), and this module decides which tensors go where (``plan_layout``) and
reads the outputs back (``read_output``).

A region is one POSIX shared-memory segment of this process, mode 0600, named like the relay's
segments (``pytriton_like-<owner pid>-c<client>-<n>``, see ``pytriton_like.relay.shm``) and
registered with the server under the same name. A request takes a free region of its client
(regions are reused across calls; one grows by replacement), writes its inputs into it, and has
the server write the outputs after them. ``close()`` unregisters and unlinks every region of the
client: the server refuses to unregister a region that a request still holds (one in flight in
another thread, or one whose response it has sent but not yet released), so ``close()`` asks again
until the server lets go, for as long as one server call of the client may take. The segments of
a client that died are unlinked by the next client (or server) that starts on this host, and
their registrations dropped from the server by the next client of it.
"""

import dataclasses
import itertools
import logging
import mmap
import os
import re
import threading
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from tritonclient.utils import triton_to_np_dtype

from ..polling import poll, poll_async
from ..relay.shm import SEGMENT_PREFIX, SHM_DIR, aligned, process_alive, unlink_orphaned_segments
from .exceptions import PyTritonClientInferenceServerError

__all__ = [
    "MIN_SHARED_BYTES",
    "Region",
    "RegionPool",
    "Layout",
    "plan_layout",
    "read_output",
    "dead_owner_regions",
    "needed_output_bytes",
    "still_in_use",
    "SharedRegions",
    "AsyncSharedRegions",
]

_LOGGER = logging.getLogger(__name__)

# Tensors smaller than this go through the socket: for them a copy into a region saves nothing.
MIN_SHARED_BYTES = 64 * 1024
_MIN_REGION_BYTES = 1 << 20
_client_ids = itertools.count(1)
# "Cannot unregister shared memory region 'x', it is currently in use."
_IN_USE = "it is currently in use"
# "... for output 'y' (16 bytes) should be at least 32 bytes to hold the results"
_TOO_SMALL = re.compile(r"for output '([^']+)' \((\d+) bytes\) should be at least (\d+) bytes")
_CLIENT_REGION = re.compile(rf"^{re.escape(SEGMENT_PREFIX)}(\d+)-c\d+-\d+$")


class Region:
    """One shared-memory segment of this process, mapped, 0600; its name is also its registered region name."""

    def __init__(self, name: str, size: int):
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            # reserve the pages now: on a full /dev/shm a merely truncated file would SIGBUS later
            os.posix_fallocate(fd, 0, size)
            self.map = mmap.mmap(fd, size)
        except OSError as exc:
            os.unlink(path)
            raise MemoryError(f"cannot make a {size}-byte shared-memory region in {SHM_DIR}: {exc.strerror}") from None
        finally:
            os.close(fd)
        self.name = name
        self.size = size

    @property
    def key(self) -> str:
        """The key tritonserver opens (``shm_open`` form)."""
        return f"/{self.name}"

    def write(self, offset: int, array: np.ndarray) -> None:
        """Copies a C-contiguous array into the region at ``offset``."""
        target = np.frombuffer(self.map, dtype=np.uint8, count=array.nbytes, offset=offset)
        target[:] = np.ascontiguousarray(array).reshape(-1).view(np.uint8)

    def close(self) -> None:
        """Unmaps and unlinks the segment (the server's mapping lasts until it is unregistered)."""
        try:
            self.map.close()
        except BufferError:  # an array still points into it; the mapping goes with it
            pass
        try:
            os.unlink(os.path.join(SHM_DIR, self.name))
        except FileNotFoundError:
            pass


class RegionPool:
    """The regions of one client: free ones to take, and the names it made.

    ``take`` and ``give_back`` are thread-safe; registering a new region and unregistering a
    replaced one are the caller's (its I/O).
    """

    def __init__(self):
        self._stem = f"{SEGMENT_PREFIX}{os.getpid()}-c{next(_client_ids)}-"
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._free: List[Region] = []
        self._all: Dict[str, Region] = {}
        self._first = True

    def first_use(self) -> bool:
        """True once: the caller then cleans up after dead clients (their segments, their registrations)."""
        with self._lock:
            first, self._first = self._first, False
        if first:
            removed = unlink_orphaned_segments()
            if removed:
                _LOGGER.info("removed shared memory left by processes that died: %s", ", ".join(sorted(removed)))
        return first

    def take(self, needed: int) -> Tuple[Region, Optional[Region], bool]:
        """A region of at least ``needed`` bytes.

        Returns:
            ``(region, replaced, new)``: ``new`` when the region must be registered first,
            ``replaced`` a smaller free region it replaces, to unregister and close.
        """
        with self._lock:
            region = max(self._free, key=lambda r: r.size) if self._free else None
            if region is not None:
                self._free.remove(region)
                if region.size >= needed:
                    return region, None, False
                del self._all[region.name]
            size = max(needed, _MIN_REGION_BYTES, 2 * region.size if region is not None else 0)
            new = Region(f"{self._stem}{next(self._numbers)}", aligned(size))
            self._all[new.name] = new
            return new, region, True

    def give_back(self, region: Region) -> None:
        """Returns a region taken, for the next request."""
        with self._lock:
            if region.name in self._all:
                self._free.append(region)

    def drop(self, region: Region) -> None:
        """Forgets a region that could not be registered, and closes it."""
        with self._lock:
            self._all.pop(region.name, None)
        region.close()

    def close_all(self) -> List[Region]:
        """Forgets every region and returns them, to unregister; then close each."""
        with self._lock:
            regions = list(self._all.values())
            self._all, self._free = {}, []
        return regions


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a request's tensors go in its region: ``{name: (offset, bytes)}`` of inputs and outputs."""

    inputs: Dict[str, Tuple[int, int]]
    outputs: Dict[str, Tuple[int, int]]
    size: int

    def __bool__(self) -> bool:
        return bool(self.inputs or self.outputs)


def plan_layout(arrays: Mapping[str, np.ndarray], output_bytes: Mapping[str, int]) -> Layout:
    """Which inputs and outputs go through shared memory, at which offsets.

    Args:
        arrays: the wire arrays of the request (BYTES ones never go through shared memory).
        output_bytes: the outputs whose size is known (fixed shapes) or was seen before, with it.
    """
    offset = 0
    inputs: Dict[str, Tuple[int, int]] = {}
    for name, array in arrays.items():
        if array.dtype.kind in "OSU" or array.nbytes < MIN_SHARED_BYTES:
            continue
        inputs[name] = (offset, array.nbytes)
        offset += aligned(array.nbytes)
    outputs: Dict[str, Tuple[int, int]] = {}
    for name, nbytes in output_bytes.items():
        if nbytes >= MIN_SHARED_BYTES:
            outputs[name] = (offset, nbytes)
            offset += aligned(nbytes)
    return Layout(inputs=inputs, outputs=outputs, size=offset)


def read_output(region: Region, offset: int, datatype: str, shape: Sequence[int]) -> np.ndarray:
    """A copy of the output the server wrote at ``offset`` (the region is reused by the next request)."""
    dtype = np.dtype(triton_to_np_dtype(datatype))
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(region.map, dtype=dtype, count=count, offset=offset).reshape(list(shape)).copy()


def needed_output_bytes(message: str) -> Optional[Tuple[str, int]]:
    """From the server's "output region too small" error: ``(output name, bytes it needs)``, else None."""
    match = _TOO_SMALL.search(message)
    return (match[1], int(match[3])) if match else None


def still_in_use(exc: BaseException) -> bool:
    """Whether the server refused an unregistration because a request still holds the region."""
    return isinstance(exc, PyTritonClientInferenceServerError) and _IN_USE in str(exc)


def dead_owner_regions(names: Sequence[str]) -> List[str]:
    """Of the server's registered region names, those of our clients whose process is gone."""
    dead = []
    for name in names:
        match = _CLIENT_REGION.match(name)
        if match and not process_alive(int(match[1])):
            dead.append(name)
    return dead


def _warn_still_in_use(region: Region, waited_s: float) -> None:
    _LOGGER.warning(
        "shared-memory region %s stays registered with the server: a request still held it after %.1f s; "
        "the next client of this server drops it once this process has ended",
        region.name,
        waited_s,
    )


class SharedRegions:
    """The shared-memory regions of a ModelClient: the pool's regions, registered with the server through ``call``."""

    def __init__(self, call: Callable[..., Any], release_wait_s: float):
        self._call = call  # ModelClient.call_server
        self._release_wait_s = release_wait_s  # how long close() waits for the server to let a region go
        self._pool = RegionPool()

    def take(self, size: int) -> Region:
        """A registered region of at least ``size`` bytes, for one request."""
        if self._pool.first_use():
            self._forget_dead_clients()
        region, replaced, new = self._pool.take(size)
        if replaced is not None:
            self._unregister(replaced)
        if new:
            try:
                self._call("register_system_shared_memory", name=region.name, key=region.key, byte_size=region.size)
            except BaseException:
                self._pool.drop(region)
                raise
            _LOGGER.debug("registered shared-memory region %s (%d bytes)", region.name, region.size)
        return region

    def give_back(self, region: Region) -> None:
        self._pool.give_back(region)

    def close(self) -> None:
        """Unregisters and unlinks every region (unlinked even when the server cannot be told)."""
        for region in self._pool.close_all():
            self._unregister(region)

    def _unregister(self, region: Region) -> None:
        try:
            if not poll(lambda: self._unregistered(region), self._release_wait_s):
                _warn_still_in_use(region, self._release_wait_s)
        except Exception:  # noqa: BLE001 - the server may be gone; the segment goes anyway
            _LOGGER.debug("unregistering shared-memory region %s failed", region.name, exc_info=True)
        region.close()

    def _unregistered(self, region: Region) -> bool:
        """Asks the server to unregister ``region``: False while a request still holds it."""
        try:
            self._call("unregister_system_shared_memory", name=region.name)
        except PyTritonClientInferenceServerError as exc:
            if still_in_use(exc):
                return False
            raise
        return True

    def _forget_dead_clients(self) -> None:
        """Unregisters the regions of this host's clients that died (their segments are unlinked already)."""
        try:
            regions = self._call("get_system_shared_memory_status")
            for name in dead_owner_regions([region["name"] for region in regions]):
                self._call("unregister_system_shared_memory", name=name)
                _LOGGER.info("unregistered shared-memory region %s of a client that died", name)
        except Exception:  # noqa: BLE001 - a cleanup of others' leftovers must not fail this client
            _LOGGER.debug("cleaning up the regions of dead clients failed", exc_info=True)


class AsyncSharedRegions:
    """The shared-memory regions of an AsyncioModelClient (see :class:`SharedRegions`), registered through ``call``."""

    def __init__(self, call: Callable[..., Awaitable[Any]], release_wait_s: float):
        self._call = call  # AsyncioModelClient.call_server
        self._release_wait_s = release_wait_s
        self._pool = RegionPool()

    async def take(self, size: int) -> Region:
        if self._pool.first_use():
            await self._forget_dead_clients()
        region, replaced, new = self._pool.take(size)
        if replaced is not None:
            await self._unregister(replaced)
        if new:
            try:
                await self._call(
                    "register_system_shared_memory", name=region.name, key=region.key, byte_size=region.size
                )
            except BaseException:
                self._pool.drop(region)
                raise
        return region

    def give_back(self, region: Region) -> None:
        self._pool.give_back(region)

    async def close(self) -> None:
        for region in self._pool.close_all():
            await self._unregister(region)

    async def _unregister(self, region: Region) -> None:
        try:
            if not await poll_async(lambda: self._unregistered(region), self._release_wait_s):
                _warn_still_in_use(region, self._release_wait_s)
        except Exception:  # noqa: BLE001 - the server may be gone; the segment goes anyway
            _LOGGER.debug("unregistering shared-memory region %s failed", region.name, exc_info=True)
        region.close()

    async def _unregistered(self, region: Region) -> bool:
        try:
            await self._call("unregister_system_shared_memory", name=region.name)
        except PyTritonClientInferenceServerError as exc:
            if still_in_use(exc):
                return False
            raise
        return True

    async def _forget_dead_clients(self) -> None:
        try:
            regions = await self._call("get_system_shared_memory_status")
            for name in dead_owner_regions([region["name"] for region in regions]):
                await self._call("unregister_system_shared_memory", name=name)
                _LOGGER.info("unregistered shared-memory region %s of a client that died", name)
        except Exception:  # noqa: BLE001 - a cleanup of others' leftovers must not fail this client
            _LOGGER.debug("cleaning up the regions of dead clients failed", exc_info=True)

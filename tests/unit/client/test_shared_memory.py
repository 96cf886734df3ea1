"""client/shared_memory.py: regions, the pool, layouts, the server's "too small" and "in use" errors."""

import asyncio
import logging
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from pytriton_like.client.core import CallArgs
from pytriton_like.client.exceptions import PyTritonClientInferenceServerError
from pytriton_like.client.shared_memory import (
    MIN_SHARED_BYTES,
    AsyncSharedRegions,
    Region,
    RegionPool,
    SharedRegions,
    dead_owner_regions,
    needed_output_bytes,
    plan_layout,
    read_output,
    still_in_use,
)
from pytriton_like.relay.shm import SHM_DIR


@pytest.fixture
def pool():
    pool = RegionPool()
    yield pool
    for region in pool.close_all():
        region.close()


def test_region_is_owner_only_and_round_trips_an_array(pool):
    region, replaced, new = pool.take(1000)
    assert new and replaced is None and region.size >= 1 << 20
    assert region.key == f"/{region.name}" and region.name.startswith(f"pytriton_like-{os.getpid()}-c")
    assert stat.S_IMODE(os.stat(os.path.join(SHM_DIR, region.name)).st_mode) == 0o600
    array = np.arange(12, dtype=np.int64).reshape(3, 4)
    region.write(128, array)
    out = read_output(region, 128, "INT64", [3, 4])
    np.testing.assert_array_equal(out, array)
    region.write(128, array * 0)
    np.testing.assert_array_equal(out, array)  # a copy, not a view of the region


def test_pool_reuses_regions_and_replaces_a_small_one(pool):
    first, _, _ = pool.take(100)
    pool.give_back(first)
    again, replaced, new = pool.take(200)
    assert again is first and replaced is None and not new
    pool.give_back(again)
    bigger, replaced, new = pool.take(first.size + 1)
    assert new and replaced is first and bigger.size >= 2 * first.size
    replaced.close()
    assert not os.path.exists(os.path.join(SHM_DIR, first.name))
    other, _, new = pool.take(10)  # the bigger one is in use: a second region for a concurrent request
    assert new and other is not bigger
    names = {region.name for region in pool.close_all()}
    assert names == {bigger.name, other.name}
    for region in (bigger, other):
        region.close()
        assert not os.path.exists(os.path.join(SHM_DIR, region.name))


def test_layout_small_and_bytes_tensors_go_by_the_socket():
    big = np.zeros(MIN_SHARED_BYTES // 4, np.float32)
    layout = plan_layout(
        {"small": np.zeros(10, np.float32), "big": big, "text": np.array([b"x" * MIN_SHARED_BYTES], object)},
        {"y": MIN_SHARED_BYTES + 1, "tiny": 4},
    )
    assert layout.inputs == {"big": (0, big.nbytes)}
    assert layout.outputs == {"y": (big.nbytes, MIN_SHARED_BYTES + 1)}
    assert layout.size >= big.nbytes + MIN_SHARED_BYTES + 1 and layout.size % 64 == 0
    assert not plan_layout({"small": np.zeros(3)}, {})


def test_the_servers_too_small_error_is_understood():
    message = "[500] shared memory size specified with the request for output 'y' (16 bytes) should be at least 32 bytes to hold the results"
    assert needed_output_bytes(message) == ("y", 32)
    assert needed_output_bytes("something else") is None


def test_a_sequence_request_is_not_sent_again():
    from pytriton_like.client.core import ClientCore  # noqa: PLC0415

    core = ClientCore("http://127.0.0.1:1", "m", use_shared_memory=True)
    error = PyTritonClientInferenceServerError("for output 'y' (16 bytes) should be at least 4096 bytes")
    plain = CallArgs((np.zeros(1),), {}, None, None, sample=False)
    in_sequence = CallArgs((np.zeros(1),), {}, None, None, sample=False, sequence_id=7)
    assert core.shared_memory_retry(error, plain) == "y"
    assert core.shared_memory_retry(error, in_sequence) is None
    assert core.shared_memory_retry(PyTritonClientInferenceServerError("other"), plain) is None


def test_dead_owners_regions():
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(child.stdout)
    names = [f"pytriton_like-{dead}-c1-3", f"pytriton_like-{os.getpid()}-c2-1", "someone-else", f"pytriton_like-{dead}-t1m1-1"]
    assert dead_owner_regions(names) == [f"pytriton_like-{dead}-c1-3"]


def test_region_creation_fails_cleanly_when_dev_shm_cannot_hold_it():
    with pytest.raises(MemoryError, match="cannot make a"):
        Region(f"pytriton_like-{os.getpid()}-c0-huge", 1 << 50)
    assert not os.path.exists(os.path.join(SHM_DIR, f"pytriton_like-{os.getpid()}-c0-huge"))


class Server:
    """The server calls of a client: the unregistration of a region refused ``busy`` times as "in use"."""

    def __init__(self, busy: int, error: str = "Cannot unregister shared memory region '{}', it is currently in use."):
        self.busy = busy
        self.error = error
        self.unregistered = []
        self.tries = 0

    def __call__(self, call, **kwargs):
        if call == "get_system_shared_memory_status":
            return []
        if call == "unregister_system_shared_memory":
            self.tries += 1
            if self.busy:
                self.busy -= 1
                raise PyTritonClientInferenceServerError(self.error.format(kwargs["name"]))
            self.unregistered.append(kwargs["name"])


class AsyncServer(Server):
    async def __call__(self, call, **kwargs):
        return Server.__call__(self, call, **kwargs)


def sync_close(server, release_wait_s):
    regions = SharedRegions(server, release_wait_s)
    region = regions.take(1000)
    regions.give_back(region)
    regions.close()
    return region


def async_close(server, release_wait_s):
    async def scenario():
        regions = AsyncSharedRegions(server, release_wait_s)
        region = await regions.take(1000)
        regions.give_back(region)
        await regions.close()
        return region

    return asyncio.run(scenario())


CLOSES = [(sync_close, Server), (async_close, AsyncServer)]


def test_the_servers_in_use_error_is_understood():
    assert still_in_use(PyTritonClientInferenceServerError("Cannot unregister shared memory region 'r', it is currently in use."))
    assert not still_in_use(PyTritonClientInferenceServerError("Unable to find system shared memory region: 'r'"))
    assert not still_in_use(RuntimeError("it is currently in use"))


@pytest.mark.parametrize("close, server_kind", CLOSES, ids=["sync", "asyncio"])
def test_close_asks_again_while_a_request_still_holds_the_region(close, server_kind):
    server = server_kind(busy=3)
    region = close(server, release_wait_s=30)
    assert server.tries == 4
    assert server.unregistered == [region.name]
    assert not os.path.exists(os.path.join(SHM_DIR, region.name))


@pytest.mark.parametrize("close, server_kind", CLOSES, ids=["sync", "asyncio"])
def test_close_gives_up_after_the_wait_says_so_and_unlinks_the_segment(close, server_kind, caplog):
    server = server_kind(busy=10**9)
    with caplog.at_level(logging.WARNING, logger="pytriton_like.client.shared_memory"):
        region = close(server, release_wait_s=0.05)
    assert server.tries > 1
    assert server.unregistered == []
    assert f"shared-memory region {region.name} stays registered" in caplog.text
    assert not os.path.exists(os.path.join(SHM_DIR, region.name))


@pytest.mark.parametrize("close, server_kind", CLOSES, ids=["sync", "asyncio"])
def test_close_does_not_ask_again_after_another_refusal(close, server_kind):
    server = server_kind(busy=1, error="Unable to find system shared memory region: '{}'")
    region = close(server, release_wait_s=30)
    assert server.tries == 1
    assert not os.path.exists(os.path.join(SHM_DIR, region.name))

"""A large request through the relay: the answer is right, and the shared-memory arenas that grew
for it give their pages back once it is done (bench/big_tensor.py measures the 1 GiB case); a
MiB tensor's buffers in tritonserver are kept for the next request (bench/malloc_reuse.py)."""

import concurrent.futures
import os

import numpy as np
import psutil
import pytest

from pytriton_like.client import ModelClient
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.relay.shm import ARENA_KEEP_BYTES
from pytriton_like.server.bundle import MALLOC_TUNABLES
from pytriton_like.triton import Triton

from .conftest import free_config, url_of, wait_for

LARGE = 64 << 20  # bytes per tensor: four times what an arena keeps
COUNT = LARGE // 4
MIB = 1 << 18  # float32 values in a MiB
CLIENTS, REQUESTS = 8, 20


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


def identity(requests):
    return [{"y": request["x"]} for request in requests]  # the input itself: a view of the arena


def arena_pages() -> int:
    """Bytes of memory held by the relay's arenas: the pages of every arena this process (the
    worker's end) maps, each arena once."""
    held = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].startswith("/memfd:pytriton_like-arena"):
                info = os.stat(f"/proc/self/map_files/{fields[0]}")
                held[info.st_ino] = info.st_blocks * 512
    return sum(held.values())


@pytest.fixture(scope="module")
def server():
    tensors = {"inputs": [Tensor(name="x", dtype=np.float32, shape=(-1,))],
               "outputs": [Tensor(name="y", dtype=np.float32, shape=(-1,))]}
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, config=ModelConfig(max_batch_size=1), **tensors)
        triton.bind(model_name="Identity", infer_func=identity, config=ModelConfig(max_batch_size=1), **tensors)
        triton.run()
        yield triton, config


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_large_request_is_answered_and_its_arenas_shrink_back(server, protocol):
    _, server = server
    rng = np.random.default_rng(7)
    with ModelClient(url_of(server, protocol), "Double", inference_timeout_s=120) as client:
        for _ in range(2):  # the second one writes into the pages the first one gave back
            x = rng.random((1, COUNT), dtype=np.float32)
            y = client.infer_batch(x)["y"]
            np.testing.assert_array_equal(y, x * 2)
            held = []
            # two models, each instance with an arena per direction, each keeping at most ARENA_KEEP_BYTES
            assert wait_for(lambda: held.append(arena_pages()) or held[-1] <= 4 * ARENA_KEEP_BYTES, 10), (
                f"the arenas still hold {held[-1] >> 20} MiB after a {LARGE >> 20} MiB request"
            )
        small = np.arange(16, dtype=np.float32).reshape(1, 16)
        np.testing.assert_array_equal(client.infer_batch(small)["y"], small * 2)


def test_an_input_returned_as_the_output_survives_its_pages_being_given_back(server):
    _, server = server
    x = np.random.default_rng(8).random((1, COUNT), dtype=np.float32)
    with ModelClient(url_of(server, "grpc"), "Identity", inference_timeout_s=120) as client:
        np.testing.assert_array_equal(client.infer_batch(x)["y"], x)
        np.testing.assert_array_equal(client.infer_batch(x[:, ::-1].copy())["y"], x[:, ::-1])


def minor_faults(pid: int) -> int:
    """Minor page faults of ``pid`` so far: pages the kernel mapped (and zero-filled) for it."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as file:
        return int(file.read().rsplit(")", 1)[1].split()[7])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_tritonserver_keeps_a_tensors_pages_for_the_next_request(server, protocol):
    # With glibc's defaults tritonserver, serving MiB tensors to several clients at once, often gives
    # their buffers back to the kernel after a request and faults new pages in for the next (256 a
    # MiB); MALLOC_TUNABLES keeps them.
    triton, config = server
    process = psutil.Process(triton._server.pid)  # noqa: SLF001 - the process to look into
    shown = process.environ()["GLIBC_TUNABLES"]  # glibc cuts what /proc shows at the first tunable it read
    assert shown and MALLOC_TUNABLES.startswith(shown), shown
    x = np.random.default_rng(9).random((1, MIB), dtype=np.float32)

    def send(client, count):
        for _ in range(count):
            np.testing.assert_array_equal(client.infer_batch(x)["y"], x * 2)

    clients = [ModelClient(url_of(config, protocol), "Double") for _ in range(CLIENTS)]
    try:
        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(send, clients, [REQUESTS] * CLIENTS))  # until the connections and buffers are made
            faults = minor_faults(process.pid)
            list(pool.map(send, clients, [REQUESTS] * CLIENTS))
            per_request = (minor_faults(process.pid) - faults) / (REQUESTS * CLIENTS)
    finally:
        for client in clients:
            client.close()
    assert per_request < 32, f"tritonserver faulted {per_request:.0f} pages in a request"

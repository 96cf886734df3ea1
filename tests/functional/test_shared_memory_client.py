"""Clients with use_shared_memory=True against the real tritonserver: tensors through registered
system shared memory, regions reused, removed on close and after a client was killed."""

import asyncio
import concurrent.futures
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from pytriton_like.client import AsyncioModelClient, FuturesModelClient, ModelClient
from pytriton_like.client.exceptions import PyTritonClientClosedError, PyTritonClientError, PyTritonClientValueError
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.relay.shm import SEGMENT_PREFIX, SHM_DIR
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of, wait_for

PROTOCOLS = ["http", "grpc"]
FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
FIXED = 1 << 16  # floats: a 256 KiB output the config fixes
calls = {"Tile": 0}
slow_started = threading.Event()
SLOW_S = 0.5


def double(requests):
    return [{"y": r["x"] * 2} for r in requests]


def tile(requests):
    """y = x repeated ``reps`` times (a request parameter): an output that grows."""
    calls["Tile"] += 1
    return [{"y": np.tile(r["x"], (1, int(r.parameters.get("reps", 1))))} for r in requests]


def slow(requests):
    """double, after SLOW_S: a request that is still in flight when its client closes."""
    slow_started.set()
    time.sleep(SLOW_S)
    return double(requests)


def fixed(requests):
    return [{"y": np.broadcast_to(r["x"].sum(axis=1, keepdims=True), (len(r["x"]), FIXED)).astype(np.float32)}
            for r in requests]


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        batching = ModelConfig(max_batch_size=8)
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT, config=batching)
        triton.bind(model_name="Tile", infer_func=tile, inputs=FLOAT_IN, outputs=FLOAT_OUT, config=batching)
        triton.bind(model_name="Slow", infer_func=slow, inputs=FLOAT_IN, outputs=FLOAT_OUT, config=batching)
        triton.bind(model_name="Fixed", infer_func=fixed, inputs=FLOAT_IN,
                    outputs=[Tensor(name="y", dtype=np.float32, shape=(FIXED,))], config=batching)
        triton.run()
        yield triton, config


def our_segments(pid: int = None) -> set:
    """The client regions of process ``pid`` (default: this one) in /dev/shm."""
    stem = f"{SEGMENT_PREFIX}{pid or os.getpid()}-c"
    return {name for name in os.listdir(SHM_DIR) if name.startswith(stem)}


def registered(triton) -> list:
    with triton.runner() as runner:
        return [region["name"] for region in runner.get_system_shared_memory_status()]


X = np.random.default_rng(0).random((2, 1 << 17), dtype=np.float32)  # 1 MiB


class Sync:
    def __init__(self, url, model, **kwargs):
        self.client = ModelClient(url, model, init_timeout_s=30, use_shared_memory=True, **kwargs)

    def infer_batch(self, *args, **kwargs):
        return self.client.infer_batch(*args, **kwargs)

    def infer_sample(self, *args, **kwargs):
        return self.client.infer_sample(*args, **kwargs)

    def close(self):
        self.client.close()


class Futures(Sync):
    def __init__(self, url, model, **kwargs):
        self.client = FuturesModelClient(url, model, init_timeout_s=30, use_shared_memory=True, **kwargs)

    def infer_batch(self, *args, **kwargs):
        return self.client.infer_batch(*args, **kwargs).result()

    def infer_sample(self, *args, **kwargs):
        return self.client.infer_sample(*args, **kwargs).result()


class Asyncio(Sync):
    def __init__(self, url, model, **kwargs):
        self.loop = asyncio.new_event_loop()
        self.client = AsyncioModelClient(url, model, init_timeout_s=30, use_shared_memory=True, **kwargs)

    def infer_batch(self, *args, **kwargs):
        return self.loop.run_until_complete(self.client.infer_batch(*args, **kwargs))

    def infer_sample(self, *args, **kwargs):
        return self.loop.run_until_complete(self.client.infer_sample(*args, **kwargs))

    def close(self):
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


@pytest.fixture(params=[Sync, Futures, Asyncio], ids=["sync", "futures", "asyncio"])
def kind(request):
    return request.param


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tensors_through_shared_memory_regions_reused_and_removed_on_close(server, kind, protocol):
    triton, config = server
    before = registered(triton)
    client = kind(url_of(config, protocol), "Double")
    try:
        np.testing.assert_array_equal(client.infer_batch(X)["y"], X * 2)  # input by shm, output learned
        np.testing.assert_array_equal(client.infer_batch(X)["y"], X * 2)  # both by shm
        regions = our_segments()
        assert len(regions) == 1
        for region in regions:
            assert stat.S_IMODE(os.stat(os.path.join(SHM_DIR, region)).st_mode) == 0o600
        assert set(registered(triton)) - set(before) == regions  # registered, with the token found on this host
        for _ in range(3):
            np.testing.assert_array_equal(client.infer_sample(X[0])["y"], X[0] * 2)
            np.testing.assert_array_equal(client.infer_batch(X)["y"], X * 2)
        assert our_segments() == regions  # reused, not remade
    finally:
        client.close()
    assert our_segments() == set()
    assert registered(triton) == before


def result_or_closed(pending):
    """The in-flight call's answer; None when close() unmapped its region before it read the outputs."""
    try:
        return pending.result()
    except PyTritonClientClosedError:
        return None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_close_during_a_request_waits_for_the_server_to_let_go_of_the_region(server, protocol):
    triton, config = server
    before = registered(triton)
    slow_started.clear()
    client = ModelClient(url_of(config, protocol), "Slow", init_timeout_s=30, use_shared_memory=True)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(client.infer_batch, X)
        assert slow_started.wait(30)
        client.close()  # the server refuses to unregister the region until the request is done
        answer = result_or_closed(pending)
    if answer is not None:
        np.testing.assert_array_equal(answer["y"], X * 2)
    assert our_segments() == set()
    assert registered(triton) == before


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_asyncio_close_during_a_request_waits_for_the_server_to_let_go_of_the_region(server, protocol):
    triton, config = server
    before = registered(triton)
    slow_started.clear()

    async def close_during_a_request():
        client = AsyncioModelClient(url_of(config, protocol), "Slow", init_timeout_s=30, use_shared_memory=True)
        pending = asyncio.ensure_future(client.infer_batch(X))
        assert await asyncio.get_running_loop().run_in_executor(None, slow_started.wait, 30)
        await client.close()
        await asyncio.wait([pending])
        return result_or_closed(pending)

    answer = asyncio.run(close_during_a_request())
    if answer is not None:
        np.testing.assert_array_equal(answer["y"], X * 2)
    assert our_segments() == set()
    assert registered(triton) == before


def test_outputs_are_copies_the_next_request_does_not_change(server):
    _, config = server
    with ModelClient(url_of(config, "http"), "Double", use_shared_memory=True) as client:
        client.infer_batch(X)
        first = client.infer_batch(X)["y"]
        client.infer_batch(X + 1)
        np.testing.assert_array_equal(first, X * 2)


def test_small_tensors_go_by_the_socket(server):
    _, config = server
    with ModelClient(url_of(config, "grpc"), "Double", use_shared_memory=True) as client:
        small = np.ones((1, 100), np.float32)
        np.testing.assert_array_equal(client.infer_batch(small)["y"], small * 2)
        assert our_segments() == set()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fixed_output_goes_by_shared_memory_from_the_first_call(server, protocol):
    triton, config = server
    with ModelClient(url_of(config, protocol), "Fixed", use_shared_memory=True) as client:
        small = np.ones((3, 4), np.float32)  # input by the socket, the 3 x 256 KiB output by shm
        result = client.infer_batch(small)["y"]
        assert result.shape == (3, FIXED) and np.all(result == 4.0)
        assert len(our_segments()) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_output_that_outgrew_its_region_is_sent_again_by_the_socket(server, protocol):
    _, config = server
    with ModelClient(url_of(config, protocol), "Tile", use_shared_memory=True) as client:
        client.infer_batch(X)
        calls["Tile"] = 0
        np.testing.assert_array_equal(client.infer_batch(X)["y"], X)  # output in shm now
        assert calls["Tile"] == 1
        grown = client.infer_batch(X, parameters={"reps": 3})["y"]
        np.testing.assert_array_equal(grown, np.tile(X, (1, 3)))
        assert calls["Tile"] == 3  # the server failed the first try after the model ran: it ran twice
        np.testing.assert_array_equal(client.infer_batch(X, parameters={"reps": 3})["y"], np.tile(X, (1, 3)))
        assert calls["Tile"] == 4  # the size was learned: no second try


def test_a_wrong_token_fails_the_registration_and_leaves_nothing(server):
    triton, config = server
    client = ModelClient(url_of(config, "http"), "Double", use_shared_memory=True, access_token="wrong")
    with pytest.raises(PyTritonClientError, match="restricted"):
        client.infer_batch(X)
    assert our_segments() == set()
    client.close()
    with ModelClient(url_of(config, "http"), "Double", use_shared_memory=True,
                     access_token=triton.get_access_token()) as client:
        np.testing.assert_array_equal(client.infer_batch(X)["y"], X * 2)


def test_a_remote_server_is_refused():
    with pytest.raises(PyTritonClientValueError, match="use_shared_memory needs a server on this host"):
        ModelClient("http://example.com:8000", "Double", use_shared_memory=True)


KILLED_CLIENT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from pytriton_like.client import ModelClient
    client = ModelClient(sys.argv[1], "Double", use_shared_memory=True)
    client.infer_batch(np.ones((1, 1 << 17), np.float32))
    print("registered", flush=True)
    time.sleep(600)
    """
)


def test_a_killed_client_is_cleaned_up_by_the_next_one(server):
    triton, config = server
    url = url_of(config, "http")
    child = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, url], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "registered"
        left = our_segments(child.pid)
        assert len(left) == 1 and left <= set(registered(triton))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert our_segments(child.pid) == left  # nobody unlinked them yet
    with ModelClient(url, "Double", use_shared_memory=True) as client:
        client.infer_batch(X)  # its first region: the dead client's segments and registrations go first
        assert our_segments(child.pid) == set()
        assert wait_for(lambda: not left & set(registered(triton)), 5)


def test_a_server_start_removes_the_segments_of_dead_clients():
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    name = f"{SEGMENT_PREFIX}{int(child.stdout)}-c1-1"  # a region of a client that is gone
    fd = os.open(os.path.join(SHM_DIR, name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.close(fd)
    try:
        with Triton(config=free_config()) as triton:
            triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
            triton.run()
            assert not os.path.exists(os.path.join(SHM_DIR, name))
    finally:
        if os.path.exists(os.path.join(SHM_DIR, name)):
            os.unlink(os.path.join(SHM_DIR, name))

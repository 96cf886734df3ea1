"""Many requests in flight from one client: FuturesModelClient and AsyncioModelClient over HTTP and gRPC."""

import asyncio
import concurrent.futures
import time

import numpy as np
import pytest

from pytriton_like.client import AsyncioModelClient, FuturesModelClient
from pytriton_like.client.exceptions import PyTritonClientClosedError
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config

X = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
SLOW_S = 0.02


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


def slow_double(requests):
    time.sleep(SLOW_S)
    return double(requests)


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=X, outputs=Y, config=ModelConfig(max_batch_size=64))
        triton.bind(model_name="SlowDouble", infer_func=slow_double, inputs=X, outputs=Y,
                    config=ModelConfig(batching=False))
        triton.run()
        yield config


@pytest.fixture(params=["http", "grpc"])
def url(request, server):
    port = server.http_port if request.param == "http" else server.grpc_port
    return f"{request.param}://127.0.0.1:{port}"


def sample(index):
    """A request whose answer tells which request it was."""
    return np.array([index, index + 0.5], np.float32)


def assert_answers(results):
    for index, result in enumerate(results):
        np.testing.assert_array_equal(result["y"], sample(index) * 2)


def test_futures_client_500_requests_in_flight(url):
    with FuturesModelClient(url, "Double") as client:  # default max_workers / max_queue_size (128 each)
        futures = [client.infer_sample(sample(index)) for index in range(500)]
        results = [future.result(timeout=60) for future in futures]
    assert_answers(results)


def test_futures_close_waits_for_the_queued_requests(url):
    client = FuturesModelClient(url, "SlowDouble", max_workers=2)
    futures = [client.infer_sample(sample(index)) for index in range(20)]
    client.close()  # wait=True
    assert all(future.done() for future in futures)
    assert_answers([future.result(timeout=0) for future in futures])
    with pytest.raises(PyTritonClientClosedError):
        client.infer_sample(sample(0))


def test_futures_close_without_waiting_finishes_in_the_background(url):
    client = FuturesModelClient(url, "SlowDouble", max_workers=2)
    futures = [client.infer_sample(sample(index)) for index in range(20)]  # about 10 * 2 * SLOW_S of work
    started = time.monotonic()
    client.close(wait=False)
    assert time.monotonic() - started < 10 * SLOW_S
    with pytest.raises(PyTritonClientClosedError):
        client.infer_sample(sample(0))
    done, _ = concurrent.futures.wait(futures, timeout=60)
    assert len(done) == len(futures)
    assert_answers([future.result() for future in futures])


def test_asyncio_client_300_requests_in_flight(url):
    async def main():
        async with AsyncioModelClient(url, "Double") as client:
            return await asyncio.gather(*(client.infer_sample(sample(index)) for index in range(300)))

    assert_answers(asyncio.run(main()))

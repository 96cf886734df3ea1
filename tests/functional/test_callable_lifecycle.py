"""Callables that stop the server, requests sent before the model is ready, slow streams."""

import asyncio
import queue
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from pytriton_like.client import ModelClient
from pytriton_like.client.exceptions import PyTritonClientError
from pytriton_like.exceptions import PyTritonUnrecoverableError
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import free_config, url_of

X = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(-1,))]


def give_up(requests):
    raise PyTritonUnrecoverableError("the GPU fell off the bus")


def test_unrecoverable_error_stops_serve_and_run():
    config = free_config()
    triton = Triton(config=config)
    triton.bind(model_name="GiveUp", infer_func=give_up, inputs=X, outputs=Y)
    serving = threading.Thread(target=triton.serve)
    serving.start()
    with ModelClient(url_of(config, "grpc"), "GiveUp", init_timeout_s=60) as client:
        with pytest.raises(PyTritonClientError, match="the GPU fell off the bus"):
            client.infer_batch(x=np.ones((1, 1), np.float32))
    serving.join(60)
    assert not serving.is_alive()  # serve() returned
    assert not triton.is_alive()
    assert triton.stop() is False  # already stopped


def test_requests_sent_before_the_model_is_ready_are_answered():
    config = free_config()
    answers = queue.Queue()

    def call_early():
        with ModelClient(url_of(config, "http"), "Late", init_timeout_s=120) as client:
            answers.put(client.infer_batch(x=np.full((1, 2), 3, np.float32))["y"])

    caller = threading.Thread(target=call_early)
    caller.start()  # before the server even starts
    with Triton(config=config) as triton:
        triton.bind(model_name="Late", infer_func=lambda requests: [{"y": r["x"] + 1} for r in requests],
                    inputs=X, outputs=Y)
        triton.run()
        caller.join(120)
    np.testing.assert_array_equal(answers.get_nowait(), [[4, 4]])


async def slow_or_fast(requests):
    # One instance; a "slow" request must not hold up a fast one sent after it.
    delay = float(requests[0]["x"][0, 0])
    await asyncio.sleep(delay)
    yield [{"y": request["x"]} for request in requests]


def test_slow_async_stream_does_not_block_others_on_the_same_instance():
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind(model_name="Stream", infer_func=slow_or_fast, inputs=X, outputs=Y,
                    config=ModelConfig(decoupled=True, max_batch_size=1))
        triton.run()
        finished = queue.Queue()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{config.grpc_port}")
        client.start_stream(callback=lambda result, error: finished.put((time.monotonic(), result, error)))
        for delay in (2.0, 0.0):
            tensor = grpcclient.InferInput("x", [1, 1], "FP32")
            tensor.set_data_from_numpy(np.array([[delay]], np.float32))
            client.async_stream_infer("Stream", [tensor])
        first = finished.get(timeout=30)
        second = finished.get(timeout=30)
        client.stop_stream()
        client.close()
    assert first[2] is None and second[2] is None
    assert first[1].as_numpy("y")[0, 0] == 0.0  # the fast one came back first
    assert second[0] - first[0] > 1.0

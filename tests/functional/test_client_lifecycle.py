"""Clients across threads, closing, models that come late, and servers that go away (real tritonserver)."""

import threading
import time

import numpy as np
import psutil
import pytest

from pytriton_like.client import ModelClient
from pytriton_like.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientInferenceServerError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of

FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
PROTOCOLS = ["http", "grpc"]


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


def slow(requests):
    time.sleep(float(requests[0]["x"].reshape(-1)[0]))
    return [{"y": request["x"]} for request in requests]


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=8))
        triton.bind(model_name="Slow", infer_func=slow, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=4))
        triton.run()
        yield triton, config



def run_in_thread(target):
    outcome = {}

    def run():
        try:
            outcome["value"] = target()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_client_moves_between_threads(server, protocol):
    _, config = server
    x = np.ones(2, np.float32)
    # made and first used in another thread, then used here
    client = run_in_thread(lambda: _made_and_used(url_of(config, protocol), x))
    try:
        np.testing.assert_array_equal(client.infer_sample(x)["y"], 2 * x)
        # and used here first, then in another thread
        np.testing.assert_array_equal(run_in_thread(lambda: client.infer_sample(x)["y"]), 2 * x)
    finally:
        run_in_thread(client.close)  # closed from a thread that did not open all its connections


def _made_and_used(url, x):
    client = ModelClient(url, "Double")
    client.infer_sample(x)
    return client


def test_short_lived_threads_do_not_pile_up_connections(server):
    _, config = server
    process = psutil.Process()
    with ModelClient(url_of(config, "http"), "Double") as client:
        client.infer_sample(np.ones(1, np.float32))
        for _ in range(40):
            run_in_thread(lambda: client.infer_sample(np.ones(1, np.float32)))
        to_server = [c for c in process.net_connections(kind="tcp")
                     if c.raddr and c.raddr.port == config.http_port and c.status == psutil.CONN_ESTABLISHED]
        # connections of threads that ended are closed when the next thread connects
        assert len(to_server) <= 4


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_close_from_another_thread_ends_an_inference_in_flight(server, protocol):
    _, config = server
    client = ModelClient(url_of(config, protocol), "Slow", inference_timeout_s=30)
    client.wait_for_model(30)
    errors = []

    def infer():
        try:
            client.infer_sample(np.array([1.5], np.float32))
        except Exception as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    worker = threading.Thread(target=infer)
    worker.start()
    time.sleep(0.3)
    client.close()
    worker.join(10)
    assert not worker.is_alive()
    if errors:  # the request may also have finished before its connection closed
        assert isinstance(errors[0], PyTritonClientClosedError), repr(errors[0])
    with pytest.raises(PyTritonClientClosedError):
        client.infer_sample(np.array([0.0], np.float32))
    time.sleep(1.5)  # let Slow finish before the next test


def test_http_and_grpc_read_the_same_config(server):
    _, config = server
    with ModelClient(url_of(config, "http"), "Double") as http, ModelClient(url_of(config, "grpc"), "Double") as grpc:
        assert http.model_config == grpc.model_config
        assert http.is_batching_supported and grpc.is_batching_supported


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_waits_for_a_model_bound_later(server, protocol):
    triton, config = server
    name = f"Late{protocol}"
    with ModelClient(url_of(config, protocol), name, init_timeout_s=60) as client:
        waiting = threading.Thread(target=client.wait_for_model, args=(60,))
        waiting.start()
        time.sleep(0.3)
        assert waiting.is_alive()
        triton.bind(model_name=name, infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        waiting.join(60)
        np.testing.assert_array_equal(client.infer_sample(np.ones(1, np.float32))["y"], [2.0])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_waits_for_a_server_started_later(protocol):
    config = free_config()
    client = ModelClient(url_of(config, protocol), "Double", init_timeout_s=120)
    try:
        result = {}
        waiting = threading.Thread(target=lambda: result.update(client.infer_sample(np.ones(1, np.float32))))
        waiting.start()
        with Triton(config=config) as triton:
            triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
            triton.run()
            waiting.join(120)
            np.testing.assert_array_equal(result["y"], [2.0])
            # tritonserver 2.51 waits its whole exit timeout (30 s) for open HTTP connections, even
            # idle keep-alive ones, then exits without unloading models: close before it stops.
            client.close()
    finally:
        client.close()


def test_server_that_went_away():
    # gRPC only: an open HTTP connection would hold up the server's stop (see above)
    config = free_config()
    with ModelClient(url_of(config, "grpc"), "Double", init_timeout_s=60) as client:
        with Triton(config=config) as triton:
            triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
            triton.run()
            np.testing.assert_array_equal(client.infer_sample(np.ones(1, np.float32))["y"], [2.0])
        with pytest.raises(PyTritonClientModelUnavailableError, match="server unavailable"):
            client.infer_sample(np.ones(1, np.float32))
        with pytest.raises(PyTritonClientTimeoutError, match="server at .* was not ready within 0.2 s"):
            client.wait_for_model(0.2)


def test_access_token_for_restricted_endpoints():
    restricted = "model-config,inference:triton-access-token=s3cret"
    config = free_config(http_restricted_api=restricted, grpc_restricted_protocol=restricted)
    with Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.run()
        for protocol in PROTOCOLS:
            url = url_of(config, protocol)
            with ModelClient(url, "Double", access_token="s3cret") as client:
                np.testing.assert_array_equal(client.infer_sample(np.ones(1, np.float32))["y"], [2.0])
            with ModelClient(url, "Double") as client:
                with pytest.raises((PyTritonClientInferenceServerError, PyTritonClientModelUnavailableError),
                                   match="restricted"):
                    client.model_config

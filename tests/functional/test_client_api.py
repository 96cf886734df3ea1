"""One client suite against the real tritonserver, run by every client (sync, asyncio, futures) over HTTP and gRPC."""

import asyncio
import contextlib
import threading
import time

import numpy as np
import pytest

from pytriton_like.client import AsyncioModelClient, FuturesModelClient, ModelClient
from pytriton_like.client.exceptions import (
    PyTritonClientInferenceServerError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config

FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


def fail(requests):
    raise ValueError(f"cannot take {len(requests)} requests today")


def slow(requests):
    # sleeps the first value of the first request, in seconds
    time.sleep(float(requests[0]["x"].reshape(-1)[0]))
    return [{"y": request["x"]} for request in requests]


def shout(requests):
    return [{"u": np.char.upper(request["s"].astype(np.bytes_))} for request in requests]


def add_sub(requests):
    responses = []
    for request in requests:
        b = request["b"] if "b" in request else np.zeros_like(request["a"])
        responses.append({"add": request["a"] + b, "sub": request["a"] - b})
    return responses


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=16))
        triton.bind(model_name="NoBatch", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(batching=False))
        triton.bind(model_name="Fail", infer_func=fail, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.bind(model_name="Slow", infer_func=slow, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=4))
        triton.bind(model_name="Shout", infer_func=shout, inputs=[Tensor(name="s", dtype=np.bytes_, shape=(-1,))],
                    outputs=[Tensor(name="u", dtype=np.bytes_, shape=(-1,))], config=ModelConfig(max_batch_size=8))
        triton.bind(model_name="AddSub", infer_func=add_sub,
                    inputs=[Tensor(name="a", dtype=np.int64, shape=(-1,)),
                            Tensor(name="b", dtype=np.int64, shape=(-1,), optional=True)],
                    outputs=[Tensor(name="add", dtype=np.int64, shape=(-1,)),
                             Tensor(name="sub", dtype=np.int64, shape=(-1,))],
                    config=ModelConfig(max_batch_size=8))
        triton.run()
        yield config


# --- the three clients behind one synchronous face ------------------------------------------


class SyncFace:
    """ModelClient as is."""

    def __init__(self, url, model, **kwargs):
        self.client = ModelClient(url, model, **kwargs)

    def infer_sample(self, *args, **kwargs):
        return self.client.infer_sample(*args, **kwargs)

    def infer_batch(self, *args, **kwargs):
        return self.client.infer_batch(*args, **kwargs)

    def model_config(self):
        return self.client.model_config

    def wait_for_model(self, timeout_s):
        return self.client.wait_for_model(timeout_s)

    def concurrently(self, calls):
        results = [None] * len(calls)

        def run(index, call):
            results[index] = call(self)

        threads = [threading.Thread(target=run, args=item) for item in enumerate(calls)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    def close(self):
        self.client.close()


class FuturesFace(SyncFace):
    """FuturesModelClient, resolving each future."""

    def __init__(self, url, model, **kwargs):
        kwargs.pop("lazy_init", None)  # as in PyTriton, the futures client has no eager init
        self.client = FuturesModelClient(url, model, **kwargs)

    def infer_sample(self, *args, **kwargs):
        return self.client.infer_sample(*args, **kwargs).result()

    def infer_batch(self, *args, **kwargs):
        return self.client.infer_batch(*args, **kwargs).result()

    def model_config(self):
        return self.client.model_config().result()

    def wait_for_model(self, timeout_s):
        return self.client.wait_for_model(timeout_s).result()

    def concurrently(self, calls):
        # every call submits at once; results are collected afterwards
        futures = [call(_Submitter(self.client)) for call in calls]
        return [future.result() for future in futures]


class _Submitter:
    def __init__(self, client):
        self._client = client

    def infer_sample(self, *args, **kwargs):
        return self._client.infer_sample(*args, **kwargs)


class AsyncioFace:
    """AsyncioModelClient, each coroutine run to completion in the face's own loop."""

    def __init__(self, url, model, **kwargs):
        self.loop = asyncio.new_event_loop()
        self.client = AsyncioModelClient(url, model, **kwargs)
        self.loop.run_until_complete(self.client.__aenter__())

    def _run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    def infer_sample(self, *args, **kwargs):
        return self._run(self.client.infer_sample(*args, **kwargs))

    def infer_batch(self, *args, **kwargs):
        return self._run(self.client.infer_batch(*args, **kwargs))

    def model_config(self):
        return self._run(self.client.model_config)

    def wait_for_model(self, timeout_s):
        return self._run(self.client.wait_for_model(timeout_s))

    def concurrently(self, calls):
        async def gather():
            return await asyncio.gather(*(call(self.client) for call in calls))

        return self._run(gather())

    def close(self):
        try:
            self._run(self.client.__aexit__(None, None, None))
        finally:
            self.loop.close()


FACES = {"sync": SyncFace, "futures": FuturesFace, "asyncio": AsyncioFace}


@pytest.fixture(params=[(kind, protocol) for kind in FACES for protocol in ("http", "grpc")],
                ids=lambda param: "-".join(param))
def open_client(request, server):
    kind, protocol = request.param
    port = server.http_port if protocol == "http" else server.grpc_port
    url = f"{protocol}://127.0.0.1:{port}"
    opened = []

    @contextlib.contextmanager
    def opener(model, **kwargs):
        face = FACES[kind](url, model, **kwargs)
        opened.append(face)
        try:
            yield face
        finally:
            face.close()

    opener.kind, opener.protocol, opener.url = kind, protocol, url
    return opener


# --- the suite ------------------------------------------------------------------------------


def test_infer_sample_positional_and_named(open_client):
    x = np.array([1.0, 2.5, -3.0], np.float32)
    with open_client("Double") as client:
        by_position = client.infer_sample(x)
        by_name = client.infer_sample(x=x)
    for result in (by_position, by_name):
        assert set(result) == {"y"}
        assert result["y"].dtype == np.float32
        np.testing.assert_array_equal(result["y"], x * 2)


def test_infer_batch_keeps_the_batch_axis(open_client):
    batch = np.arange(12, dtype=np.float32).reshape(4, 3)
    with open_client("Double") as client:
        np.testing.assert_array_equal(client.infer_batch(batch)["y"], batch * 2)
        np.testing.assert_array_equal(client.infer_batch(x=batch[:1])["y"], batch[:1] * 2)


def test_model_config_is_read_from_the_server(open_client):
    with open_client("AddSub") as client:
        config = client.model_config()
    assert config.model_name == "AddSub"
    assert (config.max_batch_size, config.batching, config.decoupled) == (8, True, False)
    assert [(t.name, t.shape, t.dtype, t.optional) for t in config.inputs] == [
        ("a", (-1,), np.int64, False),
        ("b", (-1,), np.int64, True),
    ]
    assert [(t.name, t.dtype) for t in config.outputs] == [("add", np.int64), ("sub", np.int64)]


def test_positional_inputs_follow_the_config_and_optional_inputs_may_be_left_out(open_client):
    a, b = np.array([5, 7], np.int64), np.array([1, 2], np.int64)
    with open_client("AddSub") as client:
        both = client.infer_sample(a, b)
        only_a = client.infer_sample(a=a)
        with pytest.raises(PyTritonClientValueError, match="requires input.*'a'"):
            client.infer_sample(b=b)
        with pytest.raises(PyTritonClientValueError, match="is INT64, got an array of float32"):
            client.infer_sample(a.astype(np.float32))
    np.testing.assert_array_equal(both["add"], [6, 9])
    np.testing.assert_array_equal(both["sub"], [4, 5])
    np.testing.assert_array_equal(only_a["add"], a)


def test_non_batching_model(open_client):
    x = np.array([1.0, 2.0], np.float32)
    with open_client("NoBatch") as client:
        np.testing.assert_array_equal(client.infer_sample(x)["y"], x * 2)
        assert client.model_config().batching is False
        with pytest.raises(PyTritonClientModelDoesntSupportBatchingError, match="'NoBatch'"):
            client.infer_batch(x[None])


def test_bytes_and_str_inputs(open_client):
    with open_client("Shout") as client:
        from_str = client.infer_sample(np.array(["hello", "wörld"]))
        from_bytes = client.infer_batch(s=np.array([[b"a", b"b"], [b"c", b"d"]]))
        from_objects = client.infer_sample(np.array([b"x", "y"], dtype=object))
    assert from_str["u"].tolist() == [b"HELLO", "WöRLD".encode()]
    assert from_bytes["u"].tolist() == [[b"A", b"B"], [b"C", b"D"]]
    assert from_objects["u"].tolist() == [b"X", b"Y"]


def test_callable_error_is_an_inference_server_error_with_its_message(open_client):
    with open_client("Fail") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="cannot take 1 requests today") as raised:
            client.infer_sample(np.ones(2, np.float32))
    assert raised.value.model_name == "Fail"
    assert raised.value.url == open_client.url
    assert raised.value.__cause__ is not None


def test_unknown_model_is_unavailable(open_client):
    with open_client("Nope", init_timeout_s=0.5) as client:
        with pytest.raises(PyTritonClientModelUnavailableError, match="'Nope'"):
            client.infer_sample(np.ones(2, np.float32))


def test_model_versions(open_client):
    with open_client("Double", model_version="1") as client:
        np.testing.assert_array_equal(client.infer_sample(np.ones(1, np.float32))["y"], [2.0])
    with open_client("Double", model_version="2", init_timeout_s=0.5) as client:
        with pytest.raises(PyTritonClientModelUnavailableError, match=r"version 2"):
            client.wait_for_model(0.5)


def test_sub_second_inference_timeout_and_the_connection_stays_usable(open_client):
    with open_client("Slow", inference_timeout_s=0.3) as client:
        client.wait_for_model(30)
        started = time.monotonic()
        with pytest.raises(PyTritonClientTimeoutError, match="within 0.3 s") as raised:
            client.infer_sample(np.array([1.0], np.float32))
        assert time.monotonic() - started < 0.9
        assert raised.value.timeout_s == 0.3
        time.sleep(0.9)  # let the server finish the abandoned request
        # the next request gets its own answer, not the late one
        np.testing.assert_array_equal(client.infer_sample(np.array([0.0, 7.0], np.float32))["y"], [0.0, 7.0])


def test_parameters_and_headers_are_accepted(open_client):
    with open_client("Double") as client:
        result = client.infer_sample(np.ones(1, np.float32), parameters={"p": 1, "q": "v", "r": True},
                                     headers={"X-Request-Tag": "abc"})
        np.testing.assert_array_equal(result["y"], [2.0])
        with pytest.raises(PyTritonClientValueError, match="reserved"):
            client.infer_sample(np.ones(1, np.float32), parameters={"priority": 1})


def test_concurrent_requests_get_their_own_results(open_client):
    values = [float(i) for i in range(32)]
    calls = [lambda client, v=v: client.infer_sample(np.array([v], np.float32)) for v in values]
    with open_client("Double") as client:
        results = client.concurrently(calls)
    assert [float(result["y"][0]) for result in results] == [2 * v for v in values]


def test_eager_init(open_client):
    with open_client("Double", lazy_init=False, init_timeout_s=30) as client:
        np.testing.assert_array_equal(client.infer_sample(np.ones(1, np.float32))["y"], [2.0])

"""The client front ends with no server behind the url: what they do without a reply.

No tritonserver runs here; the url points at a port nobody listens on.
"""

import asyncio
import dataclasses
import socket
import threading
import time

import numpy as np
import pytest

from pytriton_like.client import AsyncioModelClient, FuturesModelClient, ModelClient
from pytriton_like.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientModelUnavailableError,
    PyTritonClientQueueFullError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)

from .conftest import make_config

X = np.zeros(2, np.float32)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(params=["http", "grpc"])
def url(request):
    return f"{request.param}://127.0.0.1:{closed_port()}"


@pytest.mark.parametrize("client_type", [ModelClient, FuturesModelClient, AsyncioModelClient])
def test_invalid_url_raises_at_construction(client_type):
    with pytest.raises(PyTritonClientInvalidUrlError):
        client_type("https://localhost", "M")


def test_lazy_client_does_no_io_at_construction(url):
    with ModelClient(url, "M", init_timeout_s=0.1) as client:
        assert (client.model_name, client.model_version, client.url) == ("M", None, url)


def test_wait_for_model_times_out_on_time(url):
    with ModelClient(url, "M") as client:
        started = time.monotonic()
        with pytest.raises(PyTritonClientTimeoutError, match="server at .* was not ready within 0.3 s") as info:
            client.wait_for_model(0.3)
        assert 0.3 <= time.monotonic() - started < 2.0
        # the verdict chains the last probe's error: connection refused, or the only probe cut short by
        # the deadline when the machine is busy (CI saw it)
        assert isinstance(info.value.__cause__, (PyTritonClientModelUnavailableError, PyTritonClientTimeoutError))
        assert info.value.__cause__.message in str(info.value)
        assert info.value.timeout_s == 0.3


def test_first_inference_waits_init_timeout(url):
    with ModelClient(url, "M", init_timeout_s=0.2) as client:
        with pytest.raises(PyTritonClientTimeoutError):
            client.infer_sample(X)


def test_eager_init_raises_from_constructor(url):
    with pytest.raises(PyTritonClientTimeoutError):
        ModelClient(url, "M", lazy_init=False, init_timeout_s=0.2)


def test_known_config_skips_the_wait_and_refused_inference_is_unavailable(url):
    with ModelClient(url, "M", model_config=make_config(), ensure_model_is_ready=False) as client:
        assert client.is_batching_supported
        with pytest.raises(PyTritonClientModelUnavailableError, match="inference of model 'M'"):
            client.infer_sample(X)


def test_batch_on_non_batching_model_refused_without_io(url):
    config = make_config(max_batch_size=0)
    with ModelClient(url, "M", model_config=config, ensure_model_is_ready=False) as client:
        with pytest.raises(PyTritonClientModelDoesntSupportBatchingError):
            client.infer_batch(X[None])


def test_a_hand_made_config_batches_by_its_max_batch_size_as_in_pytriton(url):
    # TritonModelConfig(batching=False) keeps max_batch_size=4; PyTriton's clients go by the latter
    config = dataclasses.replace(make_config(), batching=False)
    assert config.max_batch_size > 0
    with ModelClient(url, "M", model_config=config, ensure_model_is_ready=False) as client:
        assert client.is_batching_supported
        with pytest.raises(PyTritonClientModelUnavailableError):  # sent, not refused as a batch
            client.infer_batch(X[None])


def test_bad_arguments_raise_before_any_io(url):
    with ModelClient(url, "M", init_timeout_s=60) as client:
        started = time.monotonic()
        with pytest.raises(PyTritonClientValueError):
            client.infer_sample(X, x=X)
        with pytest.raises(PyTritonClientValueError):
            client.infer_batch(X, parameters={"timeout": 1})
        with pytest.raises(PyTritonClientValueError):
            client.infer_sample(X, headers=["x"])
        assert time.monotonic() - started < 1.0


def test_closed_client_refuses_calls(url):
    client = ModelClient(url, "M")
    client.close()
    client.close()  # idempotent
    for call in (lambda: client.infer_sample(X), lambda: client.wait_for_model(1), lambda: client.model_config):
        with pytest.raises(PyTritonClientClosedError):
            call()


def test_close_from_another_thread_ends_a_wait(url):
    client = ModelClient(url, "M")
    errors = []

    def wait():
        try:
            client.wait_for_model(60)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    started = time.monotonic()
    client.close()
    waiter.join(5)
    assert not waiter.is_alive()
    assert time.monotonic() - started < 2.0
    assert [type(e) for e in errors] == [PyTritonClientClosedError]


def test_asyncio_client_offline(url):
    async def scenario():
        with pytest.raises(PyTritonClientTimeoutError):
            async with AsyncioModelClient(url, "M", lazy_init=False, init_timeout_s=0.2):
                pass
        async with AsyncioModelClient(url, "M", init_timeout_s=0.2) as client:
            with pytest.raises(PyTritonClientValueError):
                await client.infer_sample()
            with pytest.raises(PyTritonClientTimeoutError):
                await client.infer_sample(X)
            with pytest.raises(PyTritonClientTimeoutError):
                await client.model_config
        with pytest.raises(PyTritonClientClosedError):
            await client.infer_sample(X)
        config = make_config(max_batch_size=0)
        async with AsyncioModelClient(url, "M", model_config=config, ensure_model_is_ready=False) as client:
            with pytest.raises(PyTritonClientModelDoesntSupportBatchingError):
                await client.infer_batch(X[None])
            with pytest.raises(PyTritonClientModelUnavailableError):
                await client.infer_sample(X)

    asyncio.run(scenario())


def test_futures_client_offline(url):
    with FuturesModelClient(url, "M", init_timeout_s=0.2, max_workers=2) as client:
        assert (client.model_name, client.model_version) == ("M", None)
        with pytest.raises(PyTritonClientValueError):
            client.infer_sample(X, x=X).result(5)
        with pytest.raises(PyTritonClientTimeoutError):
            client.infer_sample(X).result(5)
        with pytest.raises(PyTritonClientTimeoutError):
            client.wait_for_model(0.1).result(5)
        with pytest.raises(PyTritonClientTimeoutError):
            client.model_config().result(5)
    with pytest.raises(PyTritonClientClosedError):
        client.infer_sample(X)
    client.close()  # idempotent


@pytest.mark.parametrize("kwargs", [{"max_workers": 0}, {"max_queue_size": -1}, {"max_workers": 1.5}])
def test_futures_client_bad_pool_sizes(kwargs):
    with pytest.raises(PyTritonClientValueError):
        FuturesModelClient("localhost", "M", **kwargs)


def test_futures_client_non_blocking_queue_full(url):
    # one worker busy waiting for the server, one queue slot taken: the third request is refused
    client = FuturesModelClient(url, "M", init_timeout_s=0.5, max_workers=1, max_queue_size=1, non_blocking=True)
    try:
        first, second = client.infer_sample(X), client.infer_sample(X)
        with pytest.raises(PyTritonClientQueueFullError, match="queue .* is full"):
            client.infer_sample(X)
    finally:
        client.close(wait=True)
    for future in (first, second):
        assert isinstance(future.exception(5), PyTritonClientTimeoutError)


def test_futures_close_without_waiting(url):
    client = FuturesModelClient(url, "M", init_timeout_s=0.3, max_workers=1)
    future = client.infer_sample(X)
    started = time.monotonic()
    client.close(wait=False)
    assert time.monotonic() - started < 0.2
    assert isinstance(future.exception(5), PyTritonClientTimeoutError)  # queued work still ran


def test_from_existing_client_keeps_settings_and_config(url):
    config = make_config()
    with ModelClient(url, "M", "3", init_timeout_s=7, inference_timeout_s=0.5, model_config=config,
                     ensure_model_is_ready=False, access_token="t") as original:
        with ModelClient.from_existing_client(original) as copy:
            assert (copy.url, copy.model_name, copy.model_version) == (url, "M", "3")
            assert copy.model_config is config  # reused: no wait, no request

    async def scenario():
        async with AsyncioModelClient(url, "M", model_config=config, ensure_model_is_ready=False) as original:
            async with AsyncioModelClient.from_existing_client(original) as copy:
                assert await copy.model_config is config

    asyncio.run(scenario())

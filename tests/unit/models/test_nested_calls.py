"""The clients a callable gets from its TritonContext, without a server: caching, guards, closing."""

import asyncio

import numpy as np
import pytest

from pytriton_like.client import AsyncioModelClient, ModelClient
from pytriton_like.client.exceptions import PyTritonClientClosedError, PyTritonClientTimeoutError
from pytriton_like.decorators import TritonContext
from pytriton_like.exceptions import PyTritonInvalidOperationError, PyTritonValidationError
from pytriton_like.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton_like.models.nested_calls import DEFAULT_NESTED_TIMEOUT_S, NestedCalls
from pytriton_like.models.nested_clients import _Lease, _leased
from pytriton_like.models.nested_settings import NestedCallSettings, network_url
from pytriton_like.triton import TritonConfig

CONFIG = TritonModelConfig(
    model_name="Router",
    inputs=(TensorSpec("x", (1,), np.float32),),
    outputs=(TensorSpec("y", (1,), np.float32),),
)


@pytest.fixture
def loopback():
    clients = NestedCalls(NestedCallSettings("grpc://127.0.0.1:1"))  # nothing listens: these tests make no calls
    yield clients
    clients.close()


def test_a_client_is_made_once_per_model_version_and_timeout(loopback):
    context = TritonContext(model_config=CONFIG, loopback=loopback)
    small = context.client("Small")
    assert isinstance(small, ModelClient)
    assert context.client("Small") is small
    assert context.client("Small", 2) is not small
    assert context.client("Small", "2") is context.client("Small", 2)
    assert context.client("Small", inference_timeout_s=DEFAULT_NESTED_TIMEOUT_S) is small
    assert context.client("Small", inference_timeout_s=1) is not small
    assert (small.url, small.model_name, small.model_version) == ("grpc://127.0.0.1:1", "Small", None)


def test_stop_closes_every_client_and_refuses_new_ones(loopback):
    context = TritonContext(model_config=CONFIG, loopback=loopback)
    small = context.client("Small")
    loopback.close()
    with pytest.raises(PyTritonClientClosedError):
        small.infer_sample(x=np.zeros(1, np.float32))
    with pytest.raises(PyTritonInvalidOperationError, match="the server is stopping"):
        context.client("Small")


def test_async_clients_belong_to_their_event_loop(loopback):
    context = TritonContext(model_config=CONFIG, loopback=loopback)

    async def get_twice():
        return context.async_client("Small"), context.async_client("Small")

    loops = [asyncio.new_event_loop() for _ in range(2)]
    try:
        (first, again), (other, _) = (loop.run_until_complete(get_twice()) for loop in loops)
        assert isinstance(first, AsyncioModelClient)
        assert first is again and first is not other
        loopback.close()  # closes each in its own loop
        with pytest.raises(PyTritonClientClosedError):
            loops[0].run_until_complete(first.infer_sample(x=np.zeros(1, np.float32)))
    finally:
        for loop in loops:
            loop.close()


def test_a_blocking_client_is_refused_inside_an_event_loop_and_an_async_one_outside(loopback):
    context = TritonContext(model_config=CONFIG, loopback=loopback)

    async def blocking_call():
        context.client("Small")

    with pytest.raises(PyTritonInvalidOperationError, match=r"in an async def callable use `await triton_context.async_client"):
        asyncio.run(blocking_call())
    with pytest.raises(PyTritonInvalidOperationError, match="async_client\\(\\) needs a running event loop"):
        context.async_client("Small")


def test_a_context_outside_a_server_cannot_call_models():
    with pytest.raises(PyTritonInvalidOperationError, match="belongs to no running server"):
        TritonContext(model_config=CONFIG).client("Small")


@pytest.mark.parametrize("name, timeout", [("", None), (None, None), ("Small", 0), ("Small", -1.0)])
def test_bad_arguments_are_refused(loopback, name, timeout):
    with pytest.raises(PyTritonValidationError, match="model 'Router'"):
        TritonContext(model_config=CONFIG, loopback=loopback).client(name, inference_timeout_s=timeout)


def test_a_timeout_says_which_call_may_be_a_cycle(loopback):
    client = TritonContext(model_config=CONFIG, loopback=loopback).client("Router", inference_timeout_s=0.5)
    with pytest.raises(PyTritonClientTimeoutError) as caught:
        client.infer_sample(x=np.zeros(1, np.float32))  # nothing listens: the readiness wait times out
    message = str(caught.value)
    assert "model 'Router' called model 'Router' and got no answer in time" in message
    assert "in a cycle (Router -> Router)" in message
    assert caught.value.timeout_s == 0.5


@pytest.mark.parametrize(
    "fields, url",
    [
        ({"grpc_port": 9001, "http_port": 9000}, "grpc://127.0.0.1:9001"),
        ({"grpc_address": "0.0.0.0"}, "grpc://127.0.0.1:8001"),
        ({"allow_grpc": False, "http_port": 9000, "http_address": "10.0.0.2"}, "http://10.0.0.2:9000"),
    ],
)
def test_the_clients_talk_grpc_when_it_is_on_else_http(fields, url):
    assert network_url(TritonConfig(**fields)) == url


class _Pool:
    def __init__(self):
        self.given_back = []

    def give_back(self, channel):
        self.given_back.append(channel)


class _Channel:
    closed = False

    def close(self):
        self.closed = True


def test_a_stream_dropped_unstarted_closes_its_connection_at_once():
    """An unstarted generator's ``finally`` never runs: the lease's finalizer ends the call instead."""
    pool, channel = _Pool(), _Channel()

    def responses():
        yield 1

    stream = _leased(responses(), _Lease(pool, channel))
    del stream
    assert channel.closed and pool.given_back == []


def test_a_stream_run_to_its_end_gives_its_connection_back_once():
    pool, channel = _Pool(), _Channel()
    lease = _Lease(pool, channel)

    def responses():
        try:
            yield 1
        finally:
            lease.end()

    stream = _leased(responses(), lease)
    assert list(stream) == [1]
    del stream
    assert pool.given_back == [channel] and not channel.closed

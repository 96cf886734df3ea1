"""The decoupled (streaming) clients without a server: urls, argument checks, stream parsing, errors, closing."""

import asyncio
import socket

import numpy as np
import pytest
import tritonclient.grpc
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

import pytriton_like.client
import pytriton_like.client.client
from pytriton_like.client import AsyncioDecoupledModelClient, DecoupledModelClient, ModelClient
from pytriton_like.client.core import CallArgs, ClientCore
from pytriton_like.client.error_mapping import ErrorContext, translate_stream_error
from pytriton_like.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)

from .conftest import make_config

CLIENTS = [DecoupledModelClient, AsyncioDecoupledModelClient]
X = np.zeros(2, np.float32)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def collect(client, method="infer_sample", *inputs, **named):
    """All responses of one request (sync or asyncio client)."""
    if isinstance(client, AsyncioDecoupledModelClient):

        async def gather():
            return [response async for response in getattr(client, method)(*inputs, **named)]

        return asyncio.run(gather())
    return list(getattr(client, method)(*inputs, **named))


def close(client):
    if isinstance(client, AsyncioDecoupledModelClient):
        asyncio.run(client.close())
    else:
        client.close()


def test_exported_under_pytritons_names():
    for module in (pytriton_like.client, pytriton_like.client.client):
        assert {"DecoupledModelClient", "AsyncioDecoupledModelClient"} <= set(module.__all__)
        assert module.DecoupledModelClient is DecoupledModelClient
        assert module.AsyncioDecoupledModelClient is AsyncioDecoupledModelClient
    assert issubclass(DecoupledModelClient, ModelClient)  # as in PyTriton


@pytest.mark.parametrize("url", ["localhost", "localhost:8000", "http://127.0.0.1:8000"])
def test_http_urls_are_refused_at_construction_by_the_sync_client(url):
    with pytest.raises(PyTritonClientValueError, match="DecoupledModelClient streams over gRPC only") as info:
        DecoupledModelClient(url, "M")
    assert isinstance(info.value, PyTritonClientInvalidUrlError)
    assert info.value.url.startswith("http://")


@pytest.mark.parametrize("url", ["localhost", "http://127.0.0.1:8000"])
def test_http_urls_are_refused_at_the_first_request_by_the_asyncio_client(url):
    # as PyTriton 0.7.0's: created fine, refused inside ``async for`` before anything is sent
    client = AsyncioDecoupledModelClient(url, "M", model_config=make_config(decoupled=True))
    try:
        with pytest.raises(PyTritonClientValueError, match="AsyncioDecoupledModelClient streams over gRPC only") as info:
            collect(client, "infer_sample", X)
        assert isinstance(info.value, PyTritonClientInvalidUrlError)
        assert info.value.url.startswith("http://")
    finally:
        close(client)


@pytest.mark.parametrize("client_type", CLIENTS)
def test_unparsable_urls_are_refused(client_type):
    with pytest.raises(PyTritonClientInvalidUrlError, match="scheme 'https'"):
        client_type("https://localhost", "M")


@pytest.mark.parametrize("client_type", CLIENTS)
def test_argument_errors_are_raised_at_the_call(client_type):
    client = client_type(f"grpc://127.0.0.1:{closed_port()}", "M", init_timeout_s=0.1)
    try:
        with pytest.raises(PyTritonClientValueError, match="both positionally"):
            client.infer_sample(X, x=X)
        with pytest.raises(PyTritonClientValueError, match="reserved by Triton"):
            client.infer_batch(X, parameters={"priority": 1})
        with pytest.raises(PyTritonClientValueError, match="no inputs"):
            client.infer_sample()
    finally:
        close(client)


@pytest.mark.parametrize("client_type", CLIENTS)
def test_no_server_is_a_timeout(client_type):
    client = client_type(f"grpc://127.0.0.1:{closed_port()}", "M", init_timeout_s=0.2)
    try:
        with pytest.raises(PyTritonClientTimeoutError, match="was not ready within 0.2 s") as info:
            collect(client, "infer_sample", X)
        # the verdict chains the last probe's error: connection refused, or the only probe cut short by
        # the deadline when the machine is busy (CI saw it)
        assert isinstance(info.value.__cause__, (PyTritonClientModelUnavailableError, PyTritonClientTimeoutError))
        assert info.value.__cause__.message in str(info.value)
    finally:
        close(client)


def test_eager_init_failure_closes_the_client():
    with pytest.raises(PyTritonClientTimeoutError):
        DecoupledModelClient(f"grpc://127.0.0.1:{closed_port()}", "M", lazy_init=False, init_timeout_s=0.1)


def test_eager_init_failure_closes_the_asyncio_client():
    async def enter():
        async with AsyncioDecoupledModelClient(
            f"grpc://127.0.0.1:{closed_port()}", "M", lazy_init=False, init_timeout_s=0.1
        ):
            pass

    with pytest.raises(PyTritonClientTimeoutError):
        asyncio.run(enter())


@pytest.mark.parametrize("client_type", CLIENTS)
def test_closed_client_refuses_calls(client_type):
    client = client_type(f"grpc://127.0.0.1:{closed_port()}", "M", model_config=make_config(decoupled=True))
    close(client)
    close(client)  # idempotent
    with pytest.raises(PyTritonClientClosedError):
        collect(client, "infer_sample", X)


def test_context_managers_return_the_client():
    with DecoupledModelClient("grpc://127.0.0.1:1", "M") as client:
        assert isinstance(client, DecoupledModelClient)

    async def enter():
        async with AsyncioDecoupledModelClient("grpc://127.0.0.1:1", "M") as aclient:
            return aclient

    assert isinstance(asyncio.run(enter()), AsyncioDecoupledModelClient)


def test_from_existing_client_keeps_the_url_and_config():
    config = make_config(decoupled=True)
    with DecoupledModelClient("grpc://127.0.0.1:1", "M", model_config=config, inference_timeout_s=2) as client:
        with DecoupledModelClient.from_existing_client(client) as copy:
            assert isinstance(copy, DecoupledModelClient)
            assert (copy.url, copy.model_name) == ("grpc://127.0.0.1:1", "M")


# --- the core's part: the model kind, the stream request and its responses -------------------


def core_with(config):
    return ClientCore("grpc://localhost", config.model_name, model_config=config)


def test_a_decoupled_client_needs_a_decoupled_model_and_the_others_the_contrary():
    call = CallArgs((X,), {}, None, None, sample=True)
    with pytest.raises(PyTritonClientInferenceServerError, match="is not decoupled.*use ModelClient"):
        core_with(make_config()).prepare(call, decoupled=True)
    with pytest.raises(PyTritonClientInferenceServerError, match="is decoupled.*use DecoupledModelClient"):
        core_with(make_config(decoupled=True)).prepare(call)
    assert core_with(make_config(decoupled=True)).prepare(call, decoupled=True).strip_batch_axis


def test_stream_request_has_everything_but_the_headers():
    core = core_with(make_config(decoupled=True))
    request = core.prepare(CallArgs((X,), {}, {"p": 1}, {"H": "v"}, sample=True), decoupled=True)
    kwargs = core.stream_request(request)
    assert "headers" not in kwargs
    assert request.headers == {"h": "v"}
    assert (kwargs["model_name"], kwargs["parameters"], kwargs["inputs"][0].shape()) == ("Model", {"p": 1}, [1, 2])


def grpc_result(arrays, final=None):
    """A tritonclient.grpc InferResult as a stream delivers it."""
    response = service_pb2.ModelInferResponse(model_name="Model", id="1")
    for name, array in arrays.items():
        output = response.outputs.add(name=name, datatype="FP32", shape=list(array.shape))
        response.raw_output_contents.append(array.astype(np.float32).tobytes())
        assert output.name == name
    if final is not None:
        response.parameters["triton_final_response"].bool_param = final
    return tritonclient.grpc.InferResult(response)


@pytest.mark.parametrize("sample", [True, False])
def test_stream_responses_and_the_final_marker(sample):
    core = core_with(make_config(decoupled=True))
    inputs = X if sample else X[np.newaxis]
    request = core.prepare(CallArgs((inputs,), {}, None, None, sample=sample), decoupled=True)
    batch = np.array([[1.0, 2.0]], np.float32)
    expected = batch[0] if sample else batch

    arrays, final = core.stream_response(grpc_result({"y": batch}, final=False), request)
    np.testing.assert_array_equal(arrays["y"], expected)
    assert final is False
    assert core.stream_response(grpc_result({}, final=True), request) == (None, True)
    arrays, final = core.stream_response(grpc_result({"y": batch}, final=True), request)  # last one with data
    np.testing.assert_array_equal(arrays["y"], expected)
    assert final is True
    arrays, final = core.stream_response(grpc_result({"y": batch}), request)  # no flag: not the last
    assert final is False and set(arrays) == {"y"}


CONTEXT = ErrorContext("streaming inference", "M", None, "grpc://localhost:8001", timeout_s=5.0)


def test_an_error_the_stream_delivers_is_the_servers_answer():
    error = translate_stream_error(InferenceServerException("RuntimeError: mid-stream failure"), CONTEXT)
    assert type(error) is PyTritonClientInferenceServerError
    assert str(error).endswith("failed: RuntimeError: mid-stream failure")
    assert (error.model_name, error.url, error.status) == ("M", "grpc://localhost:8001", None)


@pytest.mark.parametrize(
    "status, expected",
    [
        ("StatusCode.UNAVAILABLE", PyTritonClientModelUnavailableError),
        ("StatusCode.DEADLINE_EXCEEDED", PyTritonClientTimeoutError),
        ("StatusCode.CANCELLED", PyTritonClientInferenceServerError),
    ],
)
def test_errors_of_the_stream_itself_map_by_status(status, expected):
    error = translate_stream_error(InferenceServerException("gone", status=status), CONTEXT)
    assert type(error) is expected


def test_a_timeout_waiting_for_the_next_response():
    error = translate_stream_error(TimeoutError("the next response did not come"), CONTEXT)
    assert isinstance(error, PyTritonClientTimeoutError) and error.timeout_s == 5.0
    assert "did not finish within 5 s: the next response did not come" in str(error)


def test_stream_errors_of_a_closed_client_say_it_was_closed():
    core = core_with(make_config(decoupled=True))
    error = InferenceServerException("Locally cancelled by application!", status="StatusCode.CANCELLED")
    assert type(core.stream_error(error)) is PyTritonClientInferenceServerError
    core.close()
    closed = core.stream_error(error)
    assert isinstance(closed, PyTritonClientClosedError) and isinstance(closed, PyTritonClientError)
    assert "closed during streaming inference" in str(closed)

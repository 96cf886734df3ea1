"""Translation of tritonclient, grpc, aiohttp and socket errors, by type, in one place."""

import asyncio
import socket

import aiohttp
import grpc
import pytest
from geventhttpclient.response import HTTPConnectionClosed
from tritonclient.utils import InferenceServerException

from pytriton_like.client.error_mapping import ErrorContext, map_errors, translate_error
from pytriton_like.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientModelNotFoundError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)

CONTEXT = ErrorContext(operation="inference", model_name="M", model_version="2", url="grpc://h:8001", timeout_s=0.25)


class FakeRpcError(grpc.RpcError):
    """What grpc raises: an RpcError that is also a Call with code() and details()."""

    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


def server_error(status, message="server says no"):
    return InferenceServerException(msg=message, status=status)


@pytest.mark.parametrize(
    "exc, expected",
    [
        (server_error("StatusCode.DEADLINE_EXCEEDED", "Deadline Exceeded"), PyTritonClientTimeoutError),
        (server_error("504"), PyTritonClientTimeoutError),
        (socket.timeout("timed out"), PyTritonClientTimeoutError),
        (TimeoutError("timed out"), PyTritonClientTimeoutError),
        (asyncio.TimeoutError(), PyTritonClientTimeoutError),
        (aiohttp.ServerTimeoutError("read timeout"), PyTritonClientTimeoutError),
        (server_error("404", "Request for unknown model: 'M' is not found"), PyTritonClientModelNotFoundError),
        (server_error("StatusCode.NOT_FOUND"), PyTritonClientModelNotFoundError),
        (server_error("503"), PyTritonClientModelUnavailableError),
        (server_error("StatusCode.UNAVAILABLE", "failed to connect"), PyTritonClientModelUnavailableError),
        (ConnectionRefusedError(111, "Connection refused"), PyTritonClientModelUnavailableError),
        (ConnectionResetError(104, "reset"), PyTritonClientModelUnavailableError),
        (socket.gaierror(-2, "Name or service not known"), PyTritonClientModelUnavailableError),
        (aiohttp.ServerDisconnectedError(), PyTritonClientModelUnavailableError),
        (HTTPConnectionClosed("connection closed."), PyTritonClientModelUnavailableError),  # the server died mid-answer
        (server_error("500", "boom: callable failed"), PyTritonClientInferenceServerError),
        (server_error("400", "unexpected shape"), PyTritonClientInferenceServerError),
        (server_error("StatusCode.INTERNAL"), PyTritonClientInferenceServerError),
        (server_error("StatusCode.INVALID_ARGUMENT"), PyTritonClientInferenceServerError),
        (FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "late"), PyTritonClientTimeoutError),
        (FakeRpcError(grpc.StatusCode.UNAVAILABLE, "down"), PyTritonClientModelUnavailableError),
        (FakeRpcError(grpc.StatusCode.INTERNAL, "broken"), PyTritonClientInferenceServerError),
        (server_error(None, "url should not include the scheme"), PyTritonClientError),
    ],
)
def test_translation(exc, expected):
    error = translate_error(exc, CONTEXT)
    assert type(error) is expected
    assert (error.model_name, error.model_version, error.url) == ("M", "2", "grpc://h:8001")
    assert error.message.startswith("inference of model 'M' (version 2) at grpc://h:8001")


def test_not_found_is_unavailable_and_a_server_error_as_pytriton_raises():
    error = translate_error(server_error("404", "Request for unknown model"), CONTEXT)
    assert isinstance(error, PyTritonClientModelUnavailableError)
    assert isinstance(error, PyTritonClientInferenceServerError) and error.status == "404"


def test_server_message_and_status_kept():
    error = translate_error(server_error("500", "boom: callable failed"), CONTEXT)
    assert error.message.endswith("boom: callable failed")
    assert error.status == "500"
    rpc = translate_error(FakeRpcError(grpc.StatusCode.INTERNAL, "broken"), CONTEXT)
    assert rpc.status == "StatusCode.INTERNAL"
    assert rpc.message.endswith("broken")


def test_timeout_names_the_limit():
    error = translate_error(socket.timeout("timed out"), CONTEXT)
    assert error.timeout_s == 0.25
    assert "within 0.25 s" in error.message


def test_client_errors_pass_through():
    closed = PyTritonClientClosedError("closed")
    assert translate_error(closed, CONTEXT) is closed


def test_map_errors_chains_the_original():
    original = server_error("StatusCode.NOT_FOUND")
    with pytest.raises(PyTritonClientModelUnavailableError) as info:
        with map_errors(CONTEXT):
            raise original
    assert info.value.__cause__ is original


def test_map_errors_leaves_other_errors_alone():
    with pytest.raises(KeyError):
        with map_errors(CONTEXT):
            raise KeyError("a bug of ours")
    closed = PyTritonClientClosedError("closed")
    with pytest.raises(PyTritonClientClosedError) as info:
        with map_errors(CONTEXT):
            raise closed
    assert info.value is closed


def test_latest_version_in_message():
    context = ErrorContext(operation="readiness check", model_name="M", model_version=None, url="http://h:8000")
    error = translate_error(ConnectionRefusedError(111, "Connection refused"), context)
    assert error.message.startswith("readiness check of model 'M' (latest version) at http://h:8000")
    assert error.model_version is None

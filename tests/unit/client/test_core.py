"""ClientCore: argument checks, timeouts, request preparation and error context (no server)."""

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from pytriton_like.client.core import DEFAULT_INFERENCE_TIMEOUT_S, DEFAULT_INIT_TIMEOUT_S, CallArgs, ClientCore
from pytriton_like.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelUnavailableError,
    PyTritonClientValueError,
)
from pytriton_like.client.url import Protocol

from .conftest import make_config


def test_defaults():
    core = ClientCore("localhost", "M")
    assert core.protocol is Protocol.HTTP
    assert (core.init_timeout_s, core.inference_timeout_s) == (DEFAULT_INIT_TIMEOUT_S, DEFAULT_INFERENCE_TIMEOUT_S)
    assert DEFAULT_INIT_TIMEOUT_S == 300.0
    assert core.model_version is None and core.model_config is None


def test_version_normalised_to_string():
    assert ClientCore("localhost", "M", 2).model_version == "2"
    assert ClientCore("localhost", "M", "").model_version is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model_name": ""},
        {"model_name": None},
        {"model_version": 1.5},
        {"model_version": True},
        {"init_timeout_s": 0},
        {"inference_timeout_s": -1},
        {"inference_timeout_s": "1"},
        {"inference_timeout_s": True},
        {"model_config": {"name": "M"}},
    ],
)
def test_bad_arguments(kwargs):
    with pytest.raises(PyTritonClientValueError):
        ClientCore(**{"url": "localhost", "model_name": "M", **kwargs})


def test_bad_url():
    with pytest.raises(PyTritonClientInvalidUrlError):
        ClientCore("https://localhost", "M")


def test_sub_second_timeouts_kept():
    core = ClientCore("grpc://localhost", "M", init_timeout_s=0.5, inference_timeout_s=0.2)
    assert core.inference_timeout_s == 0.2
    assert core.grpc_kwargs(0.2) == {"client_timeout": 0.2}
    assert ClientCore("localhost", "M").grpc_kwargs(0.2) == {}
    assert core.control_timeout_s() == 0.2


def test_control_timeout_within_the_wait():
    core = ClientCore("localhost", "M", init_timeout_s=30, inference_timeout_s=10)
    waiter = core.waiter(2.0)
    assert core.control_timeout_s() == 10
    assert 1.9 < core.control_timeout_s(waiter) <= 2.0


def test_call_args_checked_before_any_io():
    with pytest.raises(PyTritonClientValueError):
        CallArgs((), {}, None, None, sample=True)
    with pytest.raises(PyTritonClientValueError):
        CallArgs((np.zeros(1),), {}, {"priority": 1}, None, sample=True)
    call = CallArgs((np.zeros(1),), {}, {"p": 1}, {"H": 1}, sample=False)
    assert (call.parameters, call.headers, call.sample) == ({"p": 1}, {"h": "1"}, False)


def test_prepare_needs_the_config():
    core = ClientCore("localhost", "M")
    with pytest.raises(PyTritonClientError, match="not known yet"):
        core.prepare(CallArgs((np.zeros(1, np.float32),), {}, None, None, sample=True))


def test_prepare_numbers_requests():
    core = ClientCore("localhost", "M", model_config=make_config())
    call = CallArgs((np.zeros(1, np.float32),), {}, None, None, sample=True)
    assert [core.prepare(call).request_id for _ in range(3)] == ["0", "1", "2"]  # from 0, as PyTriton


def test_decoupled_model_refused():
    core = ClientCore("localhost", "M", model_config=make_config(decoupled=True))
    with pytest.raises(PyTritonClientInferenceServerError, match="decoupled"):
        core.prepare(CallArgs((np.zeros(1, np.float32),), {}, None, None, sample=True))


def test_config_calls_per_protocol():
    http, grpc = ClientCore("localhost", "M", "2"), ClientCore("grpc://localhost", "M")
    assert http.model_call(1.0) == {"model_name": "M", "model_version": "2"}
    assert grpc.model_call(1.0) == {"model_name": "M", "model_version": "", "client_timeout": 1.0}
    assert http.set_model_config(http.raw_model_config({"name": "M"})).model_version == 2


def test_management_calls_per_protocol():
    http, grpc = ClientCore("localhost", "M", "2", inference_timeout_s=9), ClientCore("grpc://localhost", "M", "2")
    assert http.statistics_call(False, 1.0) == {"model_name": "M", "model_version": "2"}
    assert grpc.statistics_call(True, 1.0) == {"model_name": "", "model_version": "", "client_timeout": 1.0}
    assert http.load_call('{"x": 1}', None) == {"model_name": "M", "config": '{"x": 1}', "files": None}
    assert http.unload_call(True) == {"model_name": "M", "unload_dependents": True}
    assert grpc.unload_call(False) == {"model_name": "M", "unload_dependents": False, "client_timeout": 60.0}


def test_management_flags_must_be_bools():
    core = ClientCore("localhost", "M")
    with pytest.raises(PyTritonClientValueError, match="unload_dependents must be True or False, got 1"):
        core.unload_call(1)
    with pytest.raises(PyTritonClientValueError, match="all_models must be True or False, got 'yes'"):
        core.statistics_call("yes", 1.0)


def test_errors_maps_and_names_the_operation():
    core = ClientCore("grpc://h:1", "M")
    with pytest.raises(PyTritonClientModelUnavailableError, match="^inference of model 'M'") as info:
        with core.errors("inference", 1.0):
            raise InferenceServerException("gone", status="StatusCode.NOT_FOUND")
    assert info.value.url == "grpc://h:1"


def test_errors_after_close_become_closed_errors():
    core = ClientCore("localhost", "M")
    core.close()
    with pytest.raises(PyTritonClientClosedError, match="closed during inference") as info:
        with core.errors("inference", 1.0):
            raise ConnectionResetError(104, "reset")
    assert isinstance(info.value.__cause__, PyTritonClientModelUnavailableError)
    with pytest.raises(PyTritonClientClosedError):
        core.check_open()


def test_pause_returns_at_once_when_closed():
    core = ClientCore("localhost", "M")
    core.close()
    with pytest.raises(PyTritonClientClosedError):
        core.pause(60)


def test_access_token_goes_with_every_call():
    http = ClientCore("localhost", "M", access_token="t", model_config=make_config())
    grpc = ClientCore("grpc://localhost", "M", access_token="t")
    assert http.control_kwargs(1.0) == {"headers": {"triton-access-token": "t"}}
    assert grpc.control_kwargs(1.0) == {
        "client_timeout": 1.0,
        "headers": {"triton-grpc-protocol-triton-access-token": "t"},
    }
    assert grpc.model_call(1.0)["headers"] == {"triton-grpc-protocol-triton-access-token": "t"}
    call = CallArgs((np.zeros(1, np.float32),), {}, None, {"X-Tag": "a"}, sample=True)
    assert http.prepare(call).headers == {"triton-access-token": "t", "x-tag": "a"}
    without = ClientCore("localhost", "M", model_config=make_config())
    assert without.control_kwargs(1.0) == {}
    assert without.prepare(CallArgs((np.zeros(1, np.float32),), {}, None, None, sample=True)).headers is None


@pytest.mark.parametrize("token", ["", 5])
def test_bad_access_token(token):
    with pytest.raises(PyTritonClientValueError, match="access_token"):
        ClientCore("localhost", "M", access_token=token)


def test_any_error_of_a_call_racing_close_is_a_closed_error():
    core = ClientCore("grpc://localhost", "M")
    core.close()
    with pytest.raises(PyTritonClientClosedError) as info:
        with core.errors("readiness check", 1.0):
            raise ValueError("Cannot invoke RPC on closed channel!")  # what grpc raises
    assert isinstance(info.value.__cause__, ValueError)


def test_other_errors_of_an_open_client_are_left_alone():
    core = ClientCore("localhost", "M")
    with pytest.raises(ValueError):
        with core.errors("inference", 1.0):
            raise ValueError("a bug")

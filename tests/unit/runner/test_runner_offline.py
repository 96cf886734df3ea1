"""The runner's pure parts: result parsing for both protocols, argument checks."""

import numpy as np
import pytest
import tritonclient.grpc
from tritonclient.grpc import service_pb2

from pytriton_like.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelUnavailableError,
    PyTritonClientValueError,
)
from pytriton_like.runner import RunResult, TritonRunner


class FakeHttpResult:
    def __init__(self, response, arrays):
        self._response = response
        self._arrays = arrays

    def get_response(self):
        return self._response

    def as_numpy(self, name):
        return self._arrays.get(name)


HTTP_RESPONSE = {
    "id": "7",
    "model_name": "AddSub",
    "model_version": "1",
    "outputs": [
        {"name": "add", "datatype": "FP32", "shape": [1, 2], "parameters": {"binary_data_size": 8}},
        {"name": "sub", "datatype": "FP32", "shape": [1, 2], "parameters": {"binary_data_size": 8}},
    ],
}
EXPECTED = {
    "model_name": "AddSub",
    "model_version": "1",
    "id": "7",
    "outputs": [
        {"name": "add", "datatype": "FP32", "shape": [1, 2]},
        {"name": "sub", "datatype": "FP32", "shape": [1, 2]},
    ],
}


def grpc_result():
    response = service_pb2.ModelInferResponse(model_name="AddSub", model_version="1", id="7")
    for name, values in (("add", [1.5, 2.5]), ("sub", [0.5, 1.5])):
        output = response.outputs.add(name=name, datatype="FP32", shape=[1, 2])
        del output  # contents travel in raw_output_contents, in output order
        response.raw_output_contents.append(np.array([values], np.float32).tobytes())
    return tritonclient.grpc.InferResult(response)


def test_http_and_grpc_results_read_alike():
    arrays = {"add": np.array([[1.5, 2.5]], np.float32), "sub": np.array([[0.5, 1.5]], np.float32)}
    for result in (RunResult(FakeHttpResult(HTTP_RESPONSE, arrays)), RunResult(grpc_result())):
        assert result.get_response() == EXPECTED
        assert result.get_output("sub") == EXPECTED["outputs"][1]
        assert result.output_names == ["add", "sub"]
        np.testing.assert_array_equal(result.as_numpy("add"), [[1.5, 2.5]])
        with pytest.raises(KeyError, match=r"model 'AddSub' answered no output 'x'; its outputs: 'add', 'sub'"):
            result.as_numpy("x")
        with pytest.raises(KeyError):
            result.get_output("x")


def test_get_response_is_a_copy():
    result = RunResult(FakeHttpResult(HTTP_RESPONSE, {}))
    result.get_response()["outputs"][0]["name"] = "changed"
    assert result.get_output("add")["name"] == "add"


def test_bad_url_and_timeouts_fail_at_construction():
    with pytest.raises(PyTritonClientInvalidUrlError):
        TritonRunner("ftp://host")
    with pytest.raises(PyTritonClientValueError, match="init_timeout_s"):
        TritonRunner("localhost", init_timeout_s=0)


def test_unreachable_server_is_a_clear_error():
    runner = TritonRunner("http://127.0.0.1:9", inference_timeout_s=2)
    with runner:
        with pytest.raises(PyTritonClientModelUnavailableError, match="cannot reach the server"):
            runner.get_model_repository_index()
        assert "get_model_config" in dir(runner)  # dir() does not fail without a server


def test_management_arguments_checked_before_any_io():
    with TritonRunner("http://127.0.0.1:9") as runner:
        with pytest.raises(PyTritonClientValueError, match="model_version '2' was given without a model_name"):
            runner.get_inference_statistics(model_version="2")
        with pytest.raises(PyTritonClientValueError, match="model_name must be a non-empty string"):
            runner.is_model_ready("")
        with pytest.raises(PyTritonClientValueError, match="unload_dependents must be True or False"):
            runner.unload_model("m", unload_dependents="yes")
    with pytest.raises(PyTritonClientClosedError, match="is closed"):
        runner.get_model_config("m")

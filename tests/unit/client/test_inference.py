"""Input checks, batch axis, request building and result parsing (no server)."""

import json
import re

import numpy as np
import pytest
import tritonclient.grpc
import tritonclient.http
from tritonclient.grpc import service_pb2
from tritonclient.utils import serialize_byte_tensor

from pytriton_like.client.exceptions import PyTritonClientModelDoesntSupportBatchingError, PyTritonClientValueError
from pytriton_like.client.inference import (
    bind_inputs,
    build_request,
    parse_result,
    verify_headers,
    verify_inputs_args,
    verify_parameters,
)
from pytriton_like.client.url import Protocol
from pytriton_like.model_config.triton_model_config import TensorSpec

from .conftest import make_config

X = np.arange(3, dtype=np.float32)


# --- inputs given positionally or by name ---------------------------------------------------


def test_inputs_required():
    with pytest.raises(PyTritonClientValueError, match="no inputs"):
        verify_inputs_args((), {})


def test_positional_and_named_inputs_not_mixed():
    with pytest.raises(PyTritonClientValueError, match="both positionally"):
        verify_inputs_args((X,), {"b": X})


@pytest.mark.parametrize("value", [[1.0, 2.0], 3.0, "text", None])
def test_inputs_must_be_arrays(value):
    with pytest.raises(PyTritonClientValueError, match="must be a numpy array"):
        verify_inputs_args((value,), {})
    with pytest.raises(PyTritonClientValueError, match="'x' must be a numpy array"):
        verify_inputs_args((), {"x": value})


def test_positional_inputs_take_config_names_in_order(two_inputs):
    text = np.array([b"t"])
    assert list(bind_inputs(two_inputs, (X, text), {})) == ["a", "text"]
    assert list(bind_inputs(two_inputs, (X,), {})) == ["a"]


def test_too_many_positional_inputs(two_inputs):
    with pytest.raises(PyTritonClientValueError, match="takes 2 inputs"):
        bind_inputs(two_inputs, (X, X, X), {})


def test_unknown_input_name(two_inputs):
    with pytest.raises(PyTritonClientValueError, match="no input.*'b'.*its inputs are 'a', 'text'"):
        bind_inputs(two_inputs, (), {"a": X, "b": X})


def test_required_input_missing(two_inputs):
    with pytest.raises(PyTritonClientValueError, match="requires input.*'a'"):
        bind_inputs(two_inputs, (), {"text": np.array([b"t"])})


def test_missing_inputs_named_in_config_order_and_optional_ones_may_be_left_out():
    config = make_config(inputs=(TensorSpec("c", (-1,), np.float32), TensorSpec("o", (-1,), np.float32, optional=True),
                                 TensorSpec("a", (-1,), np.float32)))
    with pytest.raises(PyTritonClientValueError, match="requires input\\(s\\) 'c', 'a'; got 'o'"):
        bind_inputs(config, (), {"o": X})
    assert list(bind_inputs(config, (), {"a": X, "c": X})) == ["a", "c"]


# --- parameters and headers -------------------------------------------------------------------


def test_parameters_accepted():
    parameters = {"s": "v", "i": 3, "b": True, "f": 0.5}
    assert verify_parameters(parameters) == parameters
    assert verify_parameters(None) is None


@pytest.mark.parametrize(
    "parameters, match",
    [
        ([("a", 1)], "must be a dict"),
        ({1: "a"}, "keys must be strings"),
        ({"a": [1]}, r"parameters\['a'\] must be one of"),
        ({"a": None}, "must be one of"),
        ({"priority": 1}, "reserved"),
        ({"timeout": 1}, "reserved"),
        ({"triton_anything": 1}, "reserved"),
    ],
)
def test_bad_parameters(parameters, match):
    with pytest.raises(PyTritonClientValueError, match=match):
        verify_parameters(parameters)


def test_headers_lower_cased_and_stringified():
    assert verify_headers({"X-Trace": "abc", "Count": 3, "Flag": True}) == {
        "x-trace": "abc",
        "count": "3",
        "flag": "True",
    }
    assert verify_headers(None) is None


@pytest.mark.parametrize("headers", [{"a": 0.5}, {"a": b"x"}, {2: "x"}, "a=b"])
def test_bad_headers(headers):
    with pytest.raises(PyTritonClientValueError):
        verify_headers(headers)


# --- request building and the batch axis ----------------------------------------------------


def _build(config, inputs, *, protocol=Protocol.HTTP, sample=True, **kwargs):
    defaults = dict(model_name=config.model_name, model_version=None, request_id="7", parameters=None, headers=None)
    return build_request(protocol, config, inputs, sample=sample, **{**defaults, **kwargs})


@pytest.mark.parametrize("protocol, lib", [(Protocol.HTTP, tritonclient.http), (Protocol.GRPC, tritonclient.grpc)])
def test_sample_on_batching_model_gets_batch_axis(protocol, lib, two_inputs):
    request = _build(two_inputs, {"a": X, "text": np.array([b"hello"])}, protocol=protocol)
    assert [type(item) for item in request.inputs] == [lib.InferInput, lib.InferInput]
    assert [(i.name(), list(i.shape()), i.datatype()) for i in request.inputs] == [
        ("a", [1, 3], "FP32"),
        ("text", [1, 1], "BYTES"),
    ]
    assert [type(o) for o in request.outputs] == [lib.InferRequestedOutput] * 2
    assert [o.name() for o in request.outputs] == ["y", "z"]
    assert request.strip_batch_axis


def test_batch_keeps_shapes(two_inputs):
    request = _build(two_inputs, {"a": np.zeros((4, 3), np.float32)}, sample=False)
    assert [list(i.shape()) for i in request.inputs] == [[4, 3]]
    assert not request.strip_batch_axis


def test_sample_on_non_batching_model_is_sent_as_is():
    config = make_config(max_batch_size=0)
    request = _build(config, {"x": X})
    assert [list(i.shape()) for i in request.inputs] == [[3]]
    assert not request.strip_batch_axis


def test_batch_on_non_batching_model_refused():
    with pytest.raises(PyTritonClientModelDoesntSupportBatchingError, match="'Model' does not support batching"):
        _build(make_config(max_batch_size=0), {"x": X}, sample=False)


def test_batch_larger_than_max_batch_size_refused_before_sending():
    config = make_config(max_batch_size=4)
    request = _build(config, {"x": np.zeros((4, 3), np.float32)}, sample=False)
    assert [list(i.shape()) for i in request.inputs] == [[4, 3]]
    message = (
        "model 'Model' takes batches of at most 4 (its max_batch_size), got 5 rows in input 'x';"
        " send the batch in parts of 4 rows or fewer"
    )
    with pytest.raises(PyTritonClientValueError, match=f"^{re.escape(message)}$") as raised:
        _build(config, {"x": np.zeros((5, 3), np.float32)}, sample=False)
    assert raised.value.model_name == "Model"
    _build(config, {"x": np.zeros(5, np.float32)})  # a sample of 5 values is one row


@pytest.mark.parametrize(
    "array",
    [
        np.array(["héllo", "w"]),  # unicode: encoded to UTF-8
        np.array([b"a", b"bc"]),
        np.array([b"a", "b"], dtype=object),
    ],
)
def test_text_arrays_go_as_bytes(array):
    config = make_config(inputs=(TensorSpec("s", (-1,), np.bytes_),))
    (infer_input,) = _build(config, {"s": array}).inputs
    assert infer_input.datatype() == "BYTES"


@pytest.mark.parametrize(
    "dtype, triton", [(np.bool_, "BOOL"), (np.int8, "INT8"), (np.uint64, "UINT64"), (np.float16, "FP16")]
)
def test_numeric_dtypes(dtype, triton):
    config = make_config(inputs=(TensorSpec("x", (-1,), dtype),))
    (infer_input,) = _build(config, {"x": np.zeros(2, dtype)}).inputs
    assert infer_input.datatype() == triton


def test_dtype_must_match_the_model():
    with pytest.raises(PyTritonClientValueError, match="input 'x' of the model is FP32, got an array of float64"):
        _build(make_config(), {"x": np.zeros(2)})


def test_unsupported_dtype():
    config = make_config(inputs=(TensorSpec("x", (-1,), "BF16"),))  # a type the config keeps by name
    with pytest.raises(PyTritonClientValueError, match="complex128, which Triton cannot carry"):
        _build(config, {"x": np.zeros(2, np.complex128)})


def test_unknown_config_dtype_left_to_the_server():
    config = make_config(inputs=(TensorSpec("x", (-1,), "BF16"),))
    (infer_input,) = _build(config, {"x": np.zeros(2, np.float32)}).inputs
    assert infer_input.datatype() == "FP32"


def test_infer_kwargs():
    request = _build(make_config(), {"x": X}, model_version="3", parameters={"p": 1}, headers={"h": "v"})
    kwargs = request.infer_kwargs()
    assert kwargs["model_name"] == "Model"
    assert kwargs["model_version"] == "3"
    assert kwargs["request_id"] == "7"
    assert kwargs["parameters"] == {"p": 1}
    assert kwargs["headers"] == {"h": "v"}
    assert _build(make_config(), {"x": X}).infer_kwargs()["model_version"] == ""


# --- result parsing, with tritonclient's own result classes ---------------------------------


def http_result(outputs, binary=b""):
    header = json.dumps({"model_name": "Model", "outputs": outputs}).encode()
    if not binary:
        return tritonclient.http.InferResult.from_response_body(header)
    return tritonclient.http.InferResult.from_response_body(header + binary, header_length=len(header))


def grpc_result(outputs):
    response = service_pb2.ModelInferResponse(model_name="Model")
    for name, array in outputs.items():
        response.outputs.add(name=name, datatype="FP32", shape=list(array.shape))
        response.raw_output_contents.append(array.astype(np.float32).tobytes())
    return tritonclient.grpc.InferResult(response)


def test_parse_http_result_strips_batch_axis_of_samples():
    result = http_result([{"name": "y", "datatype": "FP32", "shape": [1, 2], "data": [1.5, 2.5]}])
    sample = _build(make_config(), {"x": X})
    np.testing.assert_array_equal(parse_result(result, sample)["y"], np.array([1.5, 2.5], np.float32))
    batch = _build(make_config(), {"x": X[None]}, sample=False)
    assert parse_result(result, batch)["y"].shape == (1, 2)


def test_parse_http_bytes_output():
    # binary form, as requested by InferRequestedOutput: 4-byte little-endian length, then the bytes
    binary = serialize_byte_tensor(np.array([b"ab", b"c"], dtype=object)).item()
    output = {"name": "z", "datatype": "BYTES", "shape": [2], "parameters": {"binary_data_size": len(binary)}}
    result = http_result([output], binary)
    request = _build(make_config(max_batch_size=0), {"x": X})
    assert parse_result(result, request)["z"].tolist() == [b"ab", b"c"]


def test_parse_grpc_result():
    result = grpc_result({"y": np.array([[1.0, 2.0]]), "w": np.array([[3.0]])})
    parsed = parse_result(result, _build(make_config(), {"x": X}, protocol=Protocol.GRPC))
    assert set(parsed) == {"y", "w"}
    np.testing.assert_array_equal(parsed["y"], [1.0, 2.0])
    np.testing.assert_array_equal(parsed["w"], [3.0])


def test_parse_empty_result():
    assert parse_result(http_result([]), _build(make_config(), {"x": X})) == {}

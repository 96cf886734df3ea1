"""What the callable returns, checked against the declared outputs (strict) or cast (not strict)."""

import re

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config

IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]

CALLABLES = {
    "Float64": lambda requests: [{"y": request["x"].astype(np.float64)} for request in requests],
    "Undeclared": lambda requests: [{"y": request["x"], "z": request["x"]} for request in requests],
    "ExtraRow": lambda requests: [{"y": np.concatenate([request["x"], request["x"][:1]])} for request in requests],
    "TooFew": lambda requests: [],
    "NotAList": lambda requests: {"y": requests[0]["x"]},
}


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        for name, func in CALLABLES.items():
            triton.bind(model_name=f"Strict{name}", infer_func=func, inputs=IN, outputs=OUT, strict=True,
                        config=ModelConfig(max_batch_size=8))
            triton.bind(model_name=f"Loose{name}", infer_func=func, inputs=IN, outputs=OUT,
                        config=ModelConfig(max_batch_size=8))
        triton.run()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{config.grpc_port}")
        yield client
        client.close()


def call(client, model, outputs=("y",)):
    tensor = grpcclient.InferInput("x", [2, 3], "FP32")
    tensor.set_data_from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    requested = [grpcclient.InferRequestedOutput(name) for name in outputs]
    return client.infer(model, [tensor], outputs=requested)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("StrictFloat64", "output 'y' has dtype float64, expected float32"),
        ("StrictExtraRow", "output 'y' has 3 rows, expected 2 (the request's batch size)"),
        ("StrictTooFew", "returned 0 responses for 1 requests"),
        ("LooseTooFew", "returned 0 responses for 1 requests"),
        ("StrictNotAList", "must return a list with one dict of outputs per request, got dict"),
    ],
)
def test_wrong_outputs_are_errors_that_say_what_was_expected(server, model, expected):
    with pytest.raises(InferenceServerException, match=re.escape(expected)):
        call(server, model)


def test_strict_refuses_an_undeclared_output(server):
    with pytest.raises(InferenceServerException, match="output 'z' is not declared; declared outputs: y"):
        call(server, "StrictUndeclared", outputs=())


def test_without_strict_a_safe_dtype_is_cast(server):
    result = call(server, "LooseFloat64").as_numpy("y")
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, np.arange(6).reshape(2, 3))


def test_requested_outputs_only_are_sent(server):
    result = call(server, "LooseUndeclared", outputs=("y",))
    assert result.as_numpy("y") is not None
    assert result.as_numpy("z") is None

"""The inference callable contract through the real server: decorators, parameters, headers, optionals."""

import asyncio

import numpy as np
import pytest

from pytriton_like.client import ModelClient
from pytriton_like.decorators import (
    ConstantPadder,
    batch,
    fill_optionals,
    first_value,
    group_by_keys,
    group_by_values,
    pad_batch,
    sample,
    triton_context,
)
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of

PROTOCOLS = ["http", "grpc"]
F32 = np.float32


@batch
def add_sub(a, b):
    return {"add": a + b, "sub": a - b}


@sample
def sample_sum(a, b):
    # One request at a time, without the batch axis logic of @batch.
    return {"add": a + b, "sub": a - b}


@group_by_keys
@batch
def keys_seen(a, b=None):
    present = np.full((a.shape[0], 1), 2 if b is not None else 1, dtype=np.int32)
    return {"count": present}


@batch
@group_by_values("scale", pad_fn=ConstantPadder(0))
def scaled(x, scale):
    # Every call sees one value of `scale`: that is what grouping by it guarantees.
    assert len(np.unique(scale)) == 1
    return {"y": x * scale}


@fill_optionals(b=np.array([10.0], dtype=F32))
@batch
def with_default(a, b):
    return {"add": a + b, "sub": a - b}


@batch
@pad_batch
def padded(a, b):
    # pad_batch fills the batch up to max_batch_size before the call.
    return {"add": a + b, "sub": np.full_like(a, a.shape[0])}


@batch
@first_value("scale")
def first(x, scale):
    return {"y": x * scale}


@triton_context
@batch
def context_aware(a, b, triton_context):
    config = triton_context.model_config
    return {"add": a + b, "sub": np.full_like(a, config.max_batch_size)}


async def async_add_sub(requests):
    await asyncio.sleep(0)
    return [{"add": request["a"] + request["b"], "sub": request["a"] - request["b"]} for request in requests]


def with_parameters(requests):
    return [
        {
            "add": (request["a"] + request["b"]) / float(request.parameters["header_divisor"]),
            "sub": (request["a"] - request["b"]) * float(request.parameters["parameter_multiplier"]),
        }
        for request in requests
    ]


AB = [Tensor(name="a", dtype=F32, shape=(-1,)), Tensor(name="b", dtype=F32, shape=(-1,))]
AB_OPTIONAL_B = [Tensor(name="a", dtype=F32, shape=(-1,)), Tensor(name="b", dtype=F32, shape=(-1,), optional=True)]
ADD_SUB = [Tensor(name="add", dtype=F32, shape=(-1,)), Tensor(name="sub", dtype=F32, shape=(-1,))]
X_SCALE = [Tensor(name="x", dtype=F32, shape=(-1,)), Tensor(name="scale", dtype=F32, shape=(1,))]
Y = [Tensor(name="y", dtype=F32, shape=(-1,))]

MODELS = {
    "AddSub": (add_sub, AB, ADD_SUB),
    "Sample": (sample_sum, AB, ADD_SUB),
    "Keys": (keys_seen, AB_OPTIONAL_B, [Tensor(name="count", dtype=np.int32, shape=(1,))]),
    "Scaled": (scaled, X_SCALE, Y),
    "Defaults": (with_default, AB_OPTIONAL_B, ADD_SUB),
    "Padded": (padded, AB, ADD_SUB),
    "First": (first, X_SCALE, Y),
    "Context": (context_aware, AB, ADD_SUB),
    "Async": (async_add_sub, AB, ADD_SUB),
    "Params": (with_parameters, AB, ADD_SUB),
}


@pytest.fixture(scope="module", params=[1, 2], ids=["in-process", "2-worker-processes"])
def server(request):
    # every test of the contract runs twice: callables in this process, and in worker processes
    config = free_config(http_header_forward_pattern="header.*", grpc_header_forward_pattern="header.*")
    with checked_for_leaks(), Triton(config=config) as triton:
        for name, (func, inputs, outputs) in MODELS.items():
            triton.bind(model_name=name, infer_func=func, inputs=inputs, outputs=outputs,
                        config=ModelConfig(max_batch_size=8), workers=request.param)
        triton.run()
        yield config


@pytest.fixture(params=PROTOCOLS)
def connect(request, server):
    clients = []

    def make(model):
        clients.append(ModelClient(url_of(server, request.param), model, init_timeout_s=60))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


A = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=F32)
B = np.array([[0.5, 0.5], [1.0, 1.0]], dtype=F32)


@pytest.mark.parametrize("model", ["AddSub", "Sample", "Async"])
def test_add_sub_shapes_of_callable(connect, model):
    result = connect(model).infer_batch(A, B)
    np.testing.assert_allclose(result["add"], A + B)
    np.testing.assert_allclose(result["sub"], A - B)


def test_sample_with_infer_sample(connect):
    result = connect("Sample").infer_sample(a=A[0], b=B[0])
    np.testing.assert_allclose(result["add"], A[0] + B[0])


def test_group_by_keys_calls_once_per_set_of_inputs(connect):
    client = connect("Keys")
    assert client.infer_batch(a=A).get("count").tolist() == [[1], [1]]
    assert client.infer_batch(a=A, b=B).get("count").tolist() == [[2], [2]]


def test_group_by_values_splits_by_value_and_pads(connect):
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=F32)
    scale = np.array([[2], [3]], dtype=F32)
    result = connect("Scaled").infer_batch(x=x, scale=scale)
    np.testing.assert_allclose(result["y"], x * scale)


def test_fill_optionals_fills_a_missing_optional_input(connect):
    client = connect("Defaults")
    np.testing.assert_allclose(client.infer_batch(a=A)["add"], A + 10)
    np.testing.assert_allclose(client.infer_batch(a=A, b=B)["add"], A + B)


def test_pad_batch_fills_up_to_max_batch_size(connect):
    result = connect("Padded").infer_batch(A, B)
    np.testing.assert_allclose(result["add"], A + B)
    assert result["sub"].tolist() == [[8, 8], [8, 8]]


def test_first_value_hands_one_value(connect):
    x = np.array([[1, 2], [3, 4]], dtype=F32)
    result = connect("First").infer_batch(x=x, scale=np.array([[3], [3]], dtype=F32))
    np.testing.assert_allclose(result["y"], x * 3)


def test_triton_context_gives_the_model_config(connect):
    assert connect("Context").infer_batch(A, B)["sub"].tolist() == [[8, 8], [8, 8]]


def test_parameters_and_headers_reach_the_callable(connect):
    result = connect("Params").infer_batch(
        A, B, parameters={"parameter_multiplier": 2}, headers={"header_divisor": 4}
    )
    np.testing.assert_allclose(result["add"], (A + B) / 4)
    np.testing.assert_allclose(result["sub"], (A - B) * 2)

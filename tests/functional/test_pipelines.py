"""Pipelines on a real server: an ensemble of bound models, and callables that call other models."""

import asyncio

import numpy as np
import pytest

from pytriton_like.client import FuturesModelClient, ModelClient
from pytriton_like.client.exceptions import PyTritonClientInferenceServerError
from pytriton_like.decorators import batch, triton_context
from pytriton_like.exceptions import PyTritonServerError, PyTritonValidationError
from pytriton_like.model_config import EnsembleStep, ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of

# -- an ensemble: text -> its length -> length * 10 -> "long" / "short"


@batch
def preprocess(raw):
    return {"tokens": np.array([[len(text[0])] for text in raw], dtype=np.int64)}


@batch
def score(x):
    return {"y": (x * 10).astype(np.float32)}


@batch
def postprocess(logits):
    return {"label": np.array([[b"long" if value[0] > 30 else b"short"] for value in logits], dtype=object)}


def bytes_tensor(name):
    return Tensor(name=name, dtype=bytes, shape=(1,))


PIPELINE_STEPS = [
    EnsembleStep("Preprocess", input_map={"raw": "TEXT"}, output_map={"tokens": "tokens"}),
    EnsembleStep("Model", input_map={"x": "tokens"}, output_map={"y": "logits"}),
    EnsembleStep("Postprocess", input_map={"logits": "logits"}, output_map={"label": "LABEL"}),
]

# -- business logic: a router that calls Small or Large, and a model that calls itself

ROUTER_TIMEOUT_S = 60  # generous: the router waits behind a flood of requests, never in a cycle
SELF_CALL_TIMEOUT_S = 2


@batch
def small(x):
    return {"y": x + 1}


@batch
def large(x):
    return {"y": x + 1000}


def expected(x):
    return x + np.where(x >= 100, 1000, 1).astype(x.dtype)


@batch
@triton_context
def router(triton_context, x):
    y = np.empty_like(x)
    big = x[:, 0] >= 100
    for rows, model in ((big, "Large"), (~big, "Small")):
        if rows.any():
            y[rows] = triton_context.client(model, inference_timeout_s=ROUTER_TIMEOUT_S).infer_batch(x=x[rows])["y"]
    return {"y": y}


@batch
@triton_context
async def async_router(triton_context, x):
    big = x[:, 0] >= 100
    parts = [(rows, model) for rows, model in ((big, "Large"), (~big, "Small")) if rows.any()]
    calls = [
        triton_context.async_client(model, inference_timeout_s=ROUTER_TIMEOUT_S).infer_batch(x=x[rows])
        for rows, model in parts
    ]
    y = np.empty_like(x)
    for (rows, _), result in zip(parts, await asyncio.gather(*calls)):
        y[rows] = result["y"]
    return {"y": y}


@batch
@triton_context
def countdown(triton_context, depth):
    """Calls itself with depth - 1 until 0: with its one instance busy calling, the call cannot be served."""
    if depth.max() > 0:
        client = triton_context.client("Countdown", inference_timeout_s=SELF_CALL_TIMEOUT_S)
        return client.infer_batch(depth=np.maximum(depth - 1, 0))
    return {"depth": depth}


def float_tensor(name):
    return [Tensor(name=name, dtype=np.float32, shape=(1,))]


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        batching = ModelConfig(max_batch_size=8)
        triton.bind("Preprocess", preprocess, [bytes_tensor("raw")], [Tensor(name="tokens", dtype=np.int64, shape=(1,))],
                    config=batching)
        triton.bind("Model", score, [Tensor(name="x", dtype=np.int64, shape=(1,))], float_tensor("y"), config=batching)
        triton.bind("Postprocess", postprocess, float_tensor("logits"), [bytes_tensor("label")], config=batching)
        triton.bind_ensemble("Pipeline", PIPELINE_STEPS, [bytes_tensor("TEXT")], [bytes_tensor("LABEL")], max_batch_size=8)
        for name, func in (("Small", small), ("Large", large), ("Router", router), ("AsyncRouter", async_router)):
            triton.bind(name, func, float_tensor("x"), float_tensor("y"), config=ModelConfig(max_batch_size=16))
        depth = [Tensor(name="depth", dtype=np.int32, shape=(1,))]
        triton.bind("Countdown", countdown, depth, depth, config=ModelConfig(max_batch_size=4))
        triton.run()
        yield triton, {protocol: url_of(config, protocol) for protocol in ("http", "grpc")}


TEXTS = np.array([[b"hi"], [b"hello"], [b"a much longer text"]], dtype=object)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_client_calls_the_ensemble_as_one_model(server, protocol):
    _, urls = server
    with ModelClient(urls[protocol], "Pipeline") as client:
        assert [spec.name for spec in client.model_config.inputs] == ["TEXT"]
        result = client.infer_batch(TEXT=TEXTS)
        assert result["LABEL"].tolist() == [[b"short"], [b"long"], [b"long"]]
        assert client.infer_sample(TEXT=np.array([b"abc"], dtype=object))["LABEL"].tolist() == [b"short"]


def test_an_ensemble_bound_after_run_is_loaded_and_served(server):
    triton, urls = server
    triton.bind_ensemble(
        "Length",
        [EnsembleStep("Preprocess", input_map={"raw": "TEXT"}, output_map={"tokens": "LENGTH"})],
        inputs=[bytes_tensor("TEXT")],
        outputs=[Tensor(name="LENGTH", dtype=np.int64, shape=(1,))],
        max_batch_size=4,
    )
    with ModelClient(urls["grpc"], "Length") as client:
        assert client.infer_batch(TEXT=TEXTS)["LENGTH"].tolist() == [[2], [5], [18]]


def test_a_bad_ensemble_is_refused_with_a_clear_error(server):
    triton, _ = server
    wrong_dtype = [EnsembleStep("Model", input_map={"x": "TEXT"}, output_map={"y": "Y"})]
    with pytest.raises(PyTritonValidationError) as caught:
        triton.bind_ensemble("Bad", wrong_dtype, [bytes_tensor("TEXT")], float_tensor("Y"), max_batch_size=4)
    assert str(caught.value) == (
        "ensemble 'Bad', step 1 ('Model'): input 'x' reads tensor 'TEXT': an ensemble input is STRING,"
        " but INT64 is expected there"
    )
    # A model the server does not have cannot be checked here: Triton refuses it, and says why.
    unknown = [EnsembleStep("NotServed", input_map={"x": "X"}, output_map={"y": "Y"})]
    with pytest.raises(PyTritonServerError, match="ensemble 'Bad'.*contains models that are not available.*NotServed"):
        triton.bind_ensemble("Bad", unknown, float_tensor("X"), float_tensor("Y"), max_batch_size=4)


@pytest.mark.parametrize("model", ["Router", "AsyncRouter"])
def test_a_router_calls_other_models_under_a_flood_of_requests(server, model):
    """32 requests at once on one Router instance: each batch waits for Small/Large, none for itself."""
    _, urls = server
    xs = [np.array([float(i * 37 % 200)], dtype=np.float32) for i in range(32)]
    with FuturesModelClient(urls["grpc"], model, max_workers=32) as client:
        futures = [client.infer_sample(x=x) for x in xs]
        results = [future.result() for future in futures]
    assert [result["y"].tolist() for result in results] == [expected(x).tolist() for x in xs]


def test_a_model_calling_itself_with_every_instance_busy_fails_clearly_and_the_server_goes_on(server):
    _, urls = server
    with ModelClient(urls["grpc"], "Countdown", inference_timeout_s=30) as client:
        with pytest.raises(PyTritonClientInferenceServerError) as caught:
            client.infer_sample(depth=np.array([1], dtype=np.int32))
        message = str(caught.value)
        assert "model 'Countdown' called model 'Countdown' and got no answer in time" in message
        assert f"did not finish within {SELF_CALL_TIMEOUT_S} s" in message
        assert "in a cycle (Countdown -> Countdown)" in message
        assert client.infer_sample(depth=np.array([0], dtype=np.int32))["depth"].tolist() == [0]
    with ModelClient(urls["http"], "Router") as client:
        assert client.infer_sample(x=np.array([150.0], dtype=np.float32))["y"].tolist() == [1150.0]

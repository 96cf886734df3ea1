"""OpenTelemetry spans around bound callables (tracing.py), seen with the SDK's in-memory exporter."""

import numpy as np
import pytest

from pytriton_like import tracing
from pytriton_like.client import DecoupledModelClient, ModelClient
from pytriton_like.client.exceptions import PyTritonClientInferenceServerError
from pytriton_like.decorators import batch, triton_context
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import RemoteTriton, Triton

from .conftest import free_config, url_of

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
export = pytest.importorskip("opentelemetry.sdk.trace.export")

X = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(-1,))]


@pytest.fixture
def spans():
    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    tracing.set_telemetry_tracer(provider.get_tracer("test"))
    yield exporter
    tracing._reset_telemetry_tracer()
    provider.shutdown()


def double(requests):
    responses = []
    for request in requests:
        with request.traced_span("double-compute"):
            responses.append({"y": request["x"] * 2})
    return responses


def fail(requests):
    raise ValueError("no luck")


def stream(requests):
    for step in range(2):
        yield [{"y": request["x"] + step} for request in requests]


@batch
@triton_context
def call_double(triton_context, x):
    return {"y": triton_context.client("Double").infer_batch(x=x)["y"]}


@batch
@triton_context
async def call_double_async(triton_context, x):
    return {"y": (await triton_context.async_client("Double").infer_batch(x=x))["y"]}


@triton_context
def stream_double(requests, triton_context):
    for step in range(2):
        yield [{"y": triton_context.client("Double").infer_batch(x=request["x"])["y"] + step} for request in requests]


def test_each_request_gets_a_span_with_the_callables_child_spans(spans):
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        with ModelClient(url_of(config, "http"), "Double") as client:
            client.infer_sample(np.array([1.0], np.float32))
            client.infer_sample(np.array([2.0], np.float32))
    finished = spans.get_finished_spans()
    relay = [span for span in finished if span.name == "proxy_inference_callable"]
    children = [span for span in finished if span.name == "double-compute"]
    assert len(relay) == 2 and len(children) == 2
    assert relay[0].attributes["pytriton_like.model_name"] == "Double"
    assert {child.parent.span_id for child in children} == {span.context.span_id for span in relay}


def test_a_failing_callable_marks_its_spans_as_errors(spans):
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Fail", fail, X, Y, config=ModelConfig(max_batch_size=8))
        with ModelClient(url_of(config, "grpc"), "Fail") as client, pytest.raises(PyTritonClientInferenceServerError):
            client.infer_sample(np.array([1.0], np.float32))
    (span,) = [span for span in spans.get_finished_spans() if span.name == "proxy_inference_callable"]
    assert span.status.status_code.name == "ERROR"
    assert span.events[0].name == "exception"


def test_a_streaming_callable_has_one_span_per_request_until_its_last_response(spans):
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Stream", stream, X, Y, config=ModelConfig(max_batch_size=8, decoupled=True))
        with DecoupledModelClient(url_of(config, "grpc"), "Stream") as client:
            answers = [result["y"].tolist() for result in client.infer_sample(np.array([1.0], np.float32))]
    assert answers == [[1.0], [2.0]]
    assert [span.name for span in spans.get_finished_spans()] == ["proxy_inference_callable"]


def test_a_nested_call_continues_the_trace_of_the_request_that_made_it(spans):
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        triton.bind("Call", call_double, X, Y, config=ModelConfig(max_batch_size=8))
        triton.bind("CallAsync", call_double_async, X, Y, config=ModelConfig(max_batch_size=8))
        triton.bind("StreamCall", stream_double, X, Y, config=ModelConfig(max_batch_size=8, decoupled=True))
        for name in ("Call", "CallAsync"):
            with ModelClient(url_of(config, "grpc"), name) as client:
                assert client.infer_sample(np.array([1.0], np.float32))["y"].tolist() == [2.0]
        with DecoupledModelClient(url_of(config, "grpc"), "StreamCall") as client:
            answers = [result["y"].tolist() for result in client.infer_sample(np.array([1.0], np.float32))]
        assert answers == [[2.0], [3.0]]
    relay = [span for span in spans.get_finished_spans() if span.name == "proxy_inference_callable"]
    by_model = {}
    for span in relay:
        by_model.setdefault(span.attributes["pytriton_like.model_name"], []).append(span)
    assert {name: len(found) for name, found in by_model.items()} == {
        "Call": 1, "CallAsync": 1, "StreamCall": 1, "Double": 4
    }
    for caller in ("Call", "CallAsync", "StreamCall"):
        (outer,) = by_model[caller]
        called = [span for span in by_model["Double"] if span.parent and span.parent.span_id == outer.context.span_id]
        assert len(called) == (2 if caller == "StreamCall" else 1), caller
        assert {span.context.trace_id for span in called} == {outer.context.trace_id}


def test_a_nested_call_over_the_network_continues_the_trace_too(spans):
    # RemoteTriton's callables have no relay socket to the server: their calls go over its url
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        with RemoteTriton(url=url_of(config, "grpc")) as remote:
            remote.bind("RemoteCall", call_double, X, Y, config=ModelConfig(max_batch_size=8))
            with ModelClient(url_of(config, "http"), "RemoteCall") as client:
                assert client.infer_sample(np.array([1.0], np.float32))["y"].tolist() == [2.0]
    relay = [span for span in spans.get_finished_spans() if span.name == "proxy_inference_callable"]
    (outer,) = [span for span in relay if span.attributes["pytriton_like.model_name"] == "RemoteCall"]
    (called,) = [span for span in relay if span.attributes["pytriton_like.model_name"] == "Double"]
    assert called.parent.span_id == outer.context.span_id
    assert called.context.trace_id == outer.context.trace_id


def test_a_traceparent_the_nested_call_gives_is_kept(spans):
    tracer = tracing.get_telemetry_tracer()
    with tracer.start_as_current_span("caller") as caller:
        assert tracing.carry_trace({"traceparent": "given"}) == {"traceparent": "given"}
        carried = tracing.carry_trace({"a": 1})
    assert carried["a"] == 1 and format(caller.get_span_context().trace_id, "032x") in carried["traceparent"]
    assert tracing.carry_trace(None) is None  # no current span


def test_without_a_tracer_nothing_is_traced():
    assert tracing.get_telemetry_tracer() is None
    assert tracing.model_tracer(None) is None and tracing.model_tracer(["rate=1"]) is None
    assert tracing.carry_trace({"a": 1}) == {"a": 1}
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        with ModelClient(url_of(config, "http"), "Double") as client:
            assert client.infer_sample(np.array([1.0], np.float32))["y"].tolist() == [2.0]


def test_a_second_tracer_is_refused(spans):
    with pytest.raises(ValueError, match="already set"):
        tracing.set_telemetry_tracer(object())

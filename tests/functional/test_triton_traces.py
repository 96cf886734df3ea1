"""Triton's own trace (``TritonConfig(trace_config=[...])``) of nested calls: each is a child of the
trace of the request its callable was handling, as a BLS request is.

Mode triton writes a file when tritonserver stops, each trace spread over several records there;
mode opentelemetry exports spans over OTLP/HTTP as JSON, here to a collector of the test's own.
"""

import concurrent.futures
import contextvars
import http.server
import json
import threading
import time

import numpy as np
import pytest

from pytriton_like import tracing
from pytriton_like.client import DecoupledModelClient, ModelClient
from pytriton_like.decorators import batch, triton_context
from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import free_config, url_of

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")

X = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
LATE_CALLS = []  # what the nested calls made from the callables' threads got (they run in this process)
LATE_THREADS = []  # those threads
SLOW_STARTED = threading.Event()  # SlowDouble runs
CALL_LATER = threading.Event()  # call_after_answering's thread may call


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


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


@triton_context
def calls_per_request(requests, triton_context):
    """Calls Double x times for each request (x: 1, 2 or 3), each call made for its request."""
    responses = []
    for request in requests:
        with request.traced_span("calls"):
            for _ in range(int(request["x"][0, 0])):
                y = triton_context.client("Double").infer_batch(x=request["x"])["y"]
        responses.append({"y": y})
    return responses


def slow_double(requests):
    SLOW_STARTED.set()
    time.sleep(0.5)
    return double(requests)


def call_in_a_thread(triton_context, model: str, x, start: threading.Event) -> None:
    """Calls ``model`` from a thread in the callable's context (as a callable that does not wait
    for its call would), once ``start`` is set; what it got goes to LATE_CALLS."""
    client = triton_context.client(model)

    def late_call():
        start.wait(30)
        LATE_CALLS.append(client.infer_batch(x=x + 1)["y"].tolist())

    thread = threading.Thread(target=contextvars.copy_context().run, args=(late_call,))
    LATE_THREADS.append(thread)
    thread.start()


@batch
@triton_context
def answer_while_calling(triton_context, x):
    """Answers once its nested call of SlowDouble runs in Triton's core, without waiting for it."""
    start = threading.Event()
    call_in_a_thread(triton_context, "SlowDouble", x, start)
    start.set()
    assert SLOW_STARTED.wait(30)
    return {"y": x}


@batch
@triton_context
def call_after_answering(triton_context, x):
    """Answers at once; its nested call of Double starts when the test says (CALL_LATER)."""
    call_in_a_thread(triton_context, "Double", x, CALL_LATER)
    return {"y": x}


def traces(path) -> dict:
    """Trace id -> {"model": ..., "parent": ... (0: none)}, merged from the file's records."""
    with open(path) as trace_file:
        records = json.load(trace_file)
    found = {}
    for record in records:
        trace = found.setdefault(int(record["id"]), {"model": None, "parent": 0})
        if "model_name" in record:
            trace["model"] = record["model_name"]
            trace["parent"] = int(record.get("parent_id", 0))
    return found


def trace_config(path, rate: int = 1):
    return free_config(trace_config=["mode=triton", f"triton,file={path}", f"rate={rate}", "level=TIMESTAMPS"])


def test_a_nested_call_is_traced_as_a_child_of_the_request_it_is_made_for(tmp_path):
    path = tmp_path / "trace.json"
    config = trace_config(path)
    batcher = ModelConfig(max_batch_size=8, batcher=DynamicBatcher(max_queue_delay_microseconds=100_000))
    with Triton(config=config) as triton:
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        triton.bind("Call", call_double, X, Y, config=ModelConfig(max_batch_size=8))
        triton.bind("CallAsync", call_double_async, X, Y, config=ModelConfig(max_batch_size=8))
        triton.bind("CallInWorkers", call_double, X, Y, config=ModelConfig(max_batch_size=8), workers=1)
        triton.bind("StreamCall", stream_double, X, Y, config=ModelConfig(max_batch_size=8, decoupled=True))
        triton.bind("CallsPerRequest", calls_per_request, X, Y, config=batcher)
        for name in ("Call", "CallAsync", "CallInWorkers"):
            with ModelClient(url_of(config, "grpc"), name) as client:
                assert client.infer_sample(np.array([1.0], np.float32))["y"].tolist() == [2.0]
        with DecoupledModelClient(url_of(config, "grpc"), "StreamCall") as client:
            assert [result["y"].tolist() for result in client.infer_sample(np.array([1.0], np.float32))] == [[2.0], [3.0]]

        def calls(x):  # three requests at once: Triton may batch them together
            with ModelClient(url_of(config, "http"), "CallsPerRequest") as client:
                return client.infer_sample(np.array([x], np.float32))["y"].tolist()

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            assert list(pool.map(calls, [1.0, 2.0, 3.0])) == [[2.0], [4.0], [6.0]]
    found = traces(path)
    children = {}
    for trace_id, trace in found.items():
        if trace["model"] == "Double":
            assert trace["parent"] in found, trace  # every nested call is some request's child
            children[trace["parent"]] = children.get(trace["parent"], 0) + 1
        else:
            assert trace["parent"] == 0, trace  # the callers' requests came from clients
    calls = {}
    for trace_id, trace in found.items():
        if trace["model"] != "Double":
            calls.setdefault(trace["model"], []).append(children.get(trace_id, 0))
    assert {model: sorted(counts) for model, counts in calls.items()} == {
        "Call": [1], "CallAsync": [1], "CallInWorkers": [1], "StreamCall": [2], "CallsPerRequest": [1, 2, 3]
    }


def test_only_the_requests_triton_traces_have_their_nested_calls_traced(tmp_path):
    path = tmp_path / "trace.json"
    config = trace_config(path, rate=2)  # every second request from a client
    with Triton(config=config) as triton:
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        triton.bind("Call", call_double, X, Y, config=ModelConfig(max_batch_size=8))
        with ModelClient(url_of(config, "http"), "Call") as client:
            for x in range(6):
                assert client.infer_sample(np.array([x], np.float32))["y"].tolist() == [2.0 * x]
    found = traces(path)
    callers = {trace_id for trace_id, trace in found.items() if trace["model"] == "Call"}
    called = [trace["parent"] for trace in found.values() if trace["model"] == "Double"]
    assert len(callers) == 3 and sorted(called) == sorted(callers)


def test_a_request_answered_while_its_nested_call_runs_keeps_its_trace_until_the_call_is_done(tmp_path):
    path = tmp_path / "trace.json"
    config = trace_config(path)
    LATE_CALLS.clear()
    SLOW_STARTED.clear()
    with Triton(config=config) as triton:
        triton.bind("SlowDouble", slow_double, X, Y, config=ModelConfig(max_batch_size=8))
        triton.bind("Answering", answer_while_calling, X, Y, config=ModelConfig(max_batch_size=8))
        with ModelClient(url_of(config, "http"), "Answering") as client:
            assert client.infer_sample(np.array([1.0], np.float32))["y"].tolist() == [1.0]
        LATE_THREADS.pop().join(timeout=30)
        assert LATE_CALLS == [[[4.0]]]
    found = traces(path)
    (answering,) = [trace_id for trace_id, trace in found.items() if trace["model"] == "Answering"]
    assert sorted((trace["model"], trace["parent"]) for trace in found.values()) == [
        ("Answering", 0), ("SlowDouble", answering)
    ]


def test_a_call_made_after_its_request_was_given_back_runs_untraced(tmp_path):
    path = tmp_path / "trace.json"
    config = trace_config(path)
    LATE_CALLS.clear()
    CALL_LATER.clear()
    with Triton(config=config) as triton:
        triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
        triton.bind("Late", call_after_answering, X, Y, config=ModelConfig(max_batch_size=8))
        with ModelClient(url_of(config, "http"), "Late") as client:
            assert client.infer_sample(np.array([1.0], np.float32))["y"].tolist() == [1.0]
        time.sleep(0.2)  # the backend gives the request back right after its response
        CALL_LATER.set()
        LATE_THREADS.pop().join(timeout=30)
        assert LATE_CALLS == [[[4.0]]]
    # the call names the trace of a request given back: it runs, untraced (were the request still
    # in flight, as on a very busy machine, its trace would be the request's child)
    found = traces(path)
    (late,) = [trace_id for trace_id, trace in found.items() if trace["model"] == "Late"]
    assert sorted((trace["model"], trace["parent"]) for trace in found.values()) in (
        [("Late", 0)], [("Double", late), ("Late", 0)]
    )


class Collector(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP collector of JSON exports on a free port: the spans it got, as (trace id, span
    id, parent span id, name)."""

    def __init__(self):
        self.spans = []
        super().__init__(("127.0.0.1", 0), CollectorHandler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(10)


class CollectorHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        export = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        for resource in export.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    self.server.spans.append((span["traceId"], span["spanId"], span.get("parentSpanId", ""), span["name"]))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_in_opentelemetry_mode_a_nested_calls_span_is_a_child_of_its_callers(tmp_path):
    collector = Collector()
    # our own spans stay in this process (a tracer of ours): only Triton's reach the collector
    tracing.set_telemetry_tracer(sdk_trace.TracerProvider().get_tracer("test"))
    try:
        config = free_config(trace_config=["mode=opentelemetry", f"opentelemetry,url={collector.url}", "rate=1",
                                           "level=TIMESTAMPS", "opentelemetry,bsp_max_export_batch_size=1"])
        with Triton(config=config) as triton:
            triton.bind("Double", double, X, Y, config=ModelConfig(max_batch_size=8))
            triton.bind("Call", call_double, X, Y, config=ModelConfig(max_batch_size=8))
            with ModelClient(url_of(config, "http"), "Call") as client:
                assert client.infer_sample(np.array([1.0], np.float32))["y"].tolist() == [2.0]
    finally:
        tracing._reset_telemetry_tracer()
        collector.stop()
    spans = {name: (trace_id, span_id, parent) for trace_id, span_id, parent, name in collector.spans}
    assert spans["Double"][0] == spans["Call"][0]  # one trace
    assert spans["Double"][2] == spans["Call"][1]  # the nested call's span is a child of the caller's request's

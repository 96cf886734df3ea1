"""The proxy model (as Triton's stub would run it) against the real worker, over real Unix
sockets and /dev/shm, with a stand-in for the stub's ``triton_python_backend_utils``."""

import contextlib
import gc
import importlib
import itertools
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import types
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytriton_like.exceptions import PyTritonUnrecoverableError
from pytriton_like.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton_like.models.repository import write_version_entry
from pytriton_like.proxy.protocol import Kind, decode_message, encode_message
from pytriton_like.proxy.shm import SEGMENT_PREFIX, SHM_DIR
from pytriton_like.proxy.transport import NUDGE, recv_frames, send_frames
from pytriton_like.server.config import DEFAULT_RELAY_SPIN_US
from pytriton_like.worker.calling import BatchCall
from pytriton_like.worker.handling import DEFAULT_SHM_THRESHOLD, BatchHandler
from pytriton_like.worker.instance import InstanceWorker
from pytriton_like.worker.outputs import OutputChecker

pytestmark = pytest.mark.timeout(60)

MODEL = "Relay"
BIG = DEFAULT_SHM_THRESHOLD * 2  # bytes: well past the threshold
_tags = itertools.count()


# -- a stand-in for the stub's triton_python_backend_utils ---------------------------------------


class FakeTensor:
    def __init__(self, name, array):
        self._name = name
        self._array = array

    def name(self):
        return self._name

    def as_numpy(self):
        return self._array


class FakeTritonError:
    INTERNAL, UNAVAILABLE = "INTERNAL", "UNAVAILABLE"  # two of pb_utils.TritonError's codes

    def __init__(self, message, code=INTERNAL):  # INTERNAL: the stub's default, HTTP 500
        self._message = message
        self._code = code

    def message(self):
        return self._message

    def code(self):
        return self._code


class FakeInferenceResponse:
    def __init__(self, output_tensors, error=None):
        # The stub copies the outputs into its own shared memory once execute() returns; so do we.
        self.outputs = {tensor.name(): np.array(tensor.as_numpy(), copy=True) for tensor in output_tensors}
        self.error = error

    def has_error(self):
        return self.error is not None


class FakeInferenceRequest:
    def __init__(self, inputs, parameters=None, requested=(), correlation_id=0, flags=0):
        self._inputs = [FakeTensor(name, np.asarray(array)) for name, array in inputs.items()]
        self._parameters = json.dumps(parameters or {})
        self._requested = list(requested)
        self._correlation_id = correlation_id
        self._flags = flags

    def correlation_id(self):
        return self._correlation_id

    def flags(self):
        return self._flags

    def inputs(self):
        return self._inputs

    def parameters(self):
        return self._parameters

    def requested_output_names(self):
        return self._requested


class FakeMetric:
    def __init__(self, family, labels):
        self.family = family
        self.labels = labels
        self.value = 0

    def increment(self, value):
        self.value += value


class FakeMetricFamily:
    COUNTER = "counter"
    # every family made, by name, with its metrics: what the metrics endpoint would show
    made = {}

    def __init__(self, name, description, kind):
        self.name = name
        self.kind = kind
        self.metrics = []
        FakeMetricFamily.made.setdefault(name, []).append(self)

    def Metric(self, labels):  # noqa: N802 - the stub's spelling
        metric = FakeMetric(self, labels)
        self.metrics.append(metric)
        return metric


def fake_pb_utils():
    module = types.ModuleType("triton_python_backend_utils")
    module.MetricFamily = FakeMetricFamily
    module.Tensor = FakeTensor
    module.TritonError = FakeTritonError
    module.InferenceResponse = FakeInferenceResponse
    module.InferenceRequest = FakeInferenceRequest
    return module


@pytest.fixture
def proxy_module(monkeypatch):
    """pytriton_like.proxy.model, importable only with the stub's module installed."""
    fake = fake_pb_utils()
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake)
    module = importlib.import_module("pytriton_like.proxy.model")
    for relay_module in (
        "pytriton_like.proxy.batch",
        "pytriton_like.proxy.stream",
        "pytriton_like.proxy.model",
        "pytriton_like.proxy.sequence",
    ):
        monkeypatch.setattr(sys.modules[relay_module], "pb_utils", fake)
    return module


# -- the relay under test ------------------------------------------------------------------------


def our_segments() -> set:
    stem = f"{SEGMENT_PREFIX}{os.getpid()}-"
    return {name for name in os.listdir(SHM_DIR) if name.startswith(stem)}


def spec(name, dtype=np.float32):
    return TensorSpec(name=name, shape=(-1,), dtype=dtype)


class Relay:
    """Workers for ``calls`` bound on Unix sockets, the repository entry they announce, and proxies.

    Both ends spin as they do by default in a server (``spin_us``).
    """

    def __init__(self, base, calls, shm_threshold=DEFAULT_SHM_THRESHOLD, sequence=False,
                 spin_us=DEFAULT_RELAY_SPIN_US):
        self.tag = f"it{os.getpid() % 1000}x{next(_tags)}"
        self.repository = base / "repository"
        # ipc paths must stay under ~100 characters: pytest's tmp_path can be longer.
        self.sockets = tempfile.mkdtemp(prefix="ptl-", dir="/tmp")
        self.workers = []
        self.closed = False
        self.unrecoverable = []
        self.proxies = []
        self.threads = []
        try:
            self._start(calls, shm_threshold, sequence, spin_us)
        except BaseException:
            self.close()
            raise

    def _start(self, calls, shm_threshold, sequence, spin_us):
        addresses = [f"unix://{self.sockets}/{self.tag}-{index}" for index in range(len(calls))]
        self.addresses = addresses
        for index, (call, address) in enumerate(zip(calls, addresses)):
            # No declared outputs and not strict: outputs pass as returned (checks are unit-tested).
            handler = BatchHandler(
                MODEL, OutputChecker((), batching=True, strict=False), self.unrecoverable.append, shm_threshold
            )
            self.workers.append(
                InstanceWorker(
                    handler=handler,
                    call=BatchCall(call),
                    address=address,
                    owner_pid=os.getpid(),
                    arena_tag=f"{self.tag}-{index}-out",
                    spin_us=spin_us,
                )
            )
            self.threads += [t for t in threading.enumerate() if t.name == f"pytriton_like-{self.tag}-{index}-out"]
        config = TritonModelConfig(model_name=MODEL, inputs=(spec("x"),), outputs=(spec("y"),))
        relay = {
            "owner_pid": os.getpid(),
            "tag": self.tag,
            "sockets": addresses,
            "handshake_timeout_s": 10,
            "sequence": sequence,
            "spin_us": spin_us,
        }
        self.model_dir = write_version_entry(self.repository, config, relay).parent
        assert len(self.threads) == len(calls)

    def args(self, index=0) -> dict:
        return {
            "model_repository": str(self.model_dir),
            "model_version": "1",
            "model_instance_name": f"{MODEL}_0_{index}",
            "model_name": MODEL,
        }

    def proxy(self, module, index=0):
        proxy = module.TritonPythonModel()
        proxy.initialize(self.args(index))
        self.proxies.append(proxy)
        return proxy

    def segment(self, index, direction, generation=1) -> str:
        return f"{SEGMENT_PREFIX}{os.getpid()}-{self.tag}-{index}-{direction}-{generation}"

    def close(self):
        if self.closed:
            return
        self.closed = True
        for proxy in self.proxies:
            proxy.finalize()
        self.proxies = []
        for worker in self.workers:
            worker.close()
        for thread in self.threads:
            thread.join(10)
            assert not thread.is_alive()
        shutil.rmtree(self.sockets, ignore_errors=True)


@pytest.fixture
def relay(tmp_path):
    """A factory of relays; every one is closed and leaves no shared memory behind."""
    assert our_segments() == set()
    made = []

    def make(*calls, **options):
        made.append(Relay(tmp_path / str(len(made)), calls, **options))
        return made[-1]

    yield make
    for one in made:
        one.close()
    assert our_segments() == set()


def execute(proxy, *requests):
    responses = proxy.execute(list(requests))
    assert len(responses) == len(requests)
    return responses


def outputs(response) -> dict:
    assert not response.has_error(), response.error.message()
    return response.outputs


def doubled(requests):
    return [{"y": request["x"] * 2} for request in requests]


# -- tensors both ways ---------------------------------------------------------------------------


def test_small_tensors_both_ways_inline(relay, proxy_module):
    proxy = relay(doubled).proxy(proxy_module)
    inputs = [np.arange(n, dtype=np.float32) for n in (1, 5, 0)]
    responses = execute(proxy, *[FakeInferenceRequest({"x": x}) for x in inputs])
    for x, response in zip(inputs, responses):
        got = outputs(response)["y"]
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, x * 2)
    assert our_segments() == set()  # nothing went through shared memory


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.uint64, np.float16, np.float64])
def test_dtypes_and_shapes_kept(relay, proxy_module, dtype):
    proxy = relay(lambda requests: [{"y": request["x"]} for request in requests]).proxy(proxy_module)
    x = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
    got = outputs(execute(proxy, FakeInferenceRequest({"x": x}))[0])["y"]
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(got, x)


def test_large_tensors_both_ways_through_shm(relay, proxy_module):
    seen = []

    def call(requests):
        seen.extend(request["x"].nbytes for request in requests)
        return [{"y": request["x"] + 1, "small": np.array([request["x"].size])} for request in requests]

    one = relay(call)
    proxy = one.proxy(proxy_module)
    x = np.random.default_rng(0).standard_normal(BIG // 8)  # float64: BIG bytes
    x2 = np.arange(BIG // 4 + 3, dtype=np.int32)
    responses = execute(proxy, FakeInferenceRequest({"x": x}), FakeInferenceRequest({"x": x2}))
    np.testing.assert_array_equal(outputs(responses[0])["y"], x + 1)
    np.testing.assert_array_equal(outputs(responses[1])["y"], x2 + 1)
    assert outputs(responses[1])["small"].tolist() == [x2.size]
    assert seen == [x.nbytes, x2.nbytes]
    assert our_segments() == {one.segment(0, "in"), one.segment(0, "out")}


def test_mixed_small_and_large_in_one_batch(relay, proxy_module):
    proxy = relay(doubled).proxy(proxy_module)
    small, big = np.ones(3, np.float32), np.arange(BIG // 4, dtype=np.float32)
    responses = execute(proxy, FakeInferenceRequest({"x": small}), FakeInferenceRequest({"x": big}))
    np.testing.assert_array_equal(outputs(responses[0])["y"], small * 2)
    np.testing.assert_array_equal(outputs(responses[1])["y"], big * 2)


def test_large_output_from_small_input(relay, proxy_module):
    one = relay(lambda requests: [{"y": np.full(BIG, 7, np.uint8)} for _ in requests])
    proxy = one.proxy(proxy_module)
    got = outputs(execute(proxy, FakeInferenceRequest({"x": np.zeros(1, np.float32)}))[0])["y"]
    assert got.shape == (BIG,) and (got == 7).all()
    assert our_segments() == {one.segment(0, "out")}


def test_arenas_grow_across_batches(relay, proxy_module):
    one = relay(doubled)
    proxy = one.proxy(proxy_module)
    for size in (BIG, 3 << 20, BIG):  # the second is past the first 1 MiB segments
        x = np.arange(size // 4, dtype=np.float32)
        np.testing.assert_array_equal(outputs(execute(proxy, FakeInferenceRequest({"x": x}))[0])["y"], x * 2)
    assert our_segments() == {one.segment(0, "in", 2), one.segment(0, "out", 2)}


def test_many_batches_in_a_row(relay, proxy_module):
    proxy = relay(doubled).proxy(proxy_module)
    for step in range(50):
        x = np.full(step % 7 + (BIG if step % 10 == 0 else 0), step, np.int64)
        np.testing.assert_array_equal(outputs(execute(proxy, FakeInferenceRequest({"x": x}))[0])["y"], x * 2)


def test_two_instances_reach_their_own_workers(relay, proxy_module):
    one = relay(lambda rs: [{"y": r["x"] + 10} for r in rs], lambda rs: [{"y": r["x"] + 20} for r in rs])
    first, second = one.proxy(proxy_module, 0), one.proxy(proxy_module, 1)
    x = np.zeros(2, np.int32)
    assert outputs(execute(second, FakeInferenceRequest({"x": x}))[0])["y"].tolist() == [20, 20]
    assert outputs(execute(first, FakeInferenceRequest({"x": x}))[0])["y"].tolist() == [10, 10]


async def decrement(requests):
    return [{"y": request["x"] - 1} for request in requests]


def collect_leaked_event_loops() -> list:
    """Collect garbage; return the 'unclosed event loop' warnings that raised (instead of raising later)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    return [str(warning.message) for warning in caught if "unclosed event loop" in str(warning.message)]


def test_async_callable(relay, proxy_module):
    one = relay(decrement)
    proxy = one.proxy(proxy_module)
    assert outputs(execute(proxy, FakeInferenceRequest({"x": np.array([5])}))[0])["y"].tolist() == [4]
    one.close()
    assert collect_leaked_event_loops() == []


def test_async_callable_event_loop_is_closed_with_the_worker(relay, proxy_module):
    one = relay(decrement)
    outputs(execute(one.proxy(proxy_module), FakeInferenceRequest({"x": np.array([5])}))[0])
    one.close()
    assert collect_leaked_event_loops() == []


# -- bytes ---------------------------------------------------------------------------------------


def test_bytes_tensors_both_ways(relay, proxy_module):
    received = []

    def call(requests):
        received.extend(list(request["s"]) for request in requests)
        return [{"y": np.array([element[::-1] for element in request["s"]], dtype=object)} for request in requests]

    proxy = relay(call).proxy(proxy_module)
    words = np.array([b"abc\x00", b"", b"\x00\x00", "h\u00e9".encode()], dtype=object)
    fixed = np.array([b"xy", b"z"], dtype=np.bytes_)
    responses = execute(proxy, FakeInferenceRequest({"s": words}), FakeInferenceRequest({"s": fixed}))
    assert received == [list(words), [b"xy", b"z"]]
    assert list(outputs(responses[0])["y"]) == [b"\x00cba", b"", b"\x00\x00", "h\u00e9".encode()[::-1]]
    assert list(outputs(responses[1])["y"]) == [b"yx", b"z"]


def test_large_bytes_tensors_through_shm(relay, proxy_module):
    one = relay(lambda requests: [{"y": request["s"]} for request in requests])
    proxy = one.proxy(proxy_module)
    words = np.array([bytes([i % 256]) * (i % 97) + b"\x00" for i in range(3000)], dtype=object)
    assert sum(map(len, words)) > DEFAULT_SHM_THRESHOLD
    got = outputs(execute(proxy, FakeInferenceRequest({"s": words}))[0])["y"]
    assert got.dtype == object and list(got) == list(words)
    assert our_segments() == {one.segment(0, "in"), one.segment(0, "out")}


def test_str_outputs_arrive_as_utf8_bytes(relay, proxy_module):
    proxy = relay(lambda requests: [{"y": np.array(["caf\u00e9", ""])} for _ in requests]).proxy(proxy_module)
    got = outputs(execute(proxy, FakeInferenceRequest({"x": np.zeros(1)}))[0])["y"]
    assert list(got) == ["caf\u00e9".encode(), b""]


# -- request metadata ----------------------------------------------------------------------------


def test_parameters_reach_the_request(relay, proxy_module):
    seen = []

    def call(requests):
        seen.extend(request.parameters for request in requests)
        return [{"y": request["x"]} for request in requests]

    proxy = relay(call).proxy(proxy_module)
    params = {"temperature": 0.5, "flag": True, "name": "caf\u00e9", "n": 3}
    execute(proxy, FakeInferenceRequest({"x": np.ones(1)}, parameters=params), FakeInferenceRequest({"x": np.ones(1)}))
    assert seen == [params, {}]


def test_requested_output_names_filter_outputs(relay, proxy_module):
    seen = []

    def call(requests):
        seen.extend(request.requested_output_names for request in requests)
        return [{"a": request["x"], "b": request["x"] + 1, "c": request["x"] + 2} for request in requests]

    proxy = relay(call).proxy(proxy_module)
    x = np.zeros(2, np.int8)
    responses = execute(
        proxy,
        FakeInferenceRequest({"x": x}, requested=["b"]),
        FakeInferenceRequest({"x": x}),
        FakeInferenceRequest({"x": x}, requested=["c", "a"]),
    )
    assert seen == [["b"], None, ["c", "a"]]
    assert set(outputs(responses[0])) == {"b"}
    assert set(outputs(responses[1])) == {"a", "b", "c"}
    assert set(outputs(responses[2])) == {"a", "c"}
    assert outputs(responses[0])["b"].tolist() == [1, 1]


def test_multiple_inputs_per_request(relay, proxy_module):
    proxy = relay(lambda rs: [{"y": r["a"] + r["b"]} for r in rs]).proxy(proxy_module)
    response = execute(proxy, FakeInferenceRequest({"a": np.array([1, 2]), "b": np.array([10, 20])}))[0]
    assert outputs(response)["y"].tolist() == [11, 22]


# -- errors --------------------------------------------------------------------------------------


def test_exception_in_the_callable_fails_every_request_of_the_batch(relay, proxy_module):
    def call(requests):
        raise ValueError("the model refuses this input")

    proxy = relay(call).proxy(proxy_module)
    responses = execute(proxy, *[FakeInferenceRequest({"x": np.ones(2)}) for _ in range(3)])
    for response in responses:
        assert response.has_error()
        assert response.outputs == {}
        assert "ValueError" in response.error.message()
        assert "the model refuses this input" in response.error.message()


def test_relay_keeps_working_after_an_error(relay, proxy_module):
    def call(requests):
        if requests[0]["x"][0] < 0:
            raise RuntimeError("negative")
        return doubled(requests)

    proxy = relay(call).proxy(proxy_module)
    assert execute(proxy, FakeInferenceRequest({"x": np.array([-1.0])}))[0].has_error()
    assert outputs(execute(proxy, FakeInferenceRequest({"x": np.array([1.0])}))[0])["y"].tolist() == [2.0]


def test_unrecoverable_error_reported(relay, proxy_module):
    def call(requests):
        raise PyTritonUnrecoverableError("GPU is gone")

    one = relay(call)
    proxy = one.proxy(proxy_module)
    response = execute(proxy, FakeInferenceRequest({"x": np.ones(1)}))[0]
    assert "PyTritonUnrecoverableError: GPU is gone" in response.error.message()
    assert [str(error) for error in one.unrecoverable] == ["GPU is gone"]


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (lambda requests: requests[:1] and [{"y": np.ones(1)}], "returned 1 responses for 2 requests"),
        (lambda requests: [{"y": np.ones(1)}] * 3, "returned 3 responses for 2 requests"),
        (lambda requests: {"y": np.ones(1)}, "must return a list with one dict of outputs per request, got dict"),
        (lambda requests: [np.ones(1), np.ones(1)], "each response must be a dict"),
    ],
    ids=["too-few", "too-many", "not-a-list", "not-dicts"],
)
def test_wrong_responses_become_a_clear_error(relay, proxy_module, returned, message):
    proxy = relay(returned).proxy(proxy_module)
    responses = execute(proxy, FakeInferenceRequest({"x": np.ones(1)}), FakeInferenceRequest({"x": np.ones(1)}))
    for response in responses:
        assert response.has_error()
        assert message in response.error.message()


def test_a_bad_response_fails_only_its_own_request(relay, proxy_module):
    proxy = relay(lambda requests: [{"y": requests[0]["x"]}, "not a dict"]).proxy(proxy_module)
    good, bad = execute(proxy, FakeInferenceRequest({"x": np.arange(3)}), FakeInferenceRequest({"x": np.ones(1)}))
    assert outputs(good)["y"].tolist() == [0, 1, 2]
    assert bad.has_error() and bad.outputs == {}
    assert "each response must be a dict of output name to array, got str" in bad.error.message()


class RawWorker:
    """A stand-in worker on a Unix socket: accepts one stub and runs ``serve(peer)`` on a thread."""

    def __init__(self, name, serve):
        self.tag = name
        self.sockets = tempfile.mkdtemp(prefix="ptl-", dir="/tmp")
        self.address = f"unix://{self.sockets}/{name}-0"
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(f"{self.sockets}/{name}-0")
        self.listener.listen()
        self.thread = threading.Thread(target=self._run, args=(serve,), daemon=True)
        self.thread.start()

    def _run(self, serve):
        peer, _ = self.listener.accept()
        with peer:
            serve(peer)

    def close(self):
        self.listener.close()
        self.thread.join(10)
        shutil.rmtree(self.sockets, ignore_errors=True)


def initialize_with(proxy, worker: RawWorker, tmp_path) -> None:
    """Initialize ``proxy`` as Triton would, relaying to ``worker``."""
    config = TritonModelConfig(model_name=MODEL, inputs=(spec("x"),), outputs=(spec("y"),))
    settings = {"owner_pid": os.getpid(), "tag": worker.tag, "sockets": [worker.address], "handshake_timeout_s": 10}
    model_dir = write_version_entry(tmp_path, config, settings).parent
    proxy.initialize({"model_repository": str(model_dir), "model_version": "1",
                      "model_instance_name": f"{MODEL}_0_0", "model_name": MODEL})


def test_proxy_checks_the_number_of_results_itself(proxy_module, tmp_path):
    """A worker that answers out of step: the proxy, not only the worker, guards the count."""

    def serve(peer):
        assert decode_message(recv_frames(peer)).kind is Kind.HELLO
        send_frames(peer, encode_message(Kind.WELCOME, extra={"shm_threshold": BIG}))
        batch = decode_message(recv_frames(peer))
        send_frames(peer, encode_message(Kind.RESULT, batch.batch_id, [({}, {"y": np.ones(1)})]))
        with contextlib.suppress(ConnectionError):
            recv_frames(peer)  # until the proxy closes

    worker = RawWorker("raw", serve)
    proxy = proxy_module.TritonPythonModel()
    try:
        initialize_with(proxy, worker, tmp_path)
        responses = execute(proxy, FakeInferenceRequest({"x": np.ones(1)}), FakeInferenceRequest({"x": np.ones(1)}))
        for response in responses:
            assert "worker answered 1 responses for 2 requests" in response.error.message()
    finally:
        proxy.finalize()
        worker.close()
    assert our_segments() == set()


@pytest.mark.parametrize(
    "scheme, error",
    [
        ("ipc://", r"no answer from the worker within 1 s"),  # ZeroMQ connects lazily: the handshake times out
        ("unix://", r"cannot reach the worker at unix://"),  # a Unix socket fails at once
    ],
)
def test_no_worker_is_a_clear_error(proxy_module, tmp_path, scheme, error):
    sockets = tempfile.mkdtemp(prefix="ptl-", dir="/tmp")
    config = TritonModelConfig(model_name=MODEL, inputs=(spec("x"),), outputs=(spec("y"),))
    settings = {"owner_pid": os.getpid(), "tag": "none", "sockets": [f"{scheme}{sockets}/nobody"],
                "handshake_timeout_s": 1}
    model_dir = write_version_entry(tmp_path, config, settings).parent
    proxy = proxy_module.TritonPythonModel()
    try:
        with pytest.raises(sys.modules["pytriton_like.proxy.connection"].RelayError, match=error):
            proxy.initialize({"model_repository": str(model_dir), "model_version": "1",
                              "model_instance_name": f"{MODEL}_0_0", "model_name": MODEL})
    finally:
        with contextlib.suppress(AttributeError):
            proxy.finalize()
        shutil.rmtree(sockets, ignore_errors=True)
    assert our_segments() == set()


def test_a_worker_gone_mid_batch_fails_the_batch_at_once(proxy_module, tmp_path):
    """The stub does not wait for its liveness check: a closed connection is a dead worker."""

    def serve(peer):
        assert decode_message(recv_frames(peer)).kind is Kind.HELLO
        send_frames(peer, encode_message(Kind.WELCOME, extra={"shm_threshold": BIG}))
        recv_frames(peer)  # the batch, never answered: the connection closes

    worker = RawWorker("gone", serve)
    proxy = proxy_module.TritonPythonModel()
    try:
        initialize_with(proxy, worker, tmp_path)
        (response,) = execute(proxy, FakeInferenceRequest({"x": np.ones(1)}))
        assert "lost the worker at unix://" in response.error.message()
        assert "the connection closed" in response.error.message()
        assert response.error.code() == FakeTritonError.UNAVAILABLE  # HTTP 503, gRPC UNAVAILABLE: retry elsewhere
    finally:
        proxy.finalize()
        worker.close()
    assert our_segments() == set()


# -- nudges ---------------------------------------------------------------------------------------


def test_a_nudge_without_its_batch_leaves_the_worker_serving_and_quick_to_close(relay, proxy_module):
    one = relay(doubled)
    proxy = one.proxy(proxy_module)
    # the stub nudges its worker, then fails to encode the batch: no batch follows the nudge
    (response,) = execute(proxy, FakeInferenceRequest({"x": np.zeros(2, dtype=[("a", "<i4")])}))
    assert "cannot send an array of dtype" in response.error.message()
    time.sleep(0.01)  # past the worker's spin: it waits in poll again
    np.testing.assert_array_equal(outputs(execute(proxy, FakeInferenceRequest({"x": np.ones(2)}))[0])["y"], [2, 2])
    execute(proxy, FakeInferenceRequest({"x": np.zeros(1, dtype=[("a", "<i4")])}))
    started = time.monotonic()
    one.workers[0].close()  # while its stub is still connected
    assert time.monotonic() - started < 2


def test_a_batch_later_than_the_workers_spin_is_still_served(relay):
    one = relay(doubled, spin_us=100)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stub:
        stub.connect(one.addresses[0][len("unix://"):])
        send_frames(stub, encode_message(Kind.HELLO, extra={"instance": f"{MODEL}_0_0", "pid": os.getpid()}))
        assert decode_message(recv_frames(stub)).kind is Kind.WELCOME
        for batch_id in (1, 2):
            stub.sendall(NUDGE)
            stub.sendall(NUDGE)  # several nudges in a row are one
            time.sleep(0.05)  # 500 times the worker's spin
            send_frames(stub, encode_message(Kind.BATCH, batch_id, [({"p": "{}", "q": []}, {"x": np.ones(3)})]))
            result = decode_message(recv_frames(stub))
            assert (result.kind, result.batch_id, result.final) == (Kind.RESULT, batch_id, True)
            np.testing.assert_array_equal(result.tensors[0]["y"], [2, 2, 2])


# -- cleanup -------------------------------------------------------------------------------------


def test_finalize_and_context_term_leave_no_segment(relay, proxy_module):
    one = relay(doubled)
    proxy = one.proxy(proxy_module)
    x = np.arange(BIG // 4, dtype=np.float32)
    outputs(execute(proxy, FakeInferenceRequest({"x": x}))[0])
    assert our_segments() == {one.segment(0, "in"), one.segment(0, "out")}
    one.close()
    assert our_segments() == set()
    for thread in one.threads:
        assert not thread.is_alive()


# -- the copy Triton actually loads --------------------------------------------------------------


def test_the_copied_proxy_package_relays(relay, proxy_module, monkeypatch):
    """The repository entry's own copy of the proxy (imported by the name the stub uses) works alone."""
    one = relay(doubled)
    version_dir = one.model_dir / "1"
    assert (version_dir / "model.py").is_file() and (version_dir / "relay.json").is_file()
    monkeypatch.syspath_prepend(str(version_dir))
    before = set(sys.modules)
    try:
        copied = importlib.import_module("_pytriton_like_proxy.model")
        assert copied.__file__.startswith(str(version_dir))
        fake = sys.modules["pytriton_like.proxy.batch"].pb_utils
        for relay_module in ("_pytriton_like_proxy.batch", "_pytriton_like_proxy.stream"):
            sys.modules[relay_module].pb_utils = fake
        proxy = copied.TritonPythonModel()
        proxy.initialize(one.args())
        one.proxies.append(proxy)
        x = np.arange(BIG // 4, dtype=np.float32)
        np.testing.assert_array_equal(outputs(execute(proxy, FakeInferenceRequest({"x": x}))[0])["y"], x * 2)
        assert not any(name.startswith("pytriton_like") for name in set(sys.modules) - before)
    finally:
        for name in set(sys.modules) - before:
            if name.startswith("_pytriton_like_proxy"):
                del sys.modules[name]


# -- fuzzing the live relay ----------------------------------------------------------------------

GARBAGE = st.lists(
    st.one_of(
        st.binary(max_size=64),
        st.builds(lambda kind, items: json.dumps({"v": 1, "k": kind, "id": 1, "r": items}).encode(),
                  st.integers(-2, 6), st.lists(st.dictionaries(st.text(max_size=2), st.integers(-3, 3)), max_size=2)),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(garbage=GARBAGE)
def test_worker_survives_malformed_frames_and_keeps_serving(relay_for_fuzz, garbage):
    one, proxy, intruder = relay_for_fuzz
    send_frames(intruder, garbage)
    x = np.arange(3, dtype=np.float32)
    assert outputs(execute(proxy, FakeInferenceRequest({"x": x}))[0])["y"].tolist() == [0, 2, 4]


@pytest.fixture
def relay_for_fuzz(relay, proxy_module):
    """A relay with a proxy, and a second connection to the worker's socket that sends garbage."""
    one = relay(doubled)
    proxy = one.proxy(proxy_module)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as intruder:
        intruder.connect(f"{one.sockets}/{one.tag}-0")
        yield one, proxy, intruder


@settings(max_examples=100, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(garbage=GARBAGE)
def test_proxy_turns_a_garbled_answer_into_error_responses(garbled_worker, garbage):
    proxy, answers = garbled_worker
    answers.append(garbage)
    responses = execute(proxy, FakeInferenceRequest({"x": np.ones(2)}))
    assert len(responses) == 1 and responses[0].has_error()


@pytest.fixture
def garbled_worker(proxy_module, tmp_path):
    """A proxy whose 'worker' greets it properly, then answers each batch with the next garbage."""
    answers = []

    def serve(peer):
        with contextlib.suppress(ConnectionError):
            while True:
                message = decode_message(recv_frames(peer))
                if message.kind is Kind.HELLO:
                    send_frames(peer, encode_message(Kind.WELCOME, extra={"shm_threshold": BIG}))
                else:
                    send_frames(peer, answers.pop(0))

    worker = RawWorker("garbled", serve)
    proxy = proxy_module.TritonPythonModel()
    initialize_with(proxy, worker, tmp_path)
    yield proxy, answers
    proxy.finalize()
    worker.close()


# -- the relay's metrics -------------------------------------------------------------------------


def relay_metric_values(model=MODEL) -> dict:
    """(family name, reason label) -> the sum over the model's metrics, as the endpoint would show."""
    values = {}
    for name, families in FakeMetricFamily.made.items():
        for family in families:
            for metric in family.metrics:
                if metric.labels["model"] == model:
                    key = (name, metric.labels.get("reason"))
                    values[key] = values.get(key, 0) + metric.value
    return values


def test_metrics_count_requests_failures_and_the_callables_time(relay, proxy_module, monkeypatch):
    monkeypatch.setattr(FakeMetricFamily, "made", {})

    def call(requests):
        if float(requests[0]["x"][0]) < 0:
            raise ValueError("negative")
        time.sleep(0.002)
        return [{"y": request["x"]} if float(request["x"][0]) else "not a dict" for request in requests]

    one = relay(call)
    proxy = one.proxy(proxy_module)
    for value in (1.0, 2.0, 0.0):  # the last returns a bad output: a callable failure
        execute(proxy, FakeInferenceRequest({"x": np.array([value], np.float32)}))
    execute(proxy, *[FakeInferenceRequest({"x": np.array([-1.0], np.float32)})] * 2)  # raises: 2 failures
    one.close()  # finalize publishes what is pending
    values = relay_metric_values()
    assert values[("pytriton_like_requests", None)] == 5
    assert values[("pytriton_like_batches", None)] == 4
    assert values[("pytriton_like_request_failures", "callable")] == 3
    assert values[("pytriton_like_request_failures", "relay")] == 0
    assert values[("pytriton_like_callable_duration_us", None)] >= 3 * 2000  # three calls slept 2 ms
    assert values[("pytriton_like_relay_duration_us", None)] > 0
    labels = {tuple(sorted(m.labels.items())) for fs in FakeMetricFamily.made.values() for f in fs for m in f.metrics}
    assert (("model", MODEL), ("version", "1")) in labels


# -- sequence models -----------------------------------------------------------------------------


def test_sequence_relay_carries_ids_and_flags_and_answers_null_requests_itself(relay, proxy_module):
    seen = []

    def running(requests):
        seen.extend((r.sequence_id, r.sequence_start, r.sequence_end, r["x"].tolist()) for r in requests)
        return [{"y": r["x"] + 1} for r in requests]

    proxy = relay(running, sequence=True).proxy(proxy_module)
    x = np.array([1.0], dtype=np.float32)
    null = FakeInferenceRequest({"x": np.array([np.nan], dtype=np.float32)})  # what the direct strategy pads with
    requests = [
        null,
        FakeInferenceRequest({"x": x}, correlation_id=7, flags=1),
        null,
        FakeInferenceRequest({"x": x * 2}, correlation_id="s", flags=2),
    ]
    responses = execute(proxy, *requests)
    assert seen == [(7, True, False, [1.0]), ("s", False, True, [2.0])]
    assert [outputs(response).get("y", np.array([])).tolist() for response in responses] == [[], [2.0], [], [3.0]]
    # a batch of real requests only takes the plain path
    execute(proxy, FakeInferenceRequest({"x": x}, correlation_id=8, flags=3))
    assert seen[-1] == (8, True, True, [1.0])


def test_plain_relay_ignores_correlation_ids(relay, proxy_module):
    seen = []

    def plain(requests):
        seen.extend(r.sequence_id for r in requests)
        return [{"y": r["x"]} for r in requests]

    proxy = relay(plain).proxy(proxy_module)
    execute(proxy, FakeInferenceRequest({"x": np.ones(1, np.float32)}, correlation_id=7, flags=1))
    assert seen == [None]

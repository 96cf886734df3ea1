"""Nested calls on a real server: callables calling models of their own server through the relay.

Each caller model (``Call``, ``AsyncCall``, and ``CallInWorkers`` in worker processes) reads what to
call from its request's parameters, makes the nested call with the request's input, and answers
the called model's first output, or the error it got as text, so that a test sees both as a
client would.
"""

import asyncio
import contextlib
import os
import pathlib
import signal
import stat
import threading
import time
import warnings

import numpy as np
import psutil
import pytest

from pytriton_like.client import DecoupledModelClient, ModelClient
from pytriton_like.client.exceptions import PyTritonClientError
from pytriton_like.decorators import batch, triton_context
from pytriton_like.model_config import EnsembleStep, ModelConfig, SequenceBatcher, Tensor
from pytriton_like.relay.calls import CallChannel, CallRefused
from pytriton_like.relay.transport import UNIX_SCHEME
from pytriton_like.triton import Triton, TritonSecurityConfig

from .conftest import checked_for_leaks, free_config, scrape, url_of, value
from .handwritten import needs_numpy1, write_model, write_streaming_model

FLOATS = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
CALL_OUTPUTS = [Tensor(name="y", dtype=np.float32, shape=(-1,)), Tensor(name="error", dtype=bytes, shape=(1,))]
SLOW_S = 1.0

SLOW_RUNS = []  # the tags of the requests Slow ran (it runs in this process)
TICKER_STARTS = []  # when each of Ticker's streams started (it runs in this process)
TICKER_ENDS = []  # when each of Ticker's streams ended, and after how many pieces
TICKS, TICK_S = 200, 0.02
NESTED_ERRORS = []  # (when, error text) of the nested calls that failed in Call (in this process)
HELD_RUNS = []  # the tags of the requests Held ran (it runs in this process)
HELD_RELEASE = threading.Event()  # what Held's streams wait for
HELD_STREAMS = 64  # streams in flight an instance of a decoupled model takes (native/instance.c)
FLOOD_PIECES = 100  # of 64 KiB each: far more than a socket holds
FLOOD_SENT = []  # per stream of Flood, the pieces it sent so far (it runs in this process)
FLOOD_ENDED = []  # the streams of Flood that ended
FLOOD_RELEASE = threading.Event()  # what SlowReader waits for before it reads the rest of its stream


def inner(requests):
    """y = 2x (+ the "add" parameter)."""
    return [{"y": request["x"] * np.float32(2) + np.float32(request.parameters.get("add", 0))} for request in requests]


@batch
def plus_one(x):
    return {"y": x + 1}


def failing(requests):
    raise ValueError("Failing always fails")


def counter(requests):
    """A stream of "n" responses (3 by default) per request: x, x + 1, ..."""
    steps = int(requests[0].parameters.get("n", 3))
    for step in range(steps):
        yield [{"y": request["x"] + np.float32(step)} for request in requests]


def ticker(requests):
    """A long stream: TICKS pieces, TICK_S apart, the first after the "delay" parameter (0 s by
    default); records when it ended (its generator closed)."""
    sent = 0
    TICKER_STARTS.append(time.monotonic())
    try:
        time.sleep(float(requests[0].parameters.get("delay", 0)))
        for sent in range(1, TICKS + 1):
            yield [{"y": request["x"] + np.float32(sent)} for request in requests]
            time.sleep(TICK_S)
    finally:
        TICKER_ENDS.append((time.monotonic(), sent))


def held(requests):
    """A stream of one response, sent once HELD_RELEASE is set."""
    HELD_RUNS.extend(request.parameters.get("tag", "") for request in requests)
    HELD_RELEASE.wait(30)
    yield [{"y": request["x"]} for request in requests]


def flood(requests):
    """A stream of FLOOD_PIECES responses (the "pieces" parameter) of 16384 floats (64 KiB; the
    "floats" parameter), piece p all p, as fast as they go."""
    FLOOD_SENT.append(0)
    stream = len(FLOOD_SENT) - 1
    parameters = requests[0].parameters
    try:
        for piece in range(int(parameters.get("pieces", FLOOD_PIECES))):
            yield [{"y": np.full((1, int(parameters.get("floats", 16384))), piece, np.float32)} for _ in requests]
            FLOOD_SENT[stream] = piece + 1
    finally:
        FLOOD_ENDED.append(stream)


@triton_context
def slow_reader(requests, triton_context):
    """Reads the first piece of Flood's stream, waits for FLOOD_RELEASE, then reads the rest: how many
    pieces came, in order (the error that ended the stream early in NESTED_ERRORS)."""
    pieces = iter(triton_context.client("Flood").infer_batch(requests[0]["x"], parameters=requests[0].parameters))
    count = int(next(pieces)["y"][0, 0] == 0)
    FLOOD_RELEASE.wait(60)
    try:
        for index, piece in enumerate(pieces, start=1):
            count += int(piece["y"][0, 0] == index)
    except PyTritonClientError as exc:
        NESTED_ERRORS.append((time.monotonic(), f"{type(exc).__name__}: {exc}"))
    return [{"y": np.full((1, 1), count, np.float32)} for _ in requests]


def twins(requests):
    """Two large outputs: the second does not fit the arena the first was placed in."""
    return [{"y": request["x"] * np.float32(2), "z": request["x"] * np.float32(3)} for request in requests]


@triton_context
def call_twins(requests, triton_context):
    client = triton_context.client("Twins")
    return [client.infer_batch(x=request["x"]) for request in requests]


def slow(requests):
    for request in requests:
        SLOW_RUNS.append(request.parameters.get("tag", ""))
    time.sleep(SLOW_S)
    return [{"y": request["x"]} for request in requests]


class RunningSum:
    """A stateful model: per sequence, the sum of its inputs so far."""

    def __init__(self):
        self.sums = {}

    def __call__(self, requests):
        answers = []
        for request in requests:
            if request.sequence_start:
                self.sums[request.sequence_id] = 0
            self.sums[request.sequence_id] = total = self.sums[request.sequence_id] + request["x"]
            if request.sequence_end:
                del self.sums[request.sequence_id]
            answers.append({"y": total})
        return answers


def _call_one(triton_context, request):
    """The nested call a request asks for: its target's first output."""
    parameters = request.parameters
    client = triton_context.client(parameters["target"], inference_timeout_s=parameters.get("wait_s"))
    forwarded = {key[4:]: value for key, value in parameters.items() if key.startswith("fwd_")}
    x = request["x"]
    mode = parameters.get("mode", "batch")
    if mode == "sample":
        return np.stack([first(client.infer_sample(row, parameters=forwarded)) for row in x])
    if mode == "stream":
        return np.concatenate([first(response) for response in client.infer_batch(x, parameters=forwarded)], axis=1)
    if mode == "leave":  # the stream's first two responses, then the loop is left
        pieces = []
        for response in client.infer_batch(x, parameters=forwarded):
            pieces.append(first(response))
            if len(pieces) == 2:
                break
        return np.concatenate(pieces, axis=1)
    if mode == "sequence":  # three calls of one sequence: the last running sum
        ends = [dict(sequence_start=step == 0, sequence_end=step == 2) for step in range(3)]
        return [first(client.infer_batch(x, sequence_id=parameters["sid"], **end)) for end in ends][-1]
    if mode == "drop":  # a stream made and dropped unstarted, once the called model runs: its call is cancelled
        responses = client.infer_batch(x, parameters=forwarded)
        _wait(lambda: TICKER_STARTS, 5)
        del responses
        return x
    if mode == "fork":  # a child forked now holds the process's connections while the call runs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12's, of a process with threads
            child = os.fork()
        if child == 0:
            time.sleep(SLOW_S + 1.5)
            os._exit(0)
        try:
            return first(client.infer_batch(x, parameters=forwarded))
        finally:
            os.waitpid(child, 0)
    if mode == "keep":  # the first call's outputs are kept while the second one runs
        kept = first(client.infer_batch(x, parameters=forwarded))
        second = first(client.infer_batch(x + 1, parameters=forwarded))
        return np.concatenate([kept, second], axis=1)
    return first(client.infer_batch(x, parameters=forwarded))


def first(outputs):
    return next(iter(outputs.values()))


def _answer(rows, y=None, error=None):
    text = b"" if error is None else f"{type(error).__name__}: {error}".encode()
    return {"y": np.zeros((rows, 0), np.float32) if y is None else y.astype(np.float32),
            "error": np.array([[text]] * rows, dtype=object)}


@triton_context
def call(requests, triton_context):
    answers = []
    for request in requests:
        try:
            answers.append(_answer(len(request["x"]), _call_one(triton_context, request)))
        except PyTritonClientError as exc:
            NESTED_ERRORS.append((time.monotonic(), f"{type(exc).__name__}: {exc}"))
            answers.append(_answer(len(request["x"]), error=exc))
    return answers


@triton_context
async def async_call(requests, triton_context):
    async def one(request):
        parameters = request.parameters
        client = triton_context.async_client(parameters["target"], inference_timeout_s=parameters.get("wait_s"))
        x = request["x"]
        try:
            if parameters.get("mode") == "stream":
                responses = await client.infer_batch(x)
                return _answer(len(x), np.concatenate([first(r) async for r in responses], axis=1))
            if parameters.get("mode") == "fan":  # four calls at once
                parts = await asyncio.gather(*(client.infer_batch(x + i) for i in range(4)))
                return _answer(len(x), np.concatenate([first(part) for part in parts], axis=1))
            return _answer(len(x), first(await client.infer_batch(x)))
        except PyTritonClientError as exc:
            return _answer(len(x), error=exc)

    return list(await asyncio.gather(*(one(request) for request in requests)))


@triton_context
async def async_call_alone(requests, triton_context):
    """``async_call`` for a server of its own: a context is attached per function (the last bound's)."""
    return await async_call.__wrapped__(requests, triton_context=triton_context)


def bind_models(triton):
    batching = ModelConfig(max_batch_size=16)
    triton.bind("Inner", inner, FLOATS, Y, config=batching)
    triton.bind("PlusOne", plus_one, FLOATS, Y, config=batching)
    triton.bind("Failing", failing, FLOATS, Y, config=batching)
    triton.bind("Counter", counter, FLOATS, Y, config=ModelConfig(max_batch_size=16, decoupled=True))
    triton.bind("Ticker", ticker, FLOATS, Y, config=ModelConfig(max_batch_size=16, decoupled=True))
    triton.bind("Slow", slow, FLOATS, Y, config=ModelConfig(max_batch_size=1))
    triton.bind("Held", held, FLOATS, Y, config=ModelConfig(max_batch_size=1, decoupled=True))
    triton.bind("Flood", flood, FLOATS, Y, config=ModelConfig(max_batch_size=1, decoupled=True))
    triton.bind("SlowReader", slow_reader, FLOATS, Y, config=ModelConfig(max_batch_size=1))
    triton.bind("Sum", RunningSum(), FLOATS, Y,
                config=ModelConfig(max_batch_size=4, sequence_batcher=SequenceBatcher(max_sequence_idle_microseconds=60_000_000)))
    triton.bind_ensemble(
        "Pipeline",
        [EnsembleStep("Inner", input_map={"x": "X"}, output_map={"y": "doubled"}),
         EnsembleStep("PlusOne", input_map={"x": "doubled"}, output_map={"y": "Y"})],
        [Tensor(name="X", dtype=np.float32, shape=(-1,))], [Tensor(name="Y", dtype=np.float32, shape=(-1,))],
        max_batch_size=16,
    )
    triton.bind("Call", call, FLOATS, CALL_OUTPUTS, config=batching)
    triton.bind("AsyncCall", async_call, FLOATS, CALL_OUTPUTS, config=batching)


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        bind_models(triton)
        triton.bind("CallInWorkers", call, FLOATS, CALL_OUTPUTS, config=ModelConfig(max_batch_size=16), workers=2)
        triton.run()
        yield triton, config


def ask(config, caller, x, protocol="http", **parameters):
    """The caller's (y, error text) for x, the nested call described by ``parameters``."""
    with ModelClient(url_of(config, protocol), caller, inference_timeout_s=60) as client:
        result = client.infer_batch(x=x, parameters=parameters)
    return result["y"], result["error"][0, 0].decode()


X = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("caller", ["Call", "AsyncCall", "CallInWorkers"])
def test_a_nested_call_answers_as_the_model_and_goes_through_the_relay(server, caller):
    _, config = server
    y, error = ask(config, caller, X, target="Inner")
    assert error == "" and np.array_equal(y, X * 2)
    # no process of this test run holds a connection to the server's gRPC port: not over the network
    processes = [psutil.Process(), *psutil.Process().children(recursive=True)]
    to_grpc = [c for p in processes for c in p.net_connections("tcp") if c.raddr and c.raddr.port == config.grpc_port]
    assert to_grpc == []


@pytest.mark.parametrize("caller", ["Call", "CallInWorkers"])
def test_samples_and_parameters_are_carried(server, caller):
    _, config = server
    y, error = ask(config, caller, X, target="Inner", mode="sample", fwd_add=5)
    assert error == "" and np.array_equal(y, X * 2 + 5)


@pytest.mark.parametrize("caller", ["Call", "AsyncCall"])
def test_an_ensemble_is_called_as_one_model(server, caller):
    _, config = server
    y, error = ask(config, caller, X, target="Pipeline")
    assert error == "" and np.array_equal(y, X * 2 + 1)


@pytest.mark.parametrize("caller", ["Call", "CallInWorkers"])
def test_a_sequence_keeps_its_state_across_nested_calls(server, caller):
    _, config = server
    y, error = ask(config, caller, X[:1], target="Sum", mode="sequence", sid=f"nested-{caller}")
    assert error == "" and np.array_equal(y, X[:1] * 3)


@needs_numpy1
def test_models_of_the_users_repository_are_called_and_streamed(tmp_path):
    """Python-backend models: one answering, one decoupled, whose stream left early is cancelled in
    Triton's core, so that it stops and sends its end, and tritonserver lets go of the call."""
    repository, sent_log = tmp_path / "models", tmp_path / "sent"
    config = free_config(model_repository=repository)
    write_model(repository, "Tripled", 3.0)
    write_streaming_model(repository, "Pieces", sent_log)
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind("Call", call, FLOATS, CALL_OUTPUTS, config=ModelConfig(max_batch_size=16))
        triton.run()
        y, error = ask(config, "Call", X[:2, :1], target="Tripled")
        assert error == "" and np.array_equal(y, X[:2, :1] * 3)
        y, error = ask(config, "Call", X[:2], target="Pieces", mode="stream", fwd_n=4)
        assert error == "" and np.array_equal(y, np.concatenate([X[:2] + i for i in range(4)], axis=1))
        process = psutil.Process(triton._server.pid)  # noqa: SLF001 - the process to look into
        descriptors = process.num_fds()
        y, error = ask(config, "Call", X[:2], target="Pieces", mode="leave", fwd_n=200)
        assert error == "" and np.array_equal(y, np.concatenate([X[:2], X[:2] + 1], axis=1))
        assert _wait(lambda: sent_log.exists() and len(sent_log.read_text().split()) == 2, 4)
        assert sent_log.read_text().split()[0] == "4" and int(sent_log.read_text().split()[1]) < 20
        assert _wait(lambda: process.num_fds() <= descriptors, 5), (process.num_fds(), descriptors)


def test_a_decoupled_model_streams_its_responses(server):
    _, config = server
    y, error = ask(config, "Call", X, target="Counter", mode="stream", fwd_n=4)
    assert error == "" and np.array_equal(y, np.concatenate([X + i for i in range(4)], axis=1))
    y, error = ask(config, "AsyncCall", X, target="Counter", mode="stream")
    assert error == "" and np.array_equal(y, np.concatenate([X + i for i in range(3)], axis=1))
    y, error = ask(config, "CallInWorkers", X, target="Counter", mode="stream", fwd_n=2)
    assert error == "" and np.array_equal(y, np.concatenate([X + i for i in range(2)], axis=1))


def test_a_stream_left_early_stops_the_called_model(server):
    _, config = server
    TICKER_ENDS.clear()
    y, error = ask(config, "Call", X, target="Ticker", mode="leave")
    left = time.monotonic()
    assert error == "" and np.array_equal(y, np.concatenate([X + 1, X + 2], axis=1))
    deadline = left + TICKS * TICK_S
    while not TICKER_ENDS and time.monotonic() < deadline:
        time.sleep(0.01)
    assert TICKER_ENDS, "the called model's stream did not end"
    ended, sent = TICKER_ENDS[0]
    assert sent < TICKS and ended - left < 1.0  # it stopped, well before its 200 pieces (4 s)


def test_streams_left_early_leave_nothing_in_tritonserver(server):
    # The called model ends such a stream with its end (a network client's cancelled stream gets
    # nothing more), so that the backend can free the call and close its connection.
    triton, config = server
    process = psutil.Process(triton._server.pid)  # noqa: SLF001 - the process to look into
    assert ask(config, "Call", X, target="Ticker", mode="leave")[1] == ""
    descriptors = process.num_fds()
    for _ in range(5):
        assert ask(config, "Call", X, target="Ticker", mode="leave")[1] == ""
    assert _wait(lambda: process.num_fds() <= descriptors, 5), (process.num_fds(), descriptors)


def test_a_failed_call_raises_what_a_client_would(server):
    _, config = server
    with ModelClient(url_of(config, "grpc"), "Failing") as client, pytest.raises(PyTritonClientError) as direct:
        client.infer_batch(x=X)
    for caller in ("Call", "AsyncCall", "CallInWorkers"):
        _, error = ask(config, caller, X, target="Failing")
        assert error == f"{type(direct.value).__name__}: {direct.value}"
    assert "Failing always fails" in error


def test_a_model_the_server_lacks_fails_clearly(server):
    _, config = server
    _, error = ask(config, "Call", X, target="Nope", wait_s=0.5)
    assert error.startswith("PyTritonClientTimeoutError: model 'Call' called model 'Nope' and got no answer in time")
    assert "Waiting for model Nope/<latest> to be ready timed out" in error


@pytest.mark.parametrize("caller", ["Call", "CallInWorkers"])
def test_large_tensors_go_through_shared_memory_and_kept_outputs_stay_whole(server, caller):
    _, config = server
    x = np.random.default_rng(0).random((1, 5_000_000), dtype=np.float32)  # 20 MB
    y, error = ask(config, caller, x, protocol="grpc", target="Inner")
    assert error == "" and np.array_equal(y, x * 2)
    y, error = ask(config, caller, x, protocol="grpc", target="Inner", mode="keep")
    assert error == "" and np.array_equal(y, np.concatenate([x * 2, (x + 1) * 2], axis=1))


def _arena_bytes(pid):
    """The bytes of memory each shared-memory arena the process holds has allocated."""
    held = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if "pytriton_like-arena" in os.readlink(path):
                held.append(os.stat(path).st_blocks * 512)
        except FileNotFoundError:  # closed meanwhile
            continue
    return held


def test_large_outputs_of_nested_calls_made_at_once_leave_one_connections_pages():
    """Four calls at once bring 18 MB each: the process's pool keeps one of their connections for
    the next large call and closes the others, so that tritonserver keeps the pages of one output
    arena beyond 16 MiB, not four (the relay's own arenas keep 16 MiB)."""
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind("Inner", inner, FLOATS, Y, config=ModelConfig(max_batch_size=16))
        triton.bind("AsyncCall", async_call_alone, FLOATS, CALL_OUTPUTS, config=ModelConfig(max_batch_size=16))
        triton.run()
        x = np.random.default_rng(2).random((1, 4_500_000), dtype=np.float32)  # 18 MB
        y, error = ask(config, "AsyncCall", x, protocol="grpc", target="Inner", mode="fan")
        assert error == "" and np.array_equal(y, np.concatenate([(x + i) * 2 for i in range(4)], axis=1))
        pid = triton._server.pid  # noqa: SLF001 - the process to look into
        assert _wait(lambda: sum(held >= 17 << 20 for held in _arena_bytes(pid)) == 1, 5), _arena_bytes(pid)


def test_many_nested_calls_at_once(server):
    _, config = server
    xs = [np.full((1, 3), i, np.float32) for i in range(48)]
    with ModelClient(url_of(config, "grpc"), "AsyncCall", inference_timeout_s=60) as client:
        results = []
        threads = [threading.Thread(target=lambda x=x: results.append(
            (x, client.infer_batch(x=x, parameters={"target": "Inner", "mode": "fan"})))) for x in xs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert len(results) == len(xs)
    for x, result in results:
        assert result["error"][0, 0] == b""
        assert np.array_equal(result["y"], np.concatenate([(x + i) * 2 for i in range(4)], axis=1))


def test_a_timed_out_call_is_withdrawn_and_the_deadlock_message_stays(server):
    _, config = server
    SLOW_RUNS.clear()
    with ModelClient(url_of(config, "grpc"), "Slow", inference_timeout_s=30) as client:
        busy = threading.Thread(target=client.infer_batch, kwargs={"x": X[:1], "parameters": {"tag": "first"}})
        busy.start()
        assert _wait(lambda: SLOW_RUNS == ["first"], 5)
        _, error = ask(config, "Call", X[:1], target="Slow", wait_s=0.3, fwd_tag="nested")
        busy.join(30)
        time.sleep(SLOW_S + 0.5)  # had the nested request stayed queued, it would run now
        client.infer_batch(x=X[:1], parameters={"tag": "after"})
    assert error.startswith("PyTritonClientTimeoutError: model 'Call' called model 'Slow' and got no answer in time")
    assert "did not finish within 0.3 s" in error and "in a cycle (Call -> Slow -> ... -> Call)" in error
    assert SLOW_RUNS == ["first", "after"]


def test_a_timed_out_call_is_withdrawn_while_a_forked_child_holds_its_connection(server):
    """A child forked without exec (a data loader's workers, say) holds the process's sockets: the
    caller ends its connection, not only its descriptor, so that the call is withdrawn all the same."""
    _, config = server
    assert ask(config, "Call", X[:1], target="Inner")[1] == ""  # a connection in the pool, for the child to hold
    SLOW_RUNS.clear()
    with ModelClient(url_of(config, "grpc"), "Slow", inference_timeout_s=30) as client:
        busy = threading.Thread(target=client.infer_batch, kwargs={"x": X[:1], "parameters": {"tag": "first"}})
        busy.start()
        assert _wait(lambda: SLOW_RUNS == ["first"], 5)
        _, error = ask(config, "Call", X[:1], target="Slow", wait_s=0.3, mode="fork", fwd_tag="nested")
        busy.join(30)
        client.infer_batch(x=X[:1], parameters={"tag": "after"})
    assert error.startswith("PyTritonClientTimeoutError: model 'Call' called model 'Slow' and got no answer in time")
    assert SLOW_RUNS == ["first", "after"]


def test_a_stream_dropped_unstarted_is_cancelled(server):
    _, config = server
    TICKER_STARTS.clear()
    TICKER_ENDS.clear()
    y, error = ask(config, "Call", X, target="Ticker", mode="drop")
    assert error == "" and np.array_equal(y, X)
    assert _wait(lambda: TICKER_ENDS, TICKS * TICK_S), "the called model's stream did not end"
    assert TICKER_ENDS[0][1] < TICKS // 10  # it stopped, well before its 200 pieces
    assert ask(config, "Call", X, target="Inner")[1] == ""


@contextlib.contextmanager
def _flood_read_slowly(config, parameters):
    """SlowReader reading a stream of Flood (``parameters``) on a thread, released when the block
    ends: what it answered, once the block is done."""
    for state in (FLOOD_SENT, FLOOD_ENDED, NESTED_ERRORS):
        state.clear()
    FLOOD_RELEASE.clear()
    outcome = {}

    def read_slowly():
        with ModelClient(url_of(config, "grpc"), "SlowReader", inference_timeout_s=90) as client:
            outcome["pieces"] = client.infer_batch(x=X[:1], parameters=parameters)["y"]

    reader = threading.Thread(target=read_slowly)
    reader.start()
    try:
        yield outcome
    finally:
        FLOOD_RELEASE.set()
        reader.join(90)


def test_a_caller_slow_to_read_its_stream_holds_up_no_other_caller_of_the_model(server):
    """SlowReader reads one piece of Flood's stream and then waits: the rest waits in tritonserver
    for it, while Flood's instance sends all of it and serves another stream meanwhile."""
    _, config = server
    with _flood_read_slowly(config, {}) as outcome:
        assert _wait(lambda: FLOOD_SENT[:1] == [FLOOD_PIECES], 30), FLOOD_SENT
        with DecoupledModelClient(url_of(config, "grpc"), "Flood", inference_timeout_s=30) as client:
            pieces = [response["y"][0, 0] for response in client.infer_batch(x=X[:1])]
        assert pieces == list(range(FLOOD_PIECES))
    assert outcome["pieces"].tolist() == [[FLOOD_PIECES]]


def test_a_stream_left_unread_past_64_mib_waits_for_its_reader(server):
    """Flood would send 72 MiB to SlowReader, which reads none of it for a while: past 64 MiB unread
    Flood waits for its reader (tritonserver's memory stays bounded), then sends the rest."""
    _, config = server
    with _flood_read_slowly(config, {"pieces": 1152}) as outcome:
        assert _wait(lambda: FLOOD_SENT and FLOOD_SENT[0] > 1024, 30), FLOOD_SENT
        time.sleep(0.5)  # had it not waited, it would send its last 128 pieces meanwhile
        assert not FLOOD_ENDED and FLOOD_SENT[0] < 1152, FLOOD_SENT
    assert outcome["pieces"].tolist() == [[1152]] and FLOOD_ENDED == [0] and not NESTED_ERRORS


def test_a_stream_left_unread_past_64_mib_for_30_s_is_cancelled(server):
    """SlowReader reads nothing more for 30 s with more than 64 MiB of Flood's stream waiting: the
    call is cancelled (no thread of Triton's waits for ever), and the stream ends with an error."""
    _, config = server
    with _flood_read_slowly(config, {"pieces": 1152}) as outcome:
        assert _wait(lambda: FLOOD_ENDED, 45), FLOOD_SENT
    assert 1024 < FLOOD_SENT[0] < 1152
    assert 1 <= outcome["pieces"][0, 0] < 1024
    assert NESTED_ERRORS[0][1].startswith("PyTritonClientModelUnavailableError"), NESTED_ERRORS


def test_a_stream_response_larger_than_the_queue_arrives_whole(server):
    """Two responses of 72 MB each, the stream's end behind them, read as they come."""
    _, config = server
    with _flood_read_slowly(config, {"pieces": 2, "floats": 18_000_000}) as outcome:
        FLOOD_RELEASE.set()
    assert outcome["pieces"].tolist() == [[2]] and not NESTED_ERRORS


def test_a_timed_out_call_of_a_running_stream_stops_it_at_its_next_response(server):
    _, config = server
    TICKER_ENDS.clear()
    _, error = ask(config, "Call", X, target="Ticker", mode="stream", wait_s=0.3, fwd_delay=0.6)
    timed_out = time.monotonic()
    assert error.startswith("PyTritonClientTimeoutError: model 'Call' called model 'Ticker' and got no answer in time")
    assert _wait(lambda: TICKER_ENDS, TICKS * TICK_S), "the called model's stream did not end"
    ended, sent = TICKER_ENDS[0]
    assert sent < TICKS // 10 and ended - timed_out < 1.0  # it stopped, well before its 200 pieces (4 s)


def test_a_timed_out_call_of_a_decoupled_model_is_withdrawn_and_leaves_nothing_behind(server):
    """The call waits in Triton's queue behind streams that take every slot of Held's instance: once
    withdrawn it never runs, and when the slots free the backend ends it, so that tritonserver
    frees the call (without that end it kept the call's connection until the stop)."""
    triton, config = server
    process = psutil.Process(triton._server.pid)  # noqa: SLF001 - the process to look into
    assert ask(config, "Call", X[:1], target="Inner")[1] == ""
    descriptors = process.num_fds()
    HELD_RUNS.clear()
    HELD_RELEASE.clear()
    answers = []

    def hold():
        with DecoupledModelClient(url_of(config, "grpc"), "Held", inference_timeout_s=60) as client:
            answers.extend(response["y"] for response in client.infer_batch(x=X[:1], parameters={"tag": "hold"}))

    def held_requests():  # the requests of Held the backend handed to the callable
        return value(scrape(config.metrics_port), "pytriton_like_requests", model="Held", version="1")

    holders = [threading.Thread(target=hold) for _ in range(HELD_STREAMS)]
    try:
        for holder in holders:
            holder.start()
        assert _wait(lambda: held_requests() == HELD_STREAMS, 10), held_requests()
        _, error = ask(config, "Call", X[:1], target="Held", mode="stream", wait_s=0.3, fwd_tag="nested")
    finally:
        HELD_RELEASE.set()
        for holder in holders:
            holder.join(30)
    assert error.startswith("PyTritonClientTimeoutError: model 'Call' called model 'Held' and got no answer in time")
    assert len(answers) == HELD_STREAMS
    y, error = ask(config, "Call", X[:1], target="Held", mode="stream", fwd_tag="after")
    assert error == "" and np.array_equal(y, X[:1])
    assert HELD_RUNS == ["hold"] * HELD_STREAMS + ["after"]
    assert _wait(lambda: process.num_fds() <= descriptors, 5), (process.num_fds(), descriptors)


def test_a_model_unloaded_during_calls_and_after_ends_them_at_once(server):
    """One nested call runs in Slow, another waits in its queue, when Slow is unloaded: both end
    (as Triton ends them) well before their timeout; a call after the unload fails at once."""
    triton, config = server
    SLOW_RUNS.clear()
    outcomes = {}

    def nested(tag):
        started = time.monotonic()
        outcomes[tag] = ask(config, "Call", X[:1], target="Slow", wait_s=30, fwd_tag=tag) + (time.monotonic() - started,)

    callers = [threading.Thread(target=nested, args=(tag,)) for tag in ("running", "queued")]
    callers[0].start()
    assert _wait(lambda: SLOW_RUNS == ["running"], 5)
    callers[1].start()
    time.sleep(0.2)  # queued behind the running one: Slow has one instance and takes one request a batch
    triton.unload_model("Slow")
    for caller in callers:
        caller.join(30)
    assert outcomes["running"][1] == ""  # the call in progress ends as it would have
    assert all(seconds < 2 * SLOW_S + 3 for _, _, seconds in outcomes.values()), outcomes
    started = time.monotonic()
    _, error = ask(config, "Call", X[:1], target="Slow", wait_s=30)
    assert time.monotonic() - started < 5
    assert error.startswith("PyTritonClientModelNotFoundError") and "Slow" in error


def test_a_restarted_tritonserver_fails_the_call_in_progress_at_once_then_serves():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        bind_models(triton)
        triton.run()
        assert ask(config, "Call", X, target="Inner")[1] == ""
        outcome = {}

        def nested():
            try:
                outcome["answer"] = ask(config, "Call", X[:1], target="Slow", wait_s=30)
            except PyTritonClientError as exc:  # the caller's own request dies with tritonserver
                outcome["answer"] = (None, f"{type(exc).__name__}: {exc}")

        caller = threading.Thread(target=nested)
        caller.start()
        assert _wait(lambda: SLOW_RUNS[-1:] == [""], 5)
        NESTED_ERRORS.clear()
        killed = time.monotonic()
        os.kill(triton._server.pid, signal.SIGKILL)  # noqa: SLF001 - the process to kill
        caller.join(10)
        assert not caller.is_alive() and outcome["answer"][1] != ""
        # the nested call failed when its connection went with tritonserver, not at its timeout
        assert _wait(lambda: NESTED_ERRORS, 5)
        when, error = NESTED_ERRORS[0]
        assert when - killed < 2 and error.startswith("PyTritonClientModelUnavailableError"), error
        assert _wait(lambda: ask_quietly(config) == "", 30)


def ask_quietly(config):
    try:
        return ask(config, "Call", X, target="Inner")[1]
    except PyTritonClientError as exc:
        return str(exc)


def test_a_callable_may_still_call_over_the_network_with_a_url(server):
    _, config = server
    with ModelClient(url_of(config, "grpc"), "Inner") as client:  # what a callable does with a url of its own
        assert np.array_equal(client.infer_batch(x=X)["y"], X * 2)


@pytest.mark.parametrize("given", [None, 'q"\\/' + "t" * 1020], ids=["generated", "of 1024 characters"])
def test_the_call_socket_is_the_owners_and_asks_for_the_token_when_inference_is_restricted(tmp_path, given):
    config = free_config()
    security = TritonSecurityConfig(access_token=given, restricted_endpoints=["inference", "model-repository"])
    workspace = tmp_path / "workspace"
    with checked_for_leaks(), Triton(config=config, security_config=security, workspace=workspace) as triton:
        triton.bind("Inner", inner, FLOATS, Y, config=ModelConfig(max_batch_size=16))
        triton.bind("Call", call, FLOATS, CALL_OUTPUTS, config=ModelConfig(max_batch_size=16))
        triton.run()
        token = security.access_token
        with ModelClient(url_of(config, "grpc"), "Call", access_token=token) as client:
            result = client.infer_batch(x=X, parameters={"target": "Inner"})
        assert result["error"][0, 0] == b"" and np.array_equal(result["y"], X * 2)
        path = workspace / "sockets" / "calls"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for wrong in (None, "not-the-token"):
            with pytest.raises(CallRefused, match="access token"):
                CallChannel(f"{UNIX_SCHEME}{path}", wrong)
        CallChannel(f"{UNIX_SCHEME}{path}", token).close()
        cmdline = pathlib.Path(f"/proc/{triton._server.pid}/cmdline").read_bytes()  # noqa: SLF001
        assert token.encode() not in cmdline and b"calls-token=triton-access-token=xxx" in cmdline


def test_outputs_that_outgrow_the_arena_arrive_whole():
    """Twins' first output fills the new connection's output arena, the second one does not fit:
    the arena grows at the reply, and both arrive where the reply says."""
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        twin_outputs = [Tensor(name="y", dtype=np.float32, shape=(-1,)), Tensor(name="z", dtype=np.float32, shape=(-1,))]
        triton.bind("Twins", twins, FLOATS, twin_outputs, config=ModelConfig(max_batch_size=4))
        triton.bind("CallTwins", call_twins, FLOATS, twin_outputs, config=ModelConfig(max_batch_size=4))
        triton.run()
        x = np.random.default_rng(1).random((1, 300_000), dtype=np.float32)  # 1.2 MB an output
        with ModelClient(url_of(config, "grpc"), "CallTwins", inference_timeout_s=60) as client:
            for _ in range(2):  # on a new connection, then on the grown one
                result = client.infer_batch(x=x)
                assert np.array_equal(result["y"], x * 2) and np.array_equal(result["z"], x * 3)


def _wait(condition, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True

"""The worker against a backend end written with the reference protocol (what the C backend
does, relay/protocol.py), over real Unix sockets and memfd arenas; no tritonserver."""

import os
import tempfile
import threading
import time

import numpy as np
import pytest

from pytriton_like.exceptions import PyTritonUnrecoverableError
from pytriton_like.model_config.triton_model_config import TensorSpec
from pytriton_like.proxy.types import Request
from pytriton_like.relay.protocol import (
    PROTOCOL_VERSION,
    HEADER,
    Flags,
    Kind,
    decode_result,
    encode_batch,
    encode_header,
    read_header,
)
from pytriton_like.relay.shm import Arena, map_received
from pytriton_like.relay.transport import connect
from pytriton_like.relay_server.calling import BatchCall, ResponseStream
from pytriton_like.relay_server.cancel_keys import CANCEL_KEY_PARAMETER
from pytriton_like.relay_server.handling import DEFAULT_SHM_THRESHOLD, BatchHandler
from pytriton_like.relay_server.batch import BatchServer
from pytriton_like.relay_server.outputs import OutputChecker
from pytriton_like.relay_server.stream import StreamServer

pytestmark = pytest.mark.timeout(60)

BIG = DEFAULT_SHM_THRESHOLD * 2


class Backend:
    """One backend instance's end, as the C backend speaks it: HELLO, then BATCHes per slot."""

    def __init__(self, address, slots=2):
        self.channel = connect(address)
        self.arenas = [Arena() for _ in range(slots)]  # ours (inputs)
        self.outputs = [None] * slots  # the worker's, mapped
        self.ids = iter(range(1, 1 << 30))
        self.channel.send([encode_header(Kind.HELLO, count=slots, value=os.getpid(), text="M_0")])
        body, _ = self.channel.recv()
        self.welcome = read_header(body)

    def send(self, requests, slot=0, batch_id=None):
        batch_id = next(self.ids) if batch_id is None else batch_id
        arena = self.arenas[slot]
        parts, replaced = encode_batch(batch_id, slot, requests, arena=arena, threshold=self.welcome.value)
        self.channel.send(parts, arena.pending_fd if replaced else None)
        arena.sent()
        return batch_id

    def receive(self):
        body, fd = self.channel.recv()
        header = read_header(body)
        if header.flags & Flags.NEW_ARENA:
            self.outputs[header.slot] = map_received(fd)
        return decode_result(body, self.outputs[header.slot])

    def infer(self, *requests, slot=0):
        batch_id = self.send(list(requests), slot)
        result = self.receive()
        assert result.batch_id == batch_id
        return result

    def close(self):
        self.channel.close()
        for arena in self.arenas:
            arena.close()


@pytest.fixture
def sockets():
    # Unix socket paths must stay under ~100 characters: pytest's tmp_path can be longer.
    folder = tempfile.mkdtemp(prefix="ptl-", dir="/tmp")
    yield folder
    os.rmdir(folder)


@pytest.fixture
def serve(sockets):
    """A factory: a worker serving ``call`` and a connected backend end; all closed afterwards."""
    made = []

    def make(call, *, outputs=(TensorSpec(name="y", shape=(-1,), dtype=np.float64),), strict=False, stream=False, threshold=DEFAULT_SHM_THRESHOLD, unrecoverable=None):
        address = f"unix://{sockets}/w{len(made)}"
        handler = BatchHandler("M", OutputChecker(outputs, batching=True, strict=strict),
                               (unrecoverable if unrecoverable is not None else []).append, threshold)
        if stream:
            worker = StreamServer(handler=handler, stream=ResponseStream(call), address=address)
        else:
            worker = BatchServer(handler=handler, call=BatchCall(call), address=address)
        made.append(worker)
        backend = Backend(address)
        backends.append(backend)
        return worker, backend

    backends = []
    yield make
    for backend in backends:
        backend.close()
    for worker in made:
        worker.close()
    assert os.listdir(sockets) == []


def doubled(requests):
    return [{"y": request["x"] * 2} for request in requests]


def req(x, **fields):
    return Request({"x": np.asarray(x)}, **fields)


def test_handshake_names_the_protocol_and_threshold(serve):
    _, backend = serve(doubled)
    assert (backend.welcome.kind, backend.welcome.value) == (Kind.WELCOME, DEFAULT_SHM_THRESHOLD)


def test_small_tensors_both_ways(serve):
    _, backend = serve(doubled)
    result = backend.infer(req(np.ones((1, 3), np.float32)), req(np.full((2, 3), 2, np.float32)))
    np.testing.assert_array_equal(result.responses[0]["y"], np.full((1, 3), 2))
    np.testing.assert_array_equal(result.responses[1]["y"], np.full((2, 3), 4))
    assert result.callable_ns > 0


def test_large_tensors_both_ways_through_arenas(serve):
    _, backend = serve(doubled)
    x = np.random.rand(1, BIG // 8)
    result = backend.infer(req(x))
    np.testing.assert_array_equal(result.responses[0]["y"], x * 2)
    assert backend.outputs[0] is not None  # the answer came through the worker's arena


def test_each_slot_has_its_own_arenas_and_two_batches_can_be_in_flight(serve):
    _, backend = serve(doubled)
    a, b = np.full((1, BIG // 4), 1, np.float32), np.full((1, BIG // 4), 3, np.float32)
    first = backend.send([req(a)], slot=0)
    second = backend.send([req(b)], slot=1)
    results = {result.batch_id: result for result in (backend.receive(), backend.receive())}
    np.testing.assert_array_equal(results[first].responses[0]["y"], a * 2)
    np.testing.assert_array_equal(results[second].responses[0]["y"], b * 2)


def test_arenas_grow_across_batches(serve):
    _, backend = serve(doubled)
    for size in (BIG, 3 << 20, BIG):
        x = np.ones((1, size // 4), np.float32)
        np.testing.assert_array_equal(backend.infer(req(x)).responses[0]["y"], x * 2)


def test_bytes_parameters_outputs_and_sequence_reach_the_callable(serve):
    seen = []

    def echo(requests):
        seen.extend((r.parameters, r.requested_output_names, r.sequence_id, r.sequence_start) for r in requests)
        return [{"y": r["x"], "s": np.array([b"ok"], dtype=object), "z": r["x"]} for r in requests]

    _, backend = serve(echo, outputs=[TensorSpec(name=name, shape=(-1,), dtype=dtype)
                                      for name, dtype in (("y", np.bytes_), ("s", np.bytes_), ("z", np.bytes_))])
    result = backend.infer(req(np.array([b"a", b""], dtype=object), parameters={"p": 1}, requested_output_names=["y", "s"],
                               sequence_id="s-1", sequence_start=True))
    assert seen == [({"p": 1}, ["y", "s"], "s-1", True)]
    assert set(result.responses[0]) == {"y", "s"}  # "z" was not requested
    assert list(result.responses[0]["y"]) == [b"a", b""]


def test_an_exception_fails_the_batch_and_the_next_one_is_served(serve):
    calls = []

    def flaky(requests):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("boom")
        return doubled(requests)

    _, backend = serve(flaky)
    result = backend.infer(req([1.0]), req([2.0]))
    assert result.error == "ValueError: boom"
    assert backend.infer(req([1.0])).responses[0]["y"] == 2


def test_a_bad_response_fails_only_its_own_request(serve):
    outputs = [TensorSpec(name="y", shape=(-1,), dtype=np.float32)]
    _, backend = serve(lambda requests: [{"y": np.ones(1, np.float32)}, {"y": np.array(["text"])}],
                       outputs=outputs)
    result = backend.infer(req([1.0]), req([2.0]))
    assert result.responses[0]["y"] == 1
    assert "output 'y' has dtype <U4" in result.responses[1]


@pytest.mark.parametrize("returned, message", [(None, "must return a list"), ([{}], "returned 1 responses for 2")])
def test_wrong_responses_become_a_clear_error(serve, returned, message):
    _, backend = serve(lambda requests: returned)
    assert message in backend.infer(req([1.0]), req([2.0])).error


def test_unrecoverable_error_reported(serve):
    reported = []

    def fatal(requests):
        raise PyTritonUnrecoverableError("gpu gone")

    _, backend = serve(fatal, unrecoverable=reported)
    assert "gpu gone" in backend.infer(req([1.0])).error
    assert len(reported) == 1


def test_a_callable_that_ends_its_thread_fails_every_later_batch(serve):
    import sys

    _, backend = serve(lambda requests: sys.exit("bye"))
    for _ in range(2):
        assert "serves no more requests: SystemExit: bye" in backend.infer(req([1.0])).error


def test_a_malformed_batch_is_answered_as_failed_and_the_worker_keeps_serving(serve):
    _, backend = serve(doubled)
    parts, _ = encode_batch(41, 0, [req([1.0])])
    body = bytearray(b"".join(bytes(memoryview(part)) for part in parts))
    body[HEADER.size + 6] = 9  # the request record's id kind... then garbage in the tensor record
    body[HEADER.size + 20:HEADER.size + 44] = b"\xff" * 24
    backend.channel.send([body])
    result = backend.receive()
    assert result.batch_id == 41 and "malformed batch" in result.error
    assert backend.infer(req([1.0])).responses[0]["y"] == 2


def test_garbage_without_a_header_is_dropped_and_the_worker_keeps_serving(serve):
    _, backend = serve(doubled)
    backend.channel.send([b"\x00" * 7])
    assert backend.infer(req([3.0])).responses[0]["y"] == 6


def test_another_protocol_version_is_refused_with_a_reason(serve, sockets):
    worker, backend = serve(doubled)
    backend.close()
    other = connect(f"unix://{sockets}/w0")
    hello = bytearray(encode_header(Kind.HELLO, count=1))
    hello[0:2] = (PROTOCOL_VERSION + 1).to_bytes(2, "little")
    other.send([hello])
    welcome = read_header(other.recv()[0])
    assert welcome.flags & Flags.FAILED and "protocol version" in welcome.text
    other.close()


def test_a_backend_gone_mid_batch_leaves_the_worker_serving(serve, sockets):
    release = threading.Event()

    def slow(requests):
        release.wait(10)
        return doubled(requests)

    worker, backend = serve(slow)
    backend.send([req([1.0])])
    backend.close()
    release.set()
    again = Backend(f"unix://{sockets}/w0")
    try:
        assert again.infer(req([1.0])).responses[0]["y"] == 2
    finally:
        again.close()


def test_a_nudge_without_its_batch_leaves_the_worker_serving(serve):
    _, backend = serve(doubled)
    backend.channel.send([])  # a message of length 0: a nudge
    time.sleep(0.01)
    assert backend.infer(req([1.0])).responses[0]["y"] == 2


# -- streaming ------------------------------------------------------------------------------------


def test_a_stream_sends_each_step_then_final(serve):
    def steps(requests):
        for step in range(3):
            yield [{"y": request["x"] + step} for request in requests]

    _, backend = serve(steps, stream=True)
    batch_id = backend.send([req([1.0]), req([5.0])])
    seen = []
    while True:
        result = backend.receive()
        assert result.batch_id == batch_id
        if result.final:
            break
        seen.append([float(response["y"][0]) for response in result.responses])
    assert seen == [[1, 5], [2, 6], [3, 7]] and result.callable_ns > 0


def test_a_failing_stream_ends_with_its_error(serve):
    async def fails(requests):
        yield [{"y": request["x"]} for request in requests]
        raise RuntimeError("half way")

    _, backend = serve(fails, stream=True)
    backend.send([req([1.0])])
    assert not backend.receive().final
    last = backend.receive()
    assert last.final and last.error == "RuntimeError: half way"


def test_cancel_ends_a_stream_with_a_final_result(serve):
    import asyncio

    async def endless(requests):
        while True:
            yield [{"y": request["x"]} for request in requests]
            await asyncio.sleep(0.01)

    worker, backend = serve(endless, stream=True)
    batch_id = backend.send([req([1.0])])
    assert not backend.receive().final
    backend.channel.send([encode_header(Kind.CANCEL, batch_id=batch_id)])
    deadline = time.monotonic() + 10
    while not backend.receive().final:
        assert time.monotonic() < deadline
    deadline = time.monotonic() + 5
    while worker.busy():
        assert time.monotonic() < deadline
        time.sleep(0.01)


# -- cancel keys (relay_server/cancel_keys.py) -------------------------------------------------------


def keyed(x, key):
    return req([x], parameters={CANCEL_KEY_PARAMETER: key})


def finals_after(backend, batch_id, timeout_s=10):
    """Results of ``batch_id`` until its FINAL; the number of non-final ones."""
    deadline, steps = time.monotonic() + timeout_s, 0
    while True:
        assert time.monotonic() < deadline
        result = backend.receive()
        assert result.batch_id == batch_id
        if result.final:
            assert result.error is None
            return steps
        steps += 1


class Endless:
    """A sync generator per batch, a step every 10 ms; counts the steps and whether it was closed."""

    def __init__(self, step_s=0.01):
        self.step_s = step_s
        self.steps = 0
        self.closed = threading.Event()
        self.started = threading.Event()

    def __call__(self, requests):
        self.started.set()
        try:
            while True:
                time.sleep(self.step_s)
                self.steps += 1
                yield [{"y": request["x"]} for request in requests]
        finally:
            self.closed.set()


def test_a_cancel_key_ends_its_batch_closing_the_generator(serve):
    endless = Endless()
    worker, backend = serve(endless, stream=True)
    batch_id = backend.send([keyed(1.0, "k1")])
    assert not backend.receive().final
    worker.cancel("k1")
    finals_after(backend, batch_id)
    assert endless.closed.is_set()  # its finally ran before the FINAL
    steps = endless.steps
    time.sleep(0.1)
    assert endless.steps == steps  # and nothing more was asked of it


def test_a_step_running_when_cancelled_is_waited_for_then_the_generator_closed(serve):
    endless = Endless(step_s=0.5)
    worker, backend = serve(endless, stream=True)
    batch_id = backend.send([keyed(1.0, "slow")])
    assert endless.started.wait(5)
    time.sleep(0.1)  # the first step is running
    worker.cancel("slow")
    finals_after(backend, batch_id)
    assert endless.steps == 1 and endless.closed.is_set()


def test_a_key_cancelled_before_its_batch_came_ends_it_without_calling_the_callable(serve):
    endless = Endless()
    worker, backend = serve(endless, stream=True)
    worker.cancel("early")
    time.sleep(0.05)  # the cancel reaches the server's loop first
    batch_id = backend.send([keyed(1.0, "early")])
    assert finals_after(backend, batch_id) == 0
    assert not endless.started.is_set()


def test_a_batch_ends_once_every_request_of_it_is_cancelled(serve):
    endless = Endless()
    worker, backend = serve(endless, stream=True)
    batch_id = backend.send([keyed(1.0, "a"), keyed(2.0, "b")])
    assert not backend.receive().final
    worker.cancel("a")
    time.sleep(0.1)
    assert not endless.closed.is_set()  # "b" still streams (the backend discards "a"'s pieces)
    worker.cancel("b")
    finals_after(backend, batch_id)
    assert endless.closed.is_set()


def test_an_async_generator_is_closed_by_its_cancel_key(serve):
    import asyncio

    closed = threading.Event()

    async def endless(requests):
        try:
            while True:
                yield [{"y": request["x"]} for request in requests]
                await asyncio.sleep(0.01)
        finally:
            closed.set()

    worker, backend = serve(endless, stream=True)
    batch_id = backend.send([keyed(1.0, "k")])
    assert not backend.receive().final
    worker.cancel("k")
    finals_after(backend, batch_id)
    assert closed.is_set()

"""BatchCall and ResponseStream run a batch of one request Triton traces in that trace's context
(nested_trace.current(): what the nested calls made meanwhile continue), whatever kind of callable
they call; a batch of several requests runs in none."""

import asyncio

import pytest

from pytriton_like import nested_trace
from pytriton_like.proxy.types import Request
from pytriton_like.relay_server.calling import BatchCall, ResponseStream

pytestmark = pytest.mark.timeout(30)


def traced(trace: int) -> Request:
    request = Request({})
    request._triton_trace = trace
    return request


def function(requests):
    return [{"trace": nested_trace.current()}]


async def coroutine(requests):
    await asyncio.sleep(0)
    return [{"trace": nested_trace.current()}]


def generator(requests):
    for _ in range(2):
        yield [{"trace": nested_trace.current()}]


async def async_generator(requests):
    for _ in range(2):
        await asyncio.sleep(0)
        yield [{"trace": nested_trace.current()}]


@pytest.mark.parametrize("func", [function, coroutine], ids=["function", "coroutine"])
@pytest.mark.parametrize(("requests", "trace"), [([traced(7)], 7), ([traced(7), traced(8)], 0), ([Request({})], 0)],
                         ids=["one-traced", "several", "untraced"])
def test_a_batch_call_runs_in_the_trace_of_its_one_request(func, requests, trace):
    call = BatchCall(func)
    try:
        assert call(requests) == [{"trace": trace}]
    finally:
        call.close()
    assert nested_trace.current() == 0  # not left behind


@pytest.mark.parametrize("func", [function, coroutine, generator, async_generator],
                         ids=["function", "coroutine", "generator", "async-generator"])
@pytest.mark.parametrize(("requests", "trace"), [([traced(7)], 7), ([traced(7), traced(8)], 0)],
                         ids=["one-traced", "several"])
def test_a_response_stream_runs_every_step_in_the_trace_of_its_one_request(func, requests, trace):
    stream = ResponseStream(func)

    async def main():  # in a task of its own, as StreamServer runs each batch
        return await asyncio.ensure_future(_collect(stream(requests)))

    try:
        pieces = asyncio.run(main())
    finally:
        stream.close()
    assert pieces and all(piece == [{"trace": trace}] for piece in pieces)


async def _collect(stream):
    return [responses async for responses in stream]


def test_a_traced_span_makes_the_calls_inside_for_its_request():
    request, untraced = traced(9), Request({})
    with untraced.traced_span("outer"):
        assert nested_trace.current() == 0
        with request.traced_span("calls"):
            assert nested_trace.current() == 9
        assert nested_trace.current() == 0
    assert nested_trace.of_batch([request]) == 9 and nested_trace.of_batch([request, request]) == 0


def spanning(requests):
    """A span for the first request across a yield: the calls of both steps are made for it."""
    with requests[0].traced_span("calls"):
        for _ in range(2):
            yield [{"trace": nested_trace.current()}] * len(requests)


def test_a_traced_span_across_a_yield_holds_in_every_step_and_leaves_no_thread_in_a_trace():
    stream = ResponseStream(spanning, max_threads=3)

    async def streams(batches):
        return await asyncio.gather(*(asyncio.ensure_future(_collect(stream(batch))) for batch in batches))

    try:
        # four streams at once on three threads, each step wherever a thread is free
        pieces = asyncio.run(streams([[traced(n), traced(100 + n)] for n in range(1, 5)]))
        assert pieces == [[[{"trace": n}] * 2] * 2 for n in range(1, 5)]
        # then batches of untraced requests, on the same threads: in no trace
        later = asyncio.run(streams([[Request({}), Request({})] for _ in range(6)]))
        assert later == [[[{"trace": 0}] * 2] * 2] * 6
    finally:
        stream.close()

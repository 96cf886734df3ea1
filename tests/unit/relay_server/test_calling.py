"""ResponseStream: a stream that ends early closes the callable's generator (its ``finally`` runs,
no further piece is asked of it), after waiting for a sync step still running."""

import asyncio
import threading
import time

import pytest

from pytriton_like.proxy.types import Request
from pytriton_like.relay_server.calling import ResponseStream

pytestmark = pytest.mark.timeout(30)


class Counting:
    """A sync generator function: a step takes ``step_s``; counts steps, records the close."""

    def __init__(self, step_s=0.0):
        self.step_s = step_s
        self.steps = 0
        self.closed = threading.Event()
        self.running = threading.Event()

    def __call__(self, requests):
        try:
            while True:
                self.running.set()
                time.sleep(self.step_s)
                self.steps += 1
                self.running.clear()
                yield [{"step": self.steps}]
        finally:
            self.closed.set()


@pytest.fixture
def stream_of():
    """A factory of ResponseStreams, closed after the test."""
    made = []

    def make(func):
        made.append(ResponseStream(func))
        return made[-1]

    yield make
    for stream in made:
        stream.close()


def test_a_stream_closed_early_closes_a_sync_generator(stream_of):
    counting = Counting()
    stream = stream_of(counting)

    async def main():
        responses = stream([Request({})])
        await responses.__anext__()
        await responses.__anext__()
        await responses.aclose()

    asyncio.run(main())
    assert counting.closed.is_set() and counting.steps == 2


async def cancelled_during_a_step(stream, counting, cancels):
    """Consume ``stream`` in a task and cancel it ``cancels`` times while its first step runs;
    once the task ended: whether the generator was closed, and its steps."""
    async def consume():
        async for _ in stream([Request({})]):
            pass

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.1)  # the first step runs in the pool
    assert counting.running.is_set() and not counting.closed.is_set()
    for _ in range(cancels):  # a second: e.g. the backend's CANCEL after a cancel key
        task.cancel()
        await asyncio.sleep(0.05)
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    return counting.closed.is_set(), counting.steps


def test_a_cancelled_task_waits_for_the_running_step_then_closes_the_generator(stream_of):
    counting = Counting(step_s=0.3)
    assert asyncio.run(cancelled_during_a_step(stream_of(counting), counting, cancels=1)) == (True, 1)
    time.sleep(0.4)
    assert counting.steps == 1  # no further step was asked for


def test_a_second_cancel_does_not_leave_the_generator_half_closed(stream_of):
    counting = Counting(step_s=0.3)
    assert asyncio.run(cancelled_during_a_step(stream_of(counting), counting, cancels=2)) == (True, 1)


def test_an_async_generator_is_closed_when_its_stream_ends_early(stream_of):
    closed = []

    async def endless(requests):
        try:
            while True:
                yield [{}]
                await asyncio.sleep(0)
        finally:
            closed.append(True)

    stream = stream_of(endless)

    async def main():
        responses = stream([Request({})])
        await responses.__anext__()
        await responses.aclose()

    asyncio.run(main())
    assert closed == [True]


def test_a_generator_run_to_its_end_is_not_closed_again(stream_of):
    calls = []

    def three(requests):
        for index in range(3):
            yield [{"i": index}]
        calls.append("ended")

    stream = stream_of(three)

    async def main():
        return [responses async for responses in stream([Request({})])]

    assert len(asyncio.run(main())) == 3 and calls == ["ended"]

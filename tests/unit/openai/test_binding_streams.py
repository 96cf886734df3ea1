"""bind_chat_model's streaming wrapper closes each request's generator when its stream ends early
(cancelled, or another request's generator failed), so that the callable's ``finally`` runs."""

import asyncio

import numpy as np
import pytest

from pytriton_like.openai import GenerationRequest, bind_chat_model
from pytriton_like.openai.contract import REQUEST_INPUT


class Binder:
    """Stands for Triton: keeps what bind_chat_model binds."""

    def bind(self, infer_func, **_):
        self.infer_func = infer_func


def wrapped(func, streaming=None):
    binder = Binder()
    bind_chat_model(binder, "m", func, streaming=streaming)
    return binder.infer_func


def requests(count):
    payload = GenerationRequest(model="m", messages=({"role": "user", "content": "x"},)).to_json()
    return [{REQUEST_INPUT: np.array([[payload]], dtype=np.bytes_)} for _ in range(count)]


def test_a_stream_closed_early_closes_every_request_generator():
    closed, kept = [], []

    def pieces(request):
        try:
            while True:
                yield "piece "
        finally:
            closed.append(request.choice)

    def endless(request):  # keeps its generators (as a model holding sessions may): closing must not wait for GC
        kept.append(pieces(request))
        return kept[-1]

    stream = wrapped(endless, streaming=True)(requests(3))
    assert len(next(stream)) == 3
    stream.close()  # what the relay does to a cancelled batch
    assert len(closed) == 3


def test_a_generator_that_raises_closes_the_others():
    closed = []

    def some_fail(request):
        try:
            yield "one "
            if len(closed) == 0 and request.choice == 0:
                raise RuntimeError("broken")
            yield "two "
        finally:
            closed.append(request.choice)

    stream = wrapped(some_fail)(requests(2))
    next(stream)
    with pytest.raises(RuntimeError, match="broken"):
        next(stream)
    assert len(closed) == 2


def test_an_async_stream_closed_early_closes_every_request_generator():
    closed = []

    async def endless(request):
        try:
            while True:
                yield "piece "
                await asyncio.sleep(0)
        finally:
            closed.append(request.choice)

    async def main():
        stream = wrapped(endless)(requests(2))
        await stream.__anext__()
        await stream.aclose()

    asyncio.run(main())
    assert len(closed) == 2

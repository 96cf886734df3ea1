"""A client that reads a stream more slowly than the model generates it: once max_unread_bytes wait
to be sent, the stream ends with a ``slow_reader`` error event and its generation is stopped."""

import asyncio
import json

from aiohttp.test_utils import TestClient, TestServer

from pytriton_like.openai.app import Routes
from pytriton_like.openai.contract import ModelKind, OpenAIModel, Piece

MODEL = OpenAIModel("m", ModelKind.TEXT, streaming=True, max_batch_size=1)
BODY = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}


class Endless:
    """Pieces of 100 bytes for as long as asked (``limit`` at most); records when it was closed."""

    def __init__(self, limit=None):
        self.limit = limit
        self.given = 0
        self.closed = asyncio.Event()

    async def stream(self, model, payload, priority):
        try:
            while self.limit is None or self.given < self.limit:
                self.given += 1
                yield Piece("x" * 100)
                await asyncio.sleep(0)  # as a gRPC read does when nothing waits
        finally:
            self.closed.set()


def events_of(body: bytes):
    return [json.loads(block[6:]) if block != "data: [DONE]" else "[DONE]"
            for block in body.decode().split("\n\n") if block.startswith("data: ")]


def test_a_client_that_does_not_read_gets_an_error_and_the_generation_stops():
    async def main():
        upstream = Endless()
        routes = Routes(upstream, lambda: {"m": MODEL}, api_key=None, max_unread_bytes=64 * 1024)
        async with TestClient(TestServer(routes.application(1 << 20))) as client:
            response = await asyncio.wait_for(client.post("/v1/chat/completions", json=BODY), 10)
            await asyncio.wait_for(upstream.closed.wait(), 30)  # not a byte read meanwhile
            given = upstream.given
            body = await asyncio.wait_for(response.read(), 30)
            return response.status, events_of(body), given, upstream.given

    status, events, given, given_later = asyncio.run(main())
    assert status == 200 and given == given_later
    assert events[-1]["error"]["code"] == "slow_reader"
    assert "openai_max_unread_bytes" in events[-1]["error"]["message"]
    assert all("choices" in chunk for chunk in events[:-1])  # the pieces sent before it, whole


def test_a_client_that_keeps_up_gets_the_whole_stream():
    async def main():
        upstream = Endless(limit=3000)  # 300 kB of text: more than the limit, read as it comes
        routes = Routes(upstream, lambda: {"m": MODEL}, api_key=None, max_unread_bytes=64 * 1024)
        async with TestClient(TestServer(routes.application(1 << 20))) as client:
            response = await asyncio.wait_for(client.post("/v1/chat/completions", json=BODY), 10)
            return events_of(await asyncio.wait_for(response.read(), 30))

    events = asyncio.run(main())
    assert events[-1] == "[DONE]"
    assert sum(bool(e["choices"][0]["delta"].get("content")) for e in events[:-1]) == 3000

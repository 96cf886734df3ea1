"""A failure of the endpoint's own code ends a request with OpenAI's 500, never with a hang."""

import asyncio
import json

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from pytriton_like.openai.app import Routes
from pytriton_like.openai.contract import ModelKind, OpenAIModel, Piece

MODEL = OpenAIModel("m", ModelKind.TEXT, streaming=True, max_batch_size=0)


class BrokenUpstream:
    """Gives ``pieces`` pieces, then fails as a bug would (not with an APIError)."""

    def __init__(self, pieces: int):
        self.pieces = pieces

    async def stream(self, model, payload, priority):
        for index in range(self.pieces):
            yield Piece(f"p{index} ")
        raise ValueError("a bug")


def post(pieces: int, stream: bool):
    async def main():
        routes = Routes(BrokenUpstream(pieces), lambda: {"m": MODEL}, api_key=None)
        async with TestClient(TestServer(routes.application(1 << 20))) as client:
            body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": stream}
            response = await asyncio.wait_for(client.post("/v1/chat/completions", json=body), 10)
            return response.status, await asyncio.wait_for(response.read(), 10)

    return asyncio.run(main())


def test_a_failure_before_the_first_piece_is_500():
    for stream in (False, True):
        status, body = post(0, stream)
        assert status == 500 and json.loads(body)["error"]["code"] == "internal_error"


def test_a_failure_midway_ends_the_stream_with_an_error_event():
    status, body = post(2, stream=True)
    events = [line[6:] for line in body.decode().split("\n\n") if line.startswith("data: ")]
    assert status == 200 and '"content":"p1 "' in events[-2]
    assert json.loads(events[-1])["error"]["code"] == "internal_error"

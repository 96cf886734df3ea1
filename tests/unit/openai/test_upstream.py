"""Upstream's streams over Triton's HTTP endpoint: Triton's errors become the OpenAI errors clients expect."""

import asyncio

import pytest

from pytriton_like.openai.contract import ModelKind, OpenAIModel, Piece
from pytriton_like.openai.errors import APIError
from pytriton_like.openai.upstream import Upstream

from .test_event_stream import END, HEAD, Server, chunk

MODEL = OpenAIModel("m", ModelKind.TEXT, streaming=True, max_batch_size=0)


def answers(reply: bytes):
    async def answer(reader, writer):
        writer.write(reply)
        await writer.drain()
        return False  # then closes the connection

    async def main():
        async with Server(answer) as server:
            upstream = Upstream("127.0.0.1:1", f"127.0.0.1:{server.port}", access_token="t")
            try:
                return [piece async for piece in upstream.stream(MODEL, b'{"model":"m"}', None)], server.requests
            finally:
                await upstream.close()

    return asyncio.run(main())


def json_reply(status: str, body: bytes) -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        status.encode(), len(body), body)


def test_pieces_come_from_the_events_and_the_request_carries_the_token():
    events = b'data: {"openai_piece":"{\\"text\\":\\"a\\"}"}\n\n' b'data: {"model_name":"m"}\n\n'
    pieces, requests = answers(HEAD + chunk(events) + END)
    assert pieces == [Piece("a")]
    assert requests[0].startswith(b"POST /v2/models/m/generate_stream HTTP/1.1\r\n")
    assert b"\r\ntriton-access-token: t\r\n" in requests[0]
    assert requests[0].endswith(b'\r\n\r\n{"openai_request":"{\\"model\\":\\"m\\"}"}')


@pytest.mark.parametrize("reply, status, code", [
    (json_reply("400 Bad Request", b'{"error":"Exceeds maximum queue size"}'), 429, "queue_full"),
    (json_reply("400 Bad Request", b'{"error":"Request timeout expired"}'), 503, "timeout"),
    (json_reply("404 Not Found", b'{"error":"Request for unknown model: \'m\' is not found"}'), 404, "model_not_found"),
    (HEAD + chunk(b'data: {"error":"Traceback: /srv/secret"}\n\n') + END, 500, "model_error"),
    (HEAD + chunk(b'data: {"openai_piece":"{\\"text\\":\\"a\\"}"}\n\n'), 503, "unavailable"),  # closed midway
])
def test_errors_become_openai_errors(reply, status, code):
    with pytest.raises(APIError) as info:
        answers(reply)
    assert (info.value.status, info.value.code) == (status, code)
    assert "secret" not in info.value.message

"""The endpoint's HTTP/2 gRPC channel against grpcio's own server: unary and streaming calls,
messages larger than a frame and than the flow-control window, statuses and their messages,
cancellation as the server sees it, a lost server and a new connection after it."""

import asyncio

import grpc
import pytest

from pytriton_like.openai.grpc_channel import CANCELLED, NOT_FOUND, UNAVAILABLE, GrpcChannel, RpcError

SERVICE = "test.Echo"


class Echo:
    """Unary ``Echo`` (the request back, ``Fail`` with a status), streaming ``Chat`` (each request
    answered by ``int(request)`` messages of 1 KiB), what the server saw, and the server."""

    def __init__(self):
        self.cancelled = asyncio.Event()
        self.metadata = {}
        self.peers = set()
        self.server = None

    async def echo(self, request: bytes, context) -> bytes:
        self.metadata = dict(context.invocation_metadata())
        self.peers.add(context.peer())
        return request

    async def fail(self, request: bytes, context) -> bytes:
        await context.abort(grpc.StatusCode.NOT_FOUND, "no model 'm' (100% sure: ünïcode)")

    async def chat(self, requests, context):
        ended = False
        try:
            async for request in requests:
                for index in range(int(request)):
                    yield bytes([index % 256]) * 1024
            ended = True
        finally:
            if not ended:  # the client cancelled the call
                self.cancelled.set()

    def handler(self):
        return grpc.method_handlers_generic_handler(SERVICE, {
            "Echo": grpc.unary_unary_rpc_method_handler(self.echo),
            "Fail": grpc.unary_unary_rpc_method_handler(self.fail),
            "Chat": grpc.stream_stream_rpc_method_handler(self.chat),
        })


async def start_server(echo, port=0):
    """grpcio's server of ``echo``, started on loopback (``port`` 0: a free one)."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((echo.handler(),))
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    echo.server = server
    return server, port


async def serving(body, echo=None, metadata=()):
    echo = echo or Echo()
    server, port = await start_server(echo)
    channel = GrpcChannel(f"127.0.0.1:{port}", metadata)
    try:
        return await body(channel, echo)
    finally:
        channel.close()
        await server.stop(None)


def run(body, **kwargs):
    return asyncio.run(serving(body, **kwargs))


def test_a_unary_call_answers_its_message_with_the_metadata_sent():
    async def body(channel, echo):
        return await channel.unary(f"/{SERVICE}/Echo", b"hello"), echo.metadata

    answer, metadata = run(body, metadata=(("x-token", "secret"),))
    assert answer == b"hello" and metadata["x-token"] == "secret"


def test_messages_larger_than_a_frame_and_the_window_travel_whole():
    big = bytes(range(256)) * 4096 * 3  # 3 MiB: many frames, beyond the default 64 KiB window

    async def body(channel, echo):
        return await channel.unary(f"/{SERVICE}/Echo", big)

    assert run(body) == big


def test_a_status_arrives_with_its_code_and_decoded_message():
    async def body(channel, echo):
        with pytest.raises(RpcError) as caught:
            await channel.unary(f"/{SERVICE}/Fail", b"")
        return caught.value

    error = run(body)
    assert error.code == NOT_FOUND and error.details == "no model 'm' (100% sure: ünïcode)"


def test_a_stream_carries_requests_one_after_another_then_ends_ok():
    async def body(channel, echo):
        call = await channel.open(f"/{SERVICE}/Chat")
        counts = []
        for count in (3, 200):  # 200 KiB: messages split across frames and window updates
            await call.write(str(count).encode())
            counts.append(0)
            for _ in range(count):
                counts[-1] += len(await call.read()) == 1024
        await call.write(b"0", end=True)
        return counts, await call.read(), call.done()

    assert run(body) == ([3, 200], None, True)


def test_cancelling_a_call_cancels_it_on_the_server():
    async def body(channel, echo):
        call = await channel.open(f"/{SERVICE}/Chat")
        await call.write(b"100000")
        await call.read()
        call.cancel()
        await asyncio.wait_for(echo.cancelled.wait(), 5)
        with pytest.raises(RpcError) as caught:
            await call.read()
        # the connection still serves other calls
        return caught.value.code, await channel.unary(f"/{SERVICE}/Echo", b"still")

    assert run(body) == (CANCELLED, b"still")


def test_a_server_that_goes_away_ends_calls_unavailable_and_a_new_one_connects_again():
    async def body():
        echo = Echo()
        server, port = await start_server(echo)
        channel = GrpcChannel(f"127.0.0.1:{port}")
        try:
            call = await channel.open(f"/{SERVICE}/Chat")
            await call.write(b"1")
            await call.read()
            await server.stop(None)
            with pytest.raises(RpcError) as caught:
                while True:
                    await asyncio.wait_for(call.read(), 5)
            with pytest.raises(RpcError) as refused:
                await channel.unary(f"/{SERVICE}/Echo", b"x")
            server, _ = await start_server(echo, port)
            return caught.value.code, refused.value.code, await channel.unary(f"/{SERVICE}/Echo", b"back")
        finally:
            channel.close()
            await server.stop(None)

    codes = asyncio.run(body())
    assert codes[0] in (UNAVAILABLE, CANCELLED) and codes[1:] == (UNAVAILABLE, b"back")


def test_a_call_running_when_the_server_stops_gracefully_finishes():
    # grpcio's server.stop(grace) sends GOAWAY (and a PING, then a second GOAWAY) and lets the calls
    # it accepted end; new calls find no server.
    async def body(channel, echo):
        call = await channel.open(f"/{SERVICE}/Chat")
        await call.write(b"1")
        answers = [len(await call.read())]
        stopping = asyncio.ensure_future(echo.server.stop(5))
        await asyncio.sleep(0.2)  # the GOAWAY arrives
        with pytest.raises(RpcError) as refused:
            await channel.unary(f"/{SERVICE}/Echo", b"x")
        await call.write(b"2", end=True)
        while (answer := await asyncio.wait_for(call.read(), 5)) is not None:
            answers.append(len(answer))
        await asyncio.wait_for(stopping, 5)
        return answers, refused.value.code

    assert run(body) == ([1024] * 3, UNAVAILABLE)


def test_concurrent_calls_share_one_connection():
    async def body(channel, echo):
        answers = await asyncio.gather(*(channel.unary(f"/{SERVICE}/Echo", str(i).encode()) for i in range(50)))
        return answers, echo.peers

    answers, peers = run(body)
    assert answers == [str(i).encode() for i in range(50)] and len(peers) == 1


class Acknowledged:
    """Stands for the connection under a Call: the bytes given back to the server's window."""

    def __init__(self):
        self.loop = None
        self.sizes = []

    def acknowledge(self, stream_id, size):
        self.sizes.append(size)


def test_messages_split_anywhere_across_frames_are_read_whole_and_each_byte_acknowledged_once_read():
    from pytriton_like.openai.grpc_channel import Call

    messages = [b"", b"a", bytes(range(256)) * 70, b"xyz" * 5]
    wire = b"".join(b"\0" + len(m).to_bytes(4, "big") + m for m in messages)

    async def read_all(call):
        return [await call.read() for _ in messages]

    for ack_batch in (1, 1000, 1 << 20):
        for cut in (1, 2, 3, 4, 5, 6, 7, 4099, 17000):
            connection = Acknowledged()
            call = Call(connection, stream_id=1, ack_batch=ack_batch)
            for start in range(0, len(wire), cut):
                call._data(wire[start : start + cut], len(wire[start : start + cut]))
            assert list(call._messages) == messages, cut
            if ack_batch > len(wire):  # nothing read, nothing given back (only a message's start may be)
                assert connection.sizes == [], cut
            assert asyncio.run(read_all(call)) == messages
            assert sum(connection.sizes) + call._owed == len(wire) and all(size > 0 for size in connection.sizes)
            assert call._owed < ack_batch

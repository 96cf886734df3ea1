"""EventStreams against a small asyncio HTTP server that answers as tritonserver's generate_stream does."""

import asyncio

import pytest

from pytriton_like.openai.event_stream import EventStreams, HTTPStatusError


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(text: str) -> bytes:
    return b'data: {"piece":"%s"}\n\n' % text.encode()


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"


class Server:
    """Answers each request with ``answer(reader, writer)``; counts connections and keeps the requests."""

    def __init__(self, answer):
        self.answer = answer
        self.connections = 0
        self.requests = []
        self.closed = asyncio.Event()

    async def __aenter__(self):
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    async def serve(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
                             .split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                if not await self.answer(reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed.set()
            writer.close()


async def collect(streams, path="/v2/models/m/generate_stream", body=b"{}"):
    return [data for batch in [b async for b in streams.events(path, body)] for data in batch]


def test_events_arrive_in_order_and_the_connection_is_kept_alive():
    async def answer(reader, writer):
        writer.write(HEAD + chunk(event("a") + event("b")) + chunk(event("c")) + END)
        await writer.drain()
        return True

    async def main():
        async with Server(answer) as server:
            streams = EventStreams("127.0.0.1", server.port, {"triton-access-token": "t"})
            first = await collect(streams, body=b'{"x":1}')
            second = await collect(streams)
            streams.close()
            return server, first, second

    server, first, second = asyncio.run(main())
    assert first == second == [b'{"piece":"a"}', b'{"piece":"b"}', b'{"piece":"c"}']
    assert server.connections == 1  # the second request reused the connection
    assert server.requests[0].startswith(b"POST /v2/models/m/generate_stream HTTP/1.1\r\n")
    assert b"\r\ntriton-access-token: t\r\n" in server.requests[0] and server.requests[0].endswith(b'\r\n\r\n{"x":1}')


def test_events_that_arrive_while_a_batch_is_handled_are_not_lost():
    # the last events and the end arrive while the consumer still handles the first batch
    rest = asyncio.Event()

    async def answer(reader, writer):
        writer.write(HEAD + chunk(event("a")))
        await writer.drain()
        await rest.wait()
        writer.write(chunk(event("b") + event("c")[:5]) + chunk(event("c")[5:]) + END)
        await writer.drain()
        return True

    async def main():
        async with Server(answer) as server:
            streams = EventStreams("127.0.0.1", server.port)
            received = []
            async for batch in streams.events("/p", b"{}"):
                received.extend(batch)
                rest.set()
                await asyncio.sleep(0.1)  # handling the batch; the rest and the end arrive meanwhile
            streams.close()
            return received

    assert asyncio.run(main()) == [b'{"piece":"a"}', b'{"piece":"b"}', b'{"piece":"c"}']


def test_an_error_status_raises_with_the_body():
    async def answer(reader, writer):
        body = b'{"error":"Request for unknown model"}'
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
        await writer.drain()
        return True

    async def main():
        async with Server(answer) as server:
            streams = EventStreams("127.0.0.1", server.port)
            with pytest.raises(HTTPStatusError) as info:
                await collect(streams)
            streams.close()
            return info.value

    error = asyncio.run(main())
    assert error.status == 404 and error.body == b'{"error":"Request for unknown model"}'


def test_closing_a_stream_midway_closes_its_connection():
    async def answer(reader, writer):
        writer.write(HEAD + chunk(event("a")))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(1), 5) == b""  # the client closed the connection
        return False

    async def main():
        async with Server(answer) as server:
            streams = EventStreams("127.0.0.1", server.port)
            events = streams.events("/p", b"{}")
            assert await events.__anext__() == [b'{"piece":"a"}']
            await events.aclose()
            await asyncio.wait_for(server.closed.wait(), 5)  # the server saw the connection close
            streams.close()
            return True

    assert asyncio.run(main())


def test_an_idle_connection_the_server_closed_is_replaced():
    async def answer(reader, writer):
        writer.write(HEAD + chunk(event("a")) + END)
        await writer.drain()
        return False  # then closes the connection, as a server's idle timeout would

    async def main():
        async with Server(answer) as server:
            streams = EventStreams("127.0.0.1", server.port)
            first = await collect(streams)
            await asyncio.sleep(0.1)
            second = await collect(streams)
            streams.close()
            return server.connections, first, second

    connections, first, second = asyncio.run(main())
    assert first == second == [b'{"piece":"a"}'] and connections == 2


def test_a_connection_that_closes_midway_raises():
    async def answer(reader, writer):
        writer.write(HEAD + chunk(event("a")))
        await writer.drain()
        return False

    async def main():
        async with Server(answer) as server:
            streams = EventStreams("127.0.0.1", server.port)
            with pytest.raises(ConnectionError, match="closed the connection"):
                await collect(streams)
            streams.close()

    asyncio.run(main())

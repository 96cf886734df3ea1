"""Server-sent events from tritonserver's HTTP endpoint, read on kept-alive connections with httptools.

A streamed request is one POST to Triton's ``generate_stream``; its answer is a chunked body of
``data: {...}`` events. :class:`EventStreams` writes the request in one send, has httptools
parse the answer in C, and hands over every event that arrived in one read at once: under load
a stream's events come in bursts, and the endpoint then wakes once per burst, not per event.
Closing a stream before its end closes its connection, which makes Triton cancel the request.
(aiohttp's client did the same job with about twice the endpoint's CPU per request; bench/README.md.)
"""

import asyncio
from typing import AsyncIterator, List, Optional

import httptools

__all__ = ["EventStreams", "HTTPStatusError"]

_PAUSE_AT = 4096  # events held for a slow consumer before the connection stops being read


class HTTPStatusError(Exception):
    """Triton answered with another status than 200 (``body``: its JSON error)."""

    def __init__(self, status: int, body: bytes):
        super().__init__(f"HTTP {status}: {body[:200]!r}")
        self.status = status
        self.body = body


class EventStreams:
    """POSTs whose answers are server-sent events, on a pool of kept-alive connections to one server.

    Args:
        host, port: the server.
        headers: sent with every request (besides Host, Content-Type and Content-Length).
    """

    def __init__(self, host: str, port: int, headers: Optional[dict] = None):
        self._host, self._port = host, port
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self._head = f"Host: {host}:{port}\r\nContent-Type: application/json\r\n{extra}".encode()
        self._idle: List[_Connection] = []

    async def events(self, path: str, body: bytes) -> AsyncIterator[List[bytes]]:
        """The events (each without ``data: ``) of the answer to ``POST path``, as they arrive.

        Raises:
            HTTPStatusError: the answer's status was not 200.
            ConnectionError: the connection failed or closed before the answer ended.
        """
        request = b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s" % (path.encode(), self._head, len(body), body)
        connection = await self._answering(request)
        try:
            while True:
                await connection.arrival()
                complete = connection.complete  # before taking: more may arrive while the events are handled
                events = connection.take()
                if connection.status != 200:
                    if complete:
                        raise HTTPStatusError(connection.status, b"".join(connection.error_body))
                elif events:
                    yield events
                if complete:
                    break
        finally:
            if connection.complete and connection.keep_alive and not connection.closed:
                self._idle.append(connection)
            else:
                connection.close()  # mid-answer: Triton cancels the request

    def close(self) -> None:
        """Close the idle connections (the streams still open close their own)."""
        while self._idle:
            self._idle.pop().close()

    async def _answering(self, request: bytes) -> "_Connection":
        """A connection ``request`` was sent on: an idle one if the server has not closed it meanwhile."""
        while self._idle:
            connection = self._idle.pop()
            if connection.closed:
                continue
            connection.send(request)
            try:
                await connection.arrival()
                return connection
            except ConnectionError:  # closed by the server as the request went out: send it again
                connection.close()
        _, connection = await asyncio.get_running_loop().create_connection(_Connection, self._host, self._port)
        connection.send(request)
        return connection


class _Connection(asyncio.Protocol):
    """One connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self):
        self._transport: Optional[asyncio.Transport] = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: Optional[asyncio.Future] = None
        self._events: List[bytes] = []
        self._partial = b""
        self._paused = False
        self._failure: Optional[Exception] = None
        self.closed = False
        self.status = 0
        self.complete = False
        self.keep_alive = False
        self.error_body: List[bytes] = []

    # -- the consumer's side ---------------------------------------------------------------------

    def send(self, request: bytes) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._events, self._partial, self.error_body = [], b"", []
        self.status, self.complete, self.keep_alive = 0, False, False
        self._transport.write(request)

    async def arrival(self) -> None:
        """Wait until events, the answer's end or a failure are there."""
        if not (self._events or self.complete or self._failure):
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._failure is not None and not self.complete:
            raise self._failure

    def take(self) -> List[bytes]:
        events, self._events = self._events, []
        if self._paused:
            self._paused = False
            self._transport.resume_reading()
        return events

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    # -- asyncio's side ----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:
        self._transport = transport  # asyncio sets TCP_NODELAY

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._failure = ConnectionError(f"tritonserver's answer could not be parsed: {exc}")
            self.close()
        if len(self._events) >= _PAUSE_AT and not self._paused:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        if not self.complete and self._failure is None:
            self._failure = ConnectionError(f"tritonserver closed the connection ({exc or 'no error'})")
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- httptools' callbacks ----------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self.status != 200:
            self.error_body.append(body)
            return
        *ended, self._partial = (self._partial + body).split(b"\n\n")
        self._events.extend(event[6:] for event in ended if event.startswith(b"data: "))

    def on_message_complete(self) -> None:
        self.complete = True

"""gRPC calls over HTTP/2 connections, spoken with ``h2`` on the endpoint's event loop.

The endpoint's way to Triton is gRPC, and each streamed piece is one gRPC message. ``grpc.aio``
spent about 60 µs of CPU per message (its poller threads, then handing the message to the event
loop); reading the frames here on the loop itself costs a fraction of that (bench/README.md,
"The OpenAI endpoint's hop to Triton"). Only what the endpoint needs: calls of one method path
with metadata, messages written and read as bytes (the caller (de)serialises them), a call
half-closed (``END_STREAM``: no more messages from us; the server ends the call once it answered)
or cancelled (``RST_STREAM``, which Triton sees as the client cancelling), the status of its end.
No TLS, no compression, no deadlines: the peer is the tritonserver the library started.

What the protocol asks of a client (grpc/grpc doc/PROTOCOL-HTTP2.md, RFC 9113):

- Flow control: what the server sends is acknowledged (its window given back) as the call's
  reader takes it, so a call nobody reads stops the server at the call's window; the bytes of a
  call that ended are given back to the connection at once.
- Statuses: ``grpc-status`` when the server sent one, else one made from what came
  (doc/http-grpc-status-mapping.md for an HTTP status, the RST_STREAM table for a reset).
- Connections: new calls go on one connection at a time. One that cannot take another call (its
  stream ids ran out, or the server's ``SETTINGS_MAX_CONCURRENT_STREAMS`` is reached) or that
  received ``GOAWAY`` takes no new call: it finishes those it has (a ``GOAWAY`` ends those the
  server did not accept, ``UNAVAILABLE``), then is closed; the next calls go on a new connection.
"""

import asyncio
from typing import Optional, Set, Tuple

from .grpc_call import Call
from .grpc_connection import CONNECTION_WINDOW, INITIAL_WINDOW, STREAM_WINDOW, Connection
from .grpc_status import CANCELLED, INTERNAL, NOT_FOUND, OK, UNAVAILABLE, RpcError, StatusCode

__all__ = [
    "GrpcChannel", "Call", "RpcError", "StatusCode", "OK", "CANCELLED", "NOT_FOUND", "UNAVAILABLE", "INTERNAL",
]


class GrpcChannel:
    """Calls to one gRPC server (make it and use it on one event loop); connects on first use, and
    again when the connection was lost or takes no new call.

    Args:
        target: ``host:port``.
        metadata: sent with every call, as ``(name, value)`` (names lower case).
        stream_window: the bytes the server may send on a call ahead of its reader.
        connection_window: the bytes it may send ahead on a connection, all calls together (at
            least 65535). A call nobody reads holds up to its stream window of it, one being read
            less than a quarter of the smaller window: keep it well above what the calls hold.
    """

    def __init__(self, target: str, metadata: Tuple[Tuple[str, str], ...] = (), *,
                 stream_window: int = STREAM_WINDOW, connection_window: int = CONNECTION_WINDOW):
        if not (1 <= stream_window <= CONNECTION_WINDOW
                and INITIAL_WINDOW <= connection_window <= CONNECTION_WINDOW):
            raise ValueError(f"windows of 1 to 2**31-1 bytes expected (a connection's at least {INITIAL_WINDOW}),"
                             f" not {stream_window} and {connection_window}")
        host, _, port = target.rpartition(":")
        self._host, self._port = host.strip("[]"), int(port)
        self._authority = target.encode()
        self._metadata = [(name.encode(), value.encode()) for name, value in metadata]
        self._windows = (stream_window, connection_window)
        self._connection: Optional[Connection] = None  # where new calls go
        self._connections: Set[Connection] = set()  # all open: that one, and those finishing their calls
        self._connecting: Optional[asyncio.Future] = None

    async def open(self, path: str) -> "Call":
        """A call of the method at ``path`` (``/package.Service/Method``), headers sent."""
        headers = [
            (b":method", b"POST"), (b":scheme", b"http"), (b":path", path.encode()),
            (b":authority", self._authority), (b"content-type", b"application/grpc"), (b"te", b"trailers"),
            *self._metadata,
        ]
        while True:
            connection = await self._connected()
            # (one that took no more calls meanwhile, or now, finishes those it has: the next one takes it)
            call = connection.open(headers) if connection.usable else None
            if call is not None:
                return call

    async def unary(self, path: str, message: bytes) -> bytes:
        """The one answer of a unary call."""
        call = await self.open(path)
        try:
            await call.write(message, end=True)
            answer = await call.read()
            if answer is None or await call.read() is not None:
                raise RpcError(INTERNAL, "a unary call did not answer one message")
            return answer
        finally:
            call.cancel()

    def close(self) -> None:
        """Close the connections (calls still running end with ``UNAVAILABLE``)."""
        self._connection = None
        for connection in list(self._connections):
            connection.close()

    async def _connected(self) -> "Connection":
        connection = self._connection
        if connection is not None and connection.usable:
            return connection
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _connect(self) -> "Connection":
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                lambda: Connection(*self._windows, self._connections), self._host, self._port)
        except OSError as exc:
            raise RpcError(UNAVAILABLE, f"cannot connect to {self._host}:{self._port}: {exc}") from None
        # Calls start once the server's SETTINGS came (its preface, RFC 9113 §3.4), so that its
        # SETTINGS_MAX_CONCURRENT_STREAMS holds from the first call on.
        failed = await connection.settled
        if failed is not None:
            raise failed
        self._connection = connection
        return connection

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
import collections
import enum
from typing import Deque, Dict, List, Optional, Set, Tuple
from urllib.parse import unquote

from h2.config import H2Configuration
from h2.connection import ConnectionInputs, ConnectionState, H2Connection, H2ConnectionStateMachine
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    RemoteSettingsChanged,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import H2Error, NoAvailableStreamIDError, TooManyStreamsError
from h2.settings import SettingCodes

__all__ = [
    "Channel", "Call", "RpcError", "StatusCode", "OK", "CANCELLED", "NOT_FOUND", "UNAVAILABLE", "INTERNAL",
]


class StatusCode(enum.IntEnum):
    """The gRPC status codes (grpc/grpc doc/statuscodes.md)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


OK, CANCELLED, NOT_FOUND, INTERNAL, UNAVAILABLE = (
    StatusCode.OK, StatusCode.CANCELLED, StatusCode.NOT_FOUND, StatusCode.INTERNAL, StatusCode.UNAVAILABLE,
)

# The status of an answer without grpc-status, by its HTTP status (doc/http-grpc-status-mapping.md;
# any other, 200 included, is UNKNOWN), and of a call the server reset, by the RST_STREAM error
# code (PROTOCOL-HTTP2.md, "Errors"; any other is INTERNAL).
_HTTP_STATUS_CODES = {
    400: StatusCode.INTERNAL, 401: StatusCode.UNAUTHENTICATED, 403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.UNIMPLEMENTED, 429: StatusCode.UNAVAILABLE, 431: StatusCode.INTERNAL,
    502: StatusCode.UNAVAILABLE, 503: StatusCode.UNAVAILABLE, 504: StatusCode.UNAVAILABLE,
}
_RESET_CODES = {
    ErrorCodes.REFUSED_STREAM: StatusCode.UNAVAILABLE, ErrorCodes.CANCEL: StatusCode.CANCELLED,
    ErrorCodes.ENHANCE_YOUR_CALM: StatusCode.RESOURCE_EXHAUSTED,
    ErrorCodes.INADEQUATE_SECURITY: StatusCode.PERMISSION_DENIED,
}

# What the server may send ahead of a call's reader: an unread call holds at most this much here
# (as the endpoint holds at most 1 MiB unsent to a client, TritonConfig.openai_max_unread_bytes), and
# a reader that keeps up never leaves the server less than a quarter of it (_ack_batch).
_STREAM_WINDOW = 1 << 20
# The connection's: the largest HTTP/2 allows, so that calls nobody reads (1 MiB each) never
# stop the others; the stream windows are what pushes back.
_CONNECTION_WINDOW = (1 << 31) - 1
_INITIAL_WINDOW = 65535  # RFC 9113 §6.9.2: a new connection's window, before any WINDOW_UPDATE


class RpcError(Exception):
    """A call ended with a gRPC status other than OK.

    Attributes:
        code: the gRPC status code (a :class:`StatusCode`: ``NOT_FOUND``, ``UNAVAILABLE``...).
        details: the server's message, or what was wrong with its answer.
    """

    def __init__(self, code: int, details: str):
        code = StatusCode(code)
        super().__init__(f"gRPC status {code.name}: {details}")
        self.code = code
        self.details = details


class Channel:
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
                 stream_window: int = _STREAM_WINDOW, connection_window: int = _CONNECTION_WINDOW):
        if not (1 <= stream_window <= _CONNECTION_WINDOW
                and _INITIAL_WINDOW <= connection_window <= _CONNECTION_WINDOW):
            raise ValueError(f"windows of 1 to 2**31-1 bytes expected (a connection's at least {_INITIAL_WINDOW}),"
                             f" not {stream_window} and {connection_window}")
        host, _, port = target.rpartition(":")
        self._host, self._port = host.strip("[]"), int(port)
        self._authority = target.encode()
        self._metadata = [(name.encode(), value.encode()) for name, value in metadata]
        self._windows = (stream_window, connection_window)
        self._connection: Optional[_Connection] = None  # where new calls go
        self._connections: Set[_Connection] = set()  # all open: that one, and those finishing their calls
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

    async def _connected(self) -> "_Connection":
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

    async def _connect(self) -> "_Connection":
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                lambda: _Connection(*self._windows, self._connections), self._host, self._port)
        except OSError as exc:
            raise RpcError(UNAVAILABLE, f"cannot connect to {self._host}:{self._port}: {exc}") from None
        # Calls start once the server's SETTINGS came (its preface, RFC 9113 §3.4), so that its
        # SETTINGS_MAX_CONCURRENT_STREAMS holds from the first call on.
        failed = await connection.settled
        if failed is not None:
            raise failed
        self._connection = connection
        return connection


class Call:
    """One gRPC call: its messages written and read in order, one reader and one writer at a time."""

    __slots__ = ("_connection", "stream_id", "_messages", "_partial", "_partial_size", "_needed", "_owed",
                 "_ack_batch", "_status", "_waiter", "_window_waiter", "_half_closed")

    def __init__(self, connection: "_Connection", stream_id: int, ack_batch: int):
        self._connection = connection
        self.stream_id = stream_id
        self._messages: Deque[bytes] = collections.deque()
        self._partial: List[bytes] = []  # the start of a message whose end has not arrived
        self._partial_size = 0
        self._needed = 0  # the bytes that message counts (or 5, for its length)
        # Bytes the server sent that no longer wait here (read, or not of a whole message) and are
        # not acknowledged yet: given back once they reach ack_batch. Below 0 while whole messages
        # hold bytes given back as the start of a message.
        self._owed = 0
        self._ack_batch = ack_batch
        self._status: Optional[RpcError] = None  # set when the call ended (code OK included)
        self._waiter: Optional[asyncio.Future] = None  # the reader's, for a message
        self._window_waiter: Optional[asyncio.Future] = None  # the writer's, for the server's window
        self._half_closed = False  # END_STREAM sent

    def done(self) -> bool:
        """Whether the call ended (its status came, it was cancelled, or the connection was lost)."""
        return self._status is not None

    async def write(self, message: bytes, end: bool = False) -> None:
        """Send one message (``end``: the last the call will send).

        Raises:
            RpcError: the call had ended, or ended while the message waited for the server's window.
        """
        await self._connection.send(self, len(message).to_bytes(5, "big") + message, end)

    async def read(self) -> Optional[bytes]:
        """The next message; None once the call ended with OK.

        Raises:
            RpcError: the call ended with another status.
        """
        messages = self._messages
        while not messages:
            status = self._status
            if status is not None:
                if status.code == OK:
                    return None
                raise status
            self._waiter = self._connection.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        message = messages.popleft()
        owed = self._owed + len(message) + 5
        if owed >= self._ack_batch and self._status is None:  # (an ended call's bytes were given back)
            self._connection.acknowledge(self.stream_id, owed)
            owed = 0
        self._owed = owed
        return message

    def done_writing(self) -> None:
        """Say that no more messages come (``END_STREAM``): the server ends the call once it has
        answered what it got, without anything being cancelled."""
        if self._status is None:
            self._connection.end_stream(self)

    def cancel(self) -> None:
        """End the call (``RST_STREAM CANCEL`` if it had not ended): the server sees it cancelled."""
        if self._status is None:
            self._connection.reset(self, ErrorCodes.CANCEL)
            self._end(RpcError(CANCELLED, "cancelled by the client"))

    # -- from the connection --

    def _data(self, data: bytes, length: int) -> None:
        """Take the bytes of a DATA frame (``length``: what they count in the window, padding
        included). Whole messages are acknowledged as they are read; the rest at once: padding, and
        the start of a message, else one larger than the window would never arrive."""
        owed = self._owed + length
        if self._partial:  # a message's start came before: joined once the rest is here
            self._partial.append(data)
            self._partial_size += len(data)
            if self._partial_size < self._needed:
                if owed >= self._ack_batch:
                    self._connection.acknowledge(self.stream_id, owed)
                    owed = 0
                self._owed = owed
                return
            data = b"".join(self._partial)
            self._partial = []
        offset, size = 0, len(data)
        while size - offset >= 5:
            if data[offset]:
                self._owed = owed - offset
                self._connection.reset(self, ErrorCodes.CANCEL)
                self._end(RpcError(INTERNAL, "the server sent a compressed message"))
                return
            end = offset + 5 + int.from_bytes(data[offset + 1 : offset + 5], "big")
            if end > size:
                break
            self._messages.append(data[offset + 5 : end])
            offset = end
        if offset < size:
            self._partial = [data[offset:]]
            self._partial_size = size - offset
            self._needed = end - offset if size - offset >= 5 else 5
        owed -= offset  # whole messages are owed when read
        if owed >= self._ack_batch:
            self._connection.acknowledge(self.stream_id, owed)
            owed = 0
        self._owed = owed
        if self._messages:
            self._wake()

    def _end(self, status: RpcError) -> None:
        if self._status is None:
            self._status = status
            # What the server sent and was not given back: the connection's window must not lose it
            # (the messages stay to be read).
            held = self._owed + sum(map(len, self._messages)) + 5 * len(self._messages)
            if held > 0:
                self._connection.acknowledge(self.stream_id, held)
            self._wake()
            self._wake_writer()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_writer(self) -> None:
        waiter = self._window_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _StateMachine(H2ConnectionStateMachine):
    """h2's connection states, except that a ``GOAWAY`` received leaves the connection open: h2
    closes it at once (python-hyper/h2#1181), and then refuses every frame after it, those of the
    calls the server accepted and still answers (RFC 9113 §6.8 lets them finish). No call starts
    on such a connection (_Connection._goaway)."""

    def process_input(self, input_: ConnectionInputs) -> list:
        if input_ is ConnectionInputs.RECV_GOAWAY and self.state is ConnectionState.CLIENT_OPEN:
            return []
        return super().process_input(input_)


class _Connection(asyncio.Protocol):
    """One HTTP/2 connection: h2's state, the calls on it by stream id."""

    def __init__(self, stream_window: int, connection_window: int, connections: Set["_Connection"]):
        self.loop = asyncio.get_running_loop()
        self._h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self._h2.state_machine = _StateMachine()
        self._stream_window, self._connection_window = stream_window, connection_window
        # Read bytes are acknowledged in batches of a quarter window (h2 sends WINDOW_UPDATE at half).
        self._ack_batch = max(1, min(stream_window, connection_window) // 4)
        self._connections = connections  # the channel's: this one is in it while open
        self._calls: Dict[int, Call] = {}
        self._transport: Optional[asyncio.Transport] = None
        self.settled = self.loop.create_future()  # once the server's SETTINGS came: None, or why not
        self._closing: Optional[RpcError] = None  # why no call may start here any more
        self._lost: Optional[RpcError] = None  # why the connection is closed
        self._blocked: List[Call] = []  # calls whose writer waits for the server's window

    @property
    def usable(self) -> bool:
        """Whether a new call may start here."""
        return self._closing is None

    def open(self, headers) -> Optional[Call]:
        """A new call, or None where this connection takes no more (it finishes its calls)."""
        if self._closing is not None:
            raise self._closing
        h2 = self._h2
        try:
            stream_id = h2.get_next_available_stream_id()
            h2.send_headers(stream_id, headers)
        except NoAvailableStreamIDError:
            self.drain(RpcError(UNAVAILABLE, "the connection's stream ids ran out"))
            return None
        except TooManyStreamsError:
            limit = h2.remote_settings.max_concurrent_streams
            if not self._calls:
                raise RpcError(UNAVAILABLE, f"the server takes no call (SETTINGS_MAX_CONCURRENT_STREAMS {limit})") \
                    from None
            self.drain(RpcError(UNAVAILABLE, f"the server's SETTINGS_MAX_CONCURRENT_STREAMS ({limit}) was reached"))
            return None
        call = self._calls[stream_id] = Call(self, stream_id, self._ack_batch)
        self._flush()
        return call

    async def send(self, call: Call, data: bytes, end: bool) -> None:
        h2 = self._h2
        while True:
            status = call._status
            if status is not None:  # ended (before, or while waiting for the window)
                raise status if status.code != OK else RpcError(CANCELLED, "the call had ended")
            size = min(len(data), h2.local_flow_control_window(call.stream_id), h2.max_outbound_frame_size)
            if size == len(data):
                h2.send_data(call.stream_id, data, end_stream=end)
                call._half_closed = end
                self._flush()
                return
            if size:
                h2.send_data(call.stream_id, data[:size])
                self._flush()
                data = data[size:]
            else:  # woken by a WINDOW_UPDATE, new SETTINGS, or the call's end (GOAWAY, cancel, a lost connection)
                call._window_waiter = self.loop.create_future()
                self._blocked.append(call)
                try:
                    await call._window_waiter
                finally:
                    call._window_waiter = None

    def end_stream(self, call: Call) -> None:
        if self._lost is None:
            try:
                self._h2.end_stream(call.stream_id)
            except H2Error:  # already half-closed, or closed on h2's side
                return
            call._half_closed = True
            self._flush()

    def reset(self, call: Call, code: ErrorCodes) -> None:
        if self._lost is None:
            try:
                self._h2.reset_stream(call.stream_id, code)
            except H2Error:  # already closed on h2's side
                pass
            self._flush()
        self._forget(call.stream_id)

    def acknowledge(self, stream_id: int, size: int) -> None:
        """Give ``size`` bytes back to the server's windows (read, or never to be)."""
        if self._lost is None:
            self._h2.acknowledge_received_data(size, stream_id)
            self._flush()

    def drain(self, why: RpcError) -> None:
        """Take no new call (``why``); close once the calls here ended."""
        if self._closing is None:
            self._closing = why
        if not self._calls:
            self._shut(why, goodbye=True)

    def close(self) -> None:
        self._shut(RpcError(UNAVAILABLE, "the channel was closed"), goodbye=True)

    def _forget(self, stream_id: int) -> Optional[Call]:
        """The call of ``stream_id``, which ended: no longer here (a connection draining closes)."""
        call = self._calls.pop(stream_id, None)
        if call is not None and not self._calls and self._closing is not None and self._lost is None:
            self._shut(self._closing, goodbye=True)
        return call

    def _flush(self) -> None:
        data = self._h2.data_to_send()
        if data and self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def _shut(self, why: RpcError, goodbye: bool) -> None:
        """Close the connection (``goodbye``: with a GOAWAY of ours, RFC 9113 §6.8); calls still
        here end with ``why``."""
        if self._lost is None:
            self._lost = why
            if self._closing is None:
                self._closing = why
            transport = self._transport
            if transport is not None and not transport.is_closing():
                if goodbye:
                    try:
                        self._h2.close_connection()
                    except H2Error:
                        pass
                self._flush()
                transport.close()
        if not self.settled.done():
            self.settled.set_result(why)
        calls = list(self._calls.values())
        self._calls.clear()
        for call in calls:
            call._end(why)
        self._open_window()

    def _open_window(self) -> None:
        blocked, self._blocked = self._blocked, []
        for call in blocked:
            call._wake_writer()

    # -- asyncio.Protocol --

    def connection_made(self, transport) -> None:
        self._transport = transport
        self._connections.add(self)
        h2 = self._h2
        h2.initiate_connection()
        h2.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: self._stream_window})
        if self._connection_window > _INITIAL_WINDOW:
            h2.increment_flow_control_window(self._connection_window - _INITIAL_WINDOW)
        self._flush()

    def connection_lost(self, exc) -> None:
        self._connections.discard(self)
        why = f"the connection to the server was lost{f': {exc}' if exc else ''}"
        self._shut(RpcError(UNAVAILABLE, why), goodbye=False)

    def data_received(self, data: bytes) -> None:
        try:
            events = self._h2.receive_data(data)
        except H2Error as exc:
            self._flush()  # h2's GOAWAY saying why
            self._shut(RpcError(UNAVAILABLE, f"HTTP/2 protocol error from the server: {exc}"), goodbye=False)
            return
        calls = self._calls
        for event in events:
            if type(event) is DataReceived:
                call = calls.get(event.stream_id)
                if call is not None:
                    call._data(event.data, event.flow_controlled_length)
                elif self._lost is None:  # a call that ended: its bytes go back to the connection's window
                    self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif type(event) in (ResponseReceived, TrailersReceived):
                call = calls.get(event.stream_id)
                if call is not None:
                    self._headers(call, event.headers, type(event) is ResponseReceived)
            elif type(event) is StreamEnded:
                call = calls.get(event.stream_id)
                if call is not None:  # its end had no grpc-status (200: UNKNOWN, the mapping says)
                    self._ended_by_server(call, RpcError(StatusCode.UNKNOWN, "the call ended without a gRPC status"))
            elif type(event) is StreamReset:
                call = self._forget(event.stream_id)
                if call is not None:
                    code = event.error_code
                    call._end(RpcError(_RESET_CODES.get(code, INTERNAL),
                                       f"the server reset the call (HTTP/2 error {getattr(code, 'name', code)})"))
            elif type(event) is WindowUpdated:  # the server's window may have grown
                self._open_window()
            elif type(event) is RemoteSettingsChanged:
                if not self.settled.done():
                    self.settled.set_result(None)
                self._open_window()
            elif type(event) is ConnectionTerminated:
                self._goaway(event)
        self._flush()

    def _headers(self, call: Call, headers, response: bool) -> None:
        """Response headers or trailers: the call's end when they carry its status, or when the
        response is no gRPC answer (another HTTP status, another content-type)."""
        values = dict(headers)
        code = values.get(b"grpc-status")
        if code is None:
            if response:
                status, content_type = values.get(b":status", b""), values.get(b"content-type", b"")
                if status != b"200" or not _is_grpc(content_type):
                    self.reset(call, ErrorCodes.CANCEL)  # its body is not read
                    http_code = int(status) if status.isdigit() else 0
                    call._end(RpcError(_HTTP_STATUS_CODES.get(http_code, StatusCode.UNKNOWN),
                                       f"no gRPC answer: HTTP status {status.decode('latin-1')},"
                                       f" content-type {content_type.decode('latin-1')!r}"))
            return  # else the status comes with the trailers (StreamEnded says if not)
        details = unquote(values.get(b"grpc-message", b"").decode("utf-8", "replace"))
        try:
            status = StatusCode(int(code)) if code.isdigit() else None
        except ValueError:
            status = None
        if status is None:
            status, details = StatusCode.UNKNOWN, f"grpc-status {code.decode('latin-1')!r}: {details}"
        self._ended_by_server(call, RpcError(status, details))

    def _ended_by_server(self, call: Call, status: RpcError) -> None:
        if not call._half_closed and self._lost is None:
            # Ended before our END_STREAM: RST_STREAM NO_ERROR frees the stream on both sides
            # (PROTOCOL-HTTP2.md, "Early Server Closure"), no longer counted against the server's
            # SETTINGS_MAX_CONCURRENT_STREAMS.
            try:
                self._h2.reset_stream(call.stream_id, ErrorCodes.NO_ERROR)
            except H2Error:  # the server reset it too
                pass
        self._forget(call.stream_id)
        call._end(status)

    def _goaway(self, event: ConnectionTerminated) -> None:
        """The server takes no new call here: those after ``last_stream_id`` never ran (retry
        elsewhere: UNAVAILABLE), the others go on; the connection closes after the last."""
        code = getattr(event.error_code, "name", event.error_code)
        last = event.last_stream_id or 0
        never_ran = RpcError(UNAVAILABLE, f"the server went away (GOAWAY {code}) before the call started")
        for stream_id in [s for s in self._calls if s > last]:
            self._forget(stream_id)._end(never_ran)
        self._open_window()
        self.drain(RpcError(UNAVAILABLE, f"the server is going away (GOAWAY {code})"))


def _is_grpc(content_type: bytes) -> bool:
    """``application/grpc``, alone or with ``+`` or ``;`` after it (not ``application/grpc-web``)."""
    return content_type.startswith(b"application/grpc") and content_type[16:17] in (b"", b"+", b";")

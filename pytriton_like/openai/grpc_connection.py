"""One HTTP/2 connection to a gRPC server (asyncio protocol, h2): the calls on it by stream id,
flow control, statuses from headers, trailers and resets, GOAWAY.

See grpc_channel.py for what the protocol asks of a client; the calls themselves are grpc_call.py's.
"""

import asyncio
from typing import Dict, List, Optional, Set
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

from .grpc_call import Call
from .grpc_status import CANCELLED, HTTP_STATUS_CODES, INTERNAL, OK, RESET_CODES, UNAVAILABLE, RpcError, StatusCode, is_grpc

__all__ = ["Connection", "STREAM_WINDOW", "CONNECTION_WINDOW", "INITIAL_WINDOW"]

# What the server may send ahead of a call's reader: an unread call holds at most this much here
# (as the endpoint holds at most 1 MiB unsent to a client, TritonConfig.openai_max_unread_bytes), and
# a reader that keeps up never leaves the server less than a quarter of it (_ack_batch).
STREAM_WINDOW = 1 << 20
# The connection's: the largest HTTP/2 allows, so that calls nobody reads (1 MiB each) never
# stop the others; the stream windows are what pushes back.
CONNECTION_WINDOW = (1 << 31) - 1
INITIAL_WINDOW = 65535  # RFC 9113 §6.9.2: a new connection's window, before any WINDOW_UPDATE


class _StateMachine(H2ConnectionStateMachine):
    """h2's connection states, except that a ``GOAWAY`` received leaves the connection open: h2
    closes it at once (python-hyper/h2#1181), and then refuses every frame after it, those of the
    calls the server accepted and still answers (RFC 9113 §6.8 lets them finish). No call starts
    on such a connection (Connection._goaway)."""

    def process_input(self, input_: ConnectionInputs) -> list:
        if input_ is ConnectionInputs.RECV_GOAWAY and self.state is ConnectionState.CLIENT_OPEN:
            return []
        return super().process_input(input_)


class Connection(asyncio.Protocol):
    """One HTTP/2 connection: h2's state, the calls on it by stream id."""

    def __init__(self, stream_window: int, connection_window: int, connections: Set["Connection"]):
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
        if self._connection_window > INITIAL_WINDOW:
            h2.increment_flow_control_window(self._connection_window - INITIAL_WINDOW)
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
                    call._end(RpcError(RESET_CODES.get(code, INTERNAL),
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
                if status != b"200" or not is_grpc(content_type):
                    self.reset(call, ErrorCodes.CANCEL)  # its body is not read
                    http_code = int(status) if status.isdigit() else 0
                    call._end(RpcError(HTTP_STATUS_CODES.get(http_code, StatusCode.UNKNOWN),
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

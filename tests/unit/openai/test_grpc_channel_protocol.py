"""The endpoint's HTTP/2 gRPC channel against a small HTTP/2 server made of h2 (server side) on
loopback, for what grpcio's server does not do on demand: flow control seen from the server, GOAWAY,
a low SETTINGS_MAX_CONCURRENT_STREAMS, stream ids running out, answers that are not gRPC's,
resets with each error code."""

import asyncio
from typing import Dict, List, Optional

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    RemoteSettingsChanged,
    RequestReceived,
    StreamEnded,
    StreamReset,
    WindowUpdated,
)
from h2.settings import SettingCodes, Settings
from hyperframe.frame import GoAwayFrame, PingFrame

from pytriton_like.openai import grpc_connection as connection_module
from pytriton_like.openai.grpc_channel import CANCELLED, OK, UNAVAILABLE, GrpcChannel, RpcError, StatusCode

PATH = "/test.Fake/Call"
WAIT_S = 3  # the longest any step may take; each takes milliseconds


def framed(payload: bytes) -> bytes:
    return b"\0" + len(payload).to_bytes(4, "big") + payload


class ServerStream:
    """One call as the fake server sees it: what came, and ways to answer."""

    def __init__(self, connection: "FakeConnection", stream_id: int, headers):
        self.connection = connection
        self.id = stream_id
        self.headers = dict(headers)
        self.received = bytearray()
        self.ended = asyncio.Event()  # the client's END_STREAM or RST_STREAM
        self.came = asyncio.Event()  # DATA or the end
        self.reset_code: Optional[int] = None
        self.blocked = asyncio.Event()  # a send waits: the client's window for this call is 0
        self.sent = 0  # bytes of DATA sent

    def respond(self, status=b"200", content_type=b"application/grpc", end=False, **fields):
        headers = [(b":status", status)]
        if content_type is not None:
            headers.append((b"content-type", content_type))
        headers += [(name.replace("_", "-").encode(), value) for name, value in fields.items()]
        self.connection.h2.send_headers(self.id, headers, end_stream=end)
        self.connection.flush()

    async def send(self, data: bytes) -> None:
        """DATA as the client's windows allow."""
        h2 = self.connection.h2
        while data:
            window = h2.local_flow_control_window(self.id)
            if not window:
                self.blocked.set()
                self.connection.server.changed()
                await self.connection.window_changed()
                continue
            self.blocked.clear()
            size = min(len(data), window, h2.max_outbound_frame_size)
            h2.send_data(self.id, data[:size])
            self.connection.flush()
            self.sent += size
            data = data[size:]
        self.connection.server.changed()

    def trailers(self, status=b"0", message: Optional[bytes] = None) -> None:
        headers = [(b"grpc-status", status)] + ([(b"grpc-message", message)] if message is not None else [])
        self.connection.h2.send_headers(self.id, headers, end_stream=True)
        self.connection.flush()

    def reset(self, code: int) -> None:
        self.connection.h2.reset_stream(self.id, code)
        self.connection.flush()

    def messages(self) -> List[bytes]:
        data, offset, found = bytes(self.received), 0, []
        while offset + 5 <= len(data):
            end = offset + 5 + int.from_bytes(data[offset + 1 : offset + 5], "big")
            if end > len(data):
                break
            found.append(data[offset + 5 : end])
            offset = end
        return found


class FakeConnection(asyncio.Protocol):
    def __init__(self, server: "FakeServer"):
        self.server = server
        self.h2 = H2Connection(H2Configuration(client_side=False, header_encoding=None))
        self.h2.local_settings = Settings(client=False, initial_values=server.settings)
        self.streams: Dict[int, ServerStream] = {}
        self.closed = asyncio.Event()  # the client closed the connection
        self.goaway_received = False
        self._window_waiters: List[asyncio.Future] = []

    def window_changed(self) -> asyncio.Future:
        waiter = asyncio.get_running_loop().create_future()
        self._window_waiters.append(waiter)
        return waiter

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data and not self.transport.is_closing():
            self.transport.write(data)

    def goaway(self, last_stream_id: int, error_code: int = 0) -> None:
        """GOAWAY, then a PING in the same write as gRPC's servers do; written as frames, since h2
        would close the server's side of the connection with it."""
        goaway = GoAwayFrame(0)
        goaway.last_stream_id, goaway.error_code = last_stream_id, error_code
        self.transport.write(goaway.serialize() + PingFrame(0, opaque_data=b"goaway!!").serialize())

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.server.connections.append(self)
        self.h2.initiate_connection()
        self.flush()
        self.server.changed()

    def connection_lost(self, exc) -> None:
        self.closed.set()
        self._wake()
        self.server.changed()

    def data_received(self, data: bytes) -> None:
        for event in self.h2.receive_data(data):
            if isinstance(event, RequestReceived):
                stream = self.streams[event.stream_id] = ServerStream(self, event.stream_id, event.headers)
                self.server.start(stream)
            elif isinstance(event, DataReceived):
                stream = self.streams[event.stream_id]
                stream.received += event.data
                stream.came.set()
                if self.server.acknowledge:
                    self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, (StreamEnded, StreamReset)):
                stream = self.streams[event.stream_id]
                if isinstance(event, StreamReset):
                    stream.reset_code = event.error_code
                    self._wake()
                stream.ended.set()
                stream.came.set()
            elif isinstance(event, (WindowUpdated, RemoteSettingsChanged)):
                self._wake()
            elif isinstance(event, ConnectionTerminated):
                self.goaway_received = True
        self.flush()
        self.server.changed()

    def _wake(self) -> None:
        waiters, self._window_waiters = self._window_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class FakeServer:
    """Each call handed to ``handler(stream)`` as a task of its own.

    Args:
        settings: the server's SETTINGS (``SettingCodes`` to values).
        acknowledge: whether the client's DATA is acknowledged (else the windows only shrink).
    """

    def __init__(self, handler, settings=None, acknowledge=True):
        self.handler = handler
        self.settings = settings or {}
        self.acknowledge = acknowledge
        self.connections: List[FakeConnection] = []
        self._tasks = set()
        self._changes: List[asyncio.Future] = []

    def changed(self) -> None:
        changes, self._changes = self._changes, []
        for change in changes:
            if not change.done():
                change.set_result(None)

    async def until(self, predicate) -> None:
        """Wait until ``predicate()`` holds, checked after each thing the server saw or did."""
        while not predicate():
            change = asyncio.get_running_loop().create_future()
            self._changes.append(change)
            await change

    async def stream(self, call, connection: int = -1) -> ServerStream:
        """The server's side of ``call`` (on the last connection, or that numbered), once it came."""
        await self.until(lambda: self.connections and call.stream_id in self.connections[connection].streams)
        return self.connections[connection].streams[call.stream_id]

    def start(self, stream: ServerStream) -> None:
        task = asyncio.ensure_future(self.handler(stream))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def __aenter__(self) -> "FakeServer":
        self._server = await asyncio.get_running_loop().create_server(lambda: FakeConnection(self), "127.0.0.1", 0)
        self.target = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc_info) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for connection in self.connections:
            connection.transport.close()
        self._server.close()
        await self._server.wait_closed()


def serve(handler, body, channel_args=None, **server_args):
    """``body(channel, server)`` against a fake server answering with ``handler``."""

    async def main():
        async with FakeServer(handler, **server_args) as server:
            channel = GrpcChannel(server.target, **(channel_args or {}))
            try:
                return await asyncio.wait_for(body(channel, server), WAIT_S)
            finally:
                channel.close()

    return asyncio.run(main())


async def echo(stream: ServerStream) -> None:
    """Each request answered with itself; OK after the client's END_STREAM."""
    stream.respond()
    answered = 0
    while True:
        stream.came.clear()
        ended = stream.ended.is_set()
        requests = stream.messages()
        for request in requests[answered:]:
            await stream.send(framed(request))
        answered = len(requests)
        if ended:
            break
        await stream.came.wait()
    if stream.reset_code is None:
        stream.trailers()


# -- flow control --

def test_a_call_nobody_reads_stops_the_server_at_its_window_and_reading_lets_it_go_on():
    window = 64 * 1024
    count = 8 * window // 1024  # messages of 1 KiB framed: 8 windows

    async def handler(stream):
        if stream.headers[b":path"] != b"/test.Fake/Unread":
            return await echo(stream)
        stream.respond()
        for index in range(count):
            await stream.send(framed(bytes([index % 256]) * 1019))
        stream.trailers()

    async def body(channel, server):
        unread = await channel.open("/test.Fake/Unread")
        stream = await server.stream(unread)
        await stream.blocked.wait()
        sent_while_unread = stream.sent
        # the connection is not blocked: another call goes on, its bytes far beyond that window
        big = bytes(range(256)) * 1024
        answered = await channel.unary(PATH, big) == big
        await asyncio.sleep(0.05)  # time the server would use to send more, were it let
        still_blocked = stream.blocked.is_set() and stream.sent == sent_while_unread
        messages = []
        while (message := await unread.read()) is not None:
            messages.append(message)
        return sent_while_unread, answered, still_blocked, messages

    sent_while_unread, answered, still_blocked, messages = serve(handler, body, {"stream_window": window})
    assert sent_while_unread == window and answered and still_blocked
    assert messages == [bytes([index % 256]) * 1019 for index in range(count)]


def test_bytes_of_calls_that_ended_or_were_cancelled_unread_go_back_to_the_connection_window():
    # The connection's window is 64 KiB: each call's 48 KiB, never read, must be given back for
    # the next call's to come.
    size = 48 * 1024

    async def handler(stream):
        stream.respond()
        await stream.send(framed(b"x" * size))
        if stream.headers[b":path"] == b"/test.Fake/End":
            stream.trailers()

    async def body(channel, server):
        ended, resets = [], []
        for round_ in range(6):
            call = await channel.open("/test.Fake/End" if round_ % 2 else "/test.Fake/Cancel")
            stream = await server.stream(call)
            await server.until(lambda stream=stream: stream.sent == size + 5)  # the window had room
            if round_ % 2:
                ended.append(call)
            else:
                call.cancel()
                await stream.ended.wait()
                resets.append(stream.reset_code)
        # the ended calls' messages stay to be read
        return [(len(await call.read()), await call.read()) for call in ended], resets, len(server.connections)

    readable, resets, connections = serve(handler, body, {"stream_window": 64 * 1024, "connection_window": 65535})
    assert readable == [(size, None)] * 3 and resets == [ErrorCodes.CANCEL] * 3 and connections == 1


# -- writers waiting for the server's window --

@pytest.mark.parametrize("how, code", [("cancel", CANCELLED), ("goaway", UNAVAILABLE)])
def test_a_writer_waiting_for_the_window_is_woken_by_a_cancel_or_goaway(how, code):
    async def handler(stream):
        stream.respond()
        await stream.ended.wait()

    async def body(channel, server):
        call = await channel.open(PATH)
        writing = asyncio.ensure_future(call.write(b"x" * (1 << 20)))  # the windows: 64 KiB, never given back
        stream = await server.stream(call)
        await server.until(lambda: len(stream.received) == 65535)
        await asyncio.sleep(0.01)  # nothing more comes from the server (that could wake the writer)
        assert not writing.done()
        if how == "cancel":
            call.cancel()
        else:
            server.connections[0].goaway(last_stream_id=0)  # the call never ran
        with pytest.raises(RpcError) as caught:
            await writing
        if how == "goaway":  # and the connection, with no call left, is closed
            await server.connections[0].closed.wait()
        return caught.value.code

    assert serve(handler, body, acknowledge=False) == code


# -- connections: GOAWAY, SETTINGS_MAX_CONCURRENT_STREAMS, stream ids --

def test_after_goaway_the_accepted_call_finishes_the_others_are_unavailable_and_the_connection_closes_after_it():
    async def handler(stream):
        if stream.headers[b":path"] != b"/test.Fake/Long":
            return await echo(stream)
        stream.respond()
        await stream.ended.wait()  # goes on after the GOAWAY until the client's END_STREAM
        for request in stream.messages():
            await stream.send(framed(request))
        stream.trailers()

    async def body(channel, server):
        accepted = await channel.open("/test.Fake/Long")
        refused = await channel.open("/test.Fake/Long")
        await server.stream(refused)
        first = server.connections[0]
        first.goaway(last_stream_id=accepted.stream_id)
        with pytest.raises(RpcError) as caught:
            await refused.read()
        answer = await channel.unary(PATH, b"elsewhere")  # on a new connection
        await accepted.write(b"after goaway", end=True)
        messages = [await accepted.read(), await accepted.read()]
        await first.closed.wait()
        second_open = not server.connections[1].closed.is_set()
        return caught.value.code, answer, messages, len(server.connections), first.goaway_received, second_open

    assert serve(handler, body) == (UNAVAILABLE, b"elsewhere", [b"after goaway", None], 2, True, True)


def test_the_servers_max_concurrent_streams_sends_new_calls_to_a_new_connection():
    async def body(channel, server):
        answers = await asyncio.gather(*(channel.unary(PATH, b"%d" % index) for index in range(3)))
        # each connection took one call and closed once it ended, but the last (where new calls go)
        await asyncio.gather(*(connection.closed.wait() for connection in server.connections[:-1]))
        return answers, len(server.connections), server.connections[-1].closed.is_set()

    answers, connections, last_closed = serve(echo, body, settings={SettingCodes.MAX_CONCURRENT_STREAMS: 1})
    assert answers == [b"0", b"1", b"2"] and connections == 3 and not last_closed


def test_a_server_taking_no_call_is_unavailable():
    async def body(channel, server):
        with pytest.raises(RpcError) as caught:
            await channel.open(PATH)
        return caught.value.code, len(server.connections)

    assert serve(echo, body, settings={SettingCodes.MAX_CONCURRENT_STREAMS: 0}) == (UNAVAILABLE, 1)


def test_stream_ids_running_out_send_new_calls_to_a_new_connection(monkeypatch):
    class TwoIdsLeft(H2Connection):  # real h2, its stream ids nearly used up
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.highest_outbound_stream_id = 2**31 - 5

    monkeypatch.setattr(connection_module, "H2Connection", TwoIdsLeft)

    async def body(channel, server):
        long = await channel.open(PATH)  # id 2**31 - 3, open until the end
        answers = [await channel.unary(PATH, b"a"), await channel.unary(PATH, b"b")]  # 2**31 - 1, then a new connection
        first = server.connections[0]
        closed_while_long_open = first.closed.is_set()
        await long.write(b"last", end=True)
        answers.append(await long.read())
        await first.closed.wait()
        return answers, sorted(first.streams), len(server.connections), closed_while_long_open

    answers, ids, connections, closed_while_long_open = serve(echo, body)
    assert answers == [b"a", b"b", b"last"] and ids == [2**31 - 3, 2**31 - 1]
    assert connections == 2 and not closed_while_long_open


# -- statuses --

@pytest.mark.parametrize("http_status, code", [
    (b"400", StatusCode.INTERNAL), (b"401", StatusCode.UNAUTHENTICATED), (b"403", StatusCode.PERMISSION_DENIED),
    (b"404", StatusCode.UNIMPLEMENTED), (b"429", StatusCode.UNAVAILABLE), (b"431", StatusCode.INTERNAL),
    (b"502", StatusCode.UNAVAILABLE), (b"503", StatusCode.UNAVAILABLE), (b"504", StatusCode.UNAVAILABLE),
    (b"500", StatusCode.UNKNOWN), (b"302", StatusCode.UNKNOWN),
])
def test_an_answer_with_another_http_status_gets_the_code_the_mapping_gives(http_status, code):
    async def handler(stream):
        stream.respond(status=http_status, content_type=b"text/html")
        await stream.send(b"<html>proxy error</html>")

    assert status_of(handler, reset=True) == code


@pytest.mark.parametrize("respond, code", [
    # grpc-status, when there is one, is the call's (a Trailers-Only answer)
    (dict(status=b"503", end=True, grpc_status=b"5"), StatusCode.NOT_FOUND),
    (dict(content_type=b"application/grpc+proto", end=True, grpc_status=b"9"), StatusCode.FAILED_PRECONDITION),
    (dict(content_type=b"application/json"), StatusCode.UNKNOWN),
    (dict(content_type=b"application/grpc-web"), StatusCode.UNKNOWN),
    (dict(content_type=None), StatusCode.UNKNOWN),
    (dict(end=True), StatusCode.UNKNOWN),  # ended without grpc-status
    (dict(end=True, grpc_status=b"abc"), StatusCode.UNKNOWN),
    (dict(end=True, grpc_status=b"17"), StatusCode.UNKNOWN),
    (dict(end=True, grpc_status=b"0"), OK),
])
def test_answers_that_are_not_plain_grpc_get_a_status_made_for_them(respond, code):
    async def handler(stream):
        stream.respond(**respond)

    assert status_of(handler) == code


def test_trailers_without_grpc_status_and_data_ending_the_call_are_unknown():
    async def trailers(stream):
        stream.respond()
        stream.connection.h2.send_headers(stream.id, [(b"x-other", b"1")], end_stream=True)
        stream.connection.flush()

    async def data(stream):
        stream.respond()
        await stream.send(framed(b"answer"))
        stream.connection.h2.end_stream(stream.id)
        stream.connection.flush()

    assert status_of(trailers) == status_of(data) == StatusCode.UNKNOWN


@pytest.mark.parametrize("error_code, code", [
    (ErrorCodes.REFUSED_STREAM, StatusCode.UNAVAILABLE), (ErrorCodes.CANCEL, StatusCode.CANCELLED),
    (ErrorCodes.ENHANCE_YOUR_CALM, StatusCode.RESOURCE_EXHAUSTED),
    (ErrorCodes.INADEQUATE_SECURITY, StatusCode.PERMISSION_DENIED),
    (ErrorCodes.NO_ERROR, StatusCode.INTERNAL), (ErrorCodes.PROTOCOL_ERROR, StatusCode.INTERNAL),
    (ErrorCodes.INTERNAL_ERROR, StatusCode.INTERNAL), (ErrorCodes.FLOW_CONTROL_ERROR, StatusCode.INTERNAL),
])
def test_a_reset_call_gets_the_code_its_error_code_maps_to(error_code, code):
    async def handler(stream):
        stream.respond()
        stream.reset(error_code)

    assert status_of(handler) == code


def test_a_status_before_the_clients_end_frees_the_stream_with_rst_stream_no_error():
    async def handler(stream):
        stream.respond()
        stream.trailers(b"5", b"no%20model")

    async def body(channel, server):
        call = await channel.open(PATH)
        with pytest.raises(RpcError) as caught:
            await call.read()
        stream = await server.stream(call)
        await stream.ended.wait()
        return caught.value.code, caught.value.details, stream.reset_code

    assert serve(handler, body) == (StatusCode.NOT_FOUND, "no model", ErrorCodes.NO_ERROR)


def status_of(handler, reset=False):
    """The status a call gets from ``handler`` (OK or the error's); with ``reset``, once the client
    reset the call (its body is not read)."""

    async def body(channel, server):
        call = await channel.open(PATH)
        try:
            while await call.read() is not None:
                pass
            code = OK
        except RpcError as exc:
            code = exc.code
        if reset:
            stream = await server.stream(call)
            await stream.ended.wait()
            assert stream.reset_code == ErrorCodes.CANCEL
        return code

    return serve(handler, body)

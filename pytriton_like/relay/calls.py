"""The caller's end of nested calls: connections to the backend's call socket (native/call_*.c).

A callable's call of another model of its server (``triton_context.client()``) goes to the backend
inside tritonserver, which runs it in Triton's core (call_codec.py has the messages). A
:class:`CallChannel` is one connection: one call at a time, its large inputs written once into
an arena of the caller's, its large outputs read where the backend's arena has them (no copy).
:class:`CallChannels` keeps a process's connections for reuse by any thread or event loop.

Outputs read from the backend's output arenas are views of them. A connection has up to
``CALL_ARENAS`` of them; each call tells the backend which ones still hold outputs the caller
references (an arena's base array is referenced by any view of it), and the backend puts the
call's outputs into another: what a callable keeps is never overwritten, and arenas are reused
once it lets go.
"""

import asyncio
import contextlib
import itertools
import mmap
import os
import socket
import sys
import threading
import time
from typing import AsyncIterator, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .. import nested_trace
from ..proxy.types import Request
from . import shm
from .call_codec import Reply, decode_reply, encode_call, encode_hello, encode_model
from .transport import Channel, ChannelClosed, connect
from .wire_format import Kind, read_header

__all__ = ["CallFailed", "CallRefused", "CallChannel", "CallChannels", "OUTPUT_THRESHOLD_BYTES"]

# Outputs (and inputs) of this many bytes and more travel through the arenas; smaller ones in the messages.
OUTPUT_THRESHOLD_BYTES = 64 << 10
_HANDSHAKE_TIMEOUT_S = 10.0
_MAX_IDLE = 16  # connections a pool keeps between calls (each may hold its arenas)


class CallFailed(Exception):
    """Triton failed a nested call (or a question about a model): its error code and message.

    Attributes:
        code: Triton's error code (``TRITONSERVER_Error_Code``: 2 not found, 4 unavailable...).
        message: Triton's message.
    """

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class CallRefused(ConnectionError):
    """The backend refused the connection (a token that does not match, another protocol version)."""


class CallChannel:
    """One connection to the backend's call socket.

    Args:
        address: ``unix://PATH`` of the socket.
        token: the access token, when one guards the socket.
        shm_limit: the largest arena either end may make (None: no limit).

    Raises:
        OSError: the socket cannot be reached (tritonserver is not running, or restarting).
        CallRefused: the backend refused the greeting.
    """

    def __init__(self, address: str, token: Optional[str], shm_limit: Optional[int] = None):
        self._channel: Channel = connect(address)
        try:
            self._channel.send([encode_hello(token, OUTPUT_THRESHOLD_BYTES, shm_limit)])
            if not self._channel.readable(int(_HANDSHAKE_TIMEOUT_S * 1000)):
                raise CallRefused("the backend did not answer the nested calls' greeting")
            body, fd = self._channel.recv()
            if fd is not None:
                os.close(fd)
            header = read_header(body)
            if header.kind != Kind.WELCOME or header.failed:
                raise CallRefused(f"the backend refused nested calls: {header.text or 'no WELCOME'}")
        except BaseException:
            self._channel.close()
            raise
        self._arena = shm.Arena(shm_limit)
        self._outs: Dict[int, mmap.mmap] = {}  # the backend's output arenas, mapped here
        self._held: Dict[int, np.ndarray] = {}  # per output arena, the base array of the outputs last read there
        self._ids = itertools.count(1)
        self._pid = os.getpid()
        self.broken = False  # a call was given up on (timeout, cancel, error) or runs: the connection must go
        # outputs beyond ARENA_KEEP_BYTES came in an arena: the pool keeps one such connection, for
        # the next large call, and closes the others, so that neither process keeps their pages
        # while they wait (a call trims only the arena it uses)
        self.large = False

    # -- sync --------------------------------------------------------------------------------

    def model(self, name: str, version: Optional[str], timeout_s: float) -> Tuple[bool, str]:
        """Whether the model is ready, and its config (JSON text) when it is.

        Raises:
            CallFailed: Triton could not answer; TimeoutError, OSError: no answer.
        """
        self._send([encode_model(next(self._ids), name, version)])
        reply = self._next(time.monotonic() + timeout_s)
        _raise_failed(reply)
        return reply.ready, reply.text

    def call(self, name: str, version: Optional[str], request_id: str, request: Request,
             timeout_s: float) -> Dict[str, np.ndarray]:
        """Runs ``request`` on the model; its outputs.

        Raises:
            CallFailed: Triton failed it; TimeoutError: no answer within ``timeout_s`` (the call is
            cancelled); OSError: the connection broke (tritonserver stopped).
        """
        self._send_call(name, version, request_id, request, stream=False)
        deadline = time.monotonic() + timeout_s
        outputs: Dict[str, np.ndarray] = {}
        while True:
            reply = self._next(deadline)
            _check(self, reply)
            if reply.outputs is not None:
                outputs = reply.outputs
            if reply.final:
                return outputs

    def stream(self, name: str, version: Optional[str], request_id: str, request: Request,
               timeout_s: float) -> Iterator[Dict[str, np.ndarray]]:
        """Sends ``request`` to a decoupled model; the iterator of its responses as they come
        (``timeout_s`` bounds the wait for each). Leaving the iteration early cancels the call (the
        connection breaks)."""
        self._send_call(name, version, request_id, request, stream=True)
        self.broken = True  # until its last reply: a stream left before it cancels the call
        return self._responses(timeout_s)

    def _responses(self, timeout_s: float) -> Iterator[Dict[str, np.ndarray]]:
        while True:  # broken since the call went, until its last reply
            reply = self._next(time.monotonic() + timeout_s)
            _raise_failed(reply)
            if reply.outputs is not None:
                yield reply.outputs
            if reply.final:
                self.broken = False
                return

    # -- asyncio ------------------------------------------------------------------------------

    async def model_async(self, name: str, version: Optional[str], timeout_s: float) -> Tuple[bool, str]:
        """As :meth:`model`, awaited."""
        self._send([encode_model(next(self._ids), name, version)])
        reply = await self._next_async(time.monotonic() + timeout_s)
        _raise_failed(reply)
        return reply.ready, reply.text

    async def call_async(self, name: str, version: Optional[str], request_id: str, request: Request,
                         timeout_s: float) -> Dict[str, np.ndarray]:
        """As :meth:`call`, awaited: the event loop runs while the call does."""
        self._send_call(name, version, request_id, request, stream=False)
        deadline = time.monotonic() + timeout_s
        outputs: Dict[str, np.ndarray] = {}
        while True:
            reply = await self._next_async(deadline)
            _check(self, reply)
            if reply.outputs is not None:
                outputs = reply.outputs
            if reply.final:
                return outputs

    def stream_async(self, name: str, version: Optional[str], request_id: str, request: Request,
                     timeout_s: float) -> AsyncIterator[Dict[str, np.ndarray]]:
        """As :meth:`stream`: the call is sent now, its responses come through an async iterator."""
        self._send_call(name, version, request_id, request, stream=True)
        self.broken = True  # until its last reply, as in :meth:`stream`
        return self._responses_async(timeout_s)

    async def _responses_async(self, timeout_s: float) -> AsyncIterator[Dict[str, np.ndarray]]:
        while True:  # broken since the call went, until its last reply
            reply = await self._next_async(time.monotonic() + timeout_s)
            _raise_failed(reply)
            if reply.outputs is not None:
                yield reply.outputs
            if reply.final:
                self.broken = False
                return

    def close(self) -> None:
        """Closes the connection (a call still running is cancelled) and the caller's arena."""
        if self._pid == os.getpid():  # the end even where a forked child holds the socket too (not in the child)
            with contextlib.suppress(OSError):
                self._channel.socket.shutdown(socket.SHUT_RDWR)
        self._channel.close()
        self._arena.close()
        self._outs.clear()
        self._held.clear()

    # -- internals ----------------------------------------------------------------------------

    def _send(self, parts: List) -> None:
        try:
            self._channel.send(parts)
        except BaseException:
            self.broken = True
            raise

    def _send_call(self, name: str, version: Optional[str], request_id: str, request: Request, *,
                   stream: bool) -> None:
        parts, replaced = encode_call(next(self._ids), name, version, request_id, request, arena=self._arena,
                                      threshold=OUTPUT_THRESHOLD_BYTES, stream=stream, held=self._held_mask(),
                                      trace=nested_trace.current())
        try:
            self._channel.send(parts, self._arena.pending_fd if replaced else None)
        except BaseException:
            self.broken = True
            raise
        if replaced:
            self._arena.sent()

    def _held_mask(self) -> int:
        """The output arenas whose outputs the caller still references (not overwritten by this call)."""
        mask = 0
        for index in list(self._held):
            if sys.getrefcount(self._held[index]) > 2:  # the dict's reference and getrefcount's own
                mask |= 1 << index
            else:
                del self._held[index]
        return mask

    def _next(self, deadline: float) -> Reply:
        try:
            if not self._channel.readable(max(0, int((deadline - time.monotonic()) * 1000))):
                raise TimeoutError("Deadline Exceeded")
            return self._read()
        except BaseException:
            self.broken = True
            raise

    async def _next_async(self, deadline: float) -> Reply:
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        fd = self._channel.fileno()
        loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
        try:
            await asyncio.wait_for(readable, max(0.0, deadline - time.monotonic()))
            return self._read()
        except asyncio.TimeoutError:
            self.broken = True
            raise TimeoutError("Deadline Exceeded") from None
        except BaseException:
            self.broken = True
            raise
        finally:
            loop.remove_reader(fd)

    def _read(self) -> Reply:
        try:
            body, fd = self._channel.recv()
        except ChannelClosed:
            raise ChannelClosed("tritonserver closed the connection of the call (it stopped or is restarting)") from None
        header = read_header(body)
        index = header.slot
        if fd is not None:
            self._outs[index] = shm.map_received(fd)
        mapping = self._outs.get(index)
        view = np.frombuffer(mapping, np.uint8) if mapping is not None else None
        reply = decode_reply(body, view, header)
        in_arena = [array for array in (reply.outputs or {}).values() if view is not None and array.base is view]
        if in_arena:
            self._held[index] = view  # its reference count says whether the caller still holds them
            self.large = self.large or sum(array.nbytes for array in in_arena) > shm.ARENA_KEEP_BYTES
        return reply


class CallChannels:
    """A process's connections to the backend's call socket, handed to one call at a time.

    Args:
        address: ``unix://PATH`` of the backend's call socket.
        token: the access token, when one guards the socket.
        shm_limit: the largest arena (None: no limit).
    """

    def __init__(self, address: str, token: Optional[str], shm_limit: Optional[int] = None):
        self.address = address
        self._token = token
        self._shm_limit = shm_limit
        self._lock = threading.Lock()
        self._idle: List[CallChannel] = []
        self._pid = os.getpid()
        self._closed = False

    @contextlib.contextmanager
    def channel(self) -> Iterator[CallChannel]:
        """A connection for one call; it goes back to the pool after, unless the call broke it."""
        channel = self.take()
        try:
            yield channel
        finally:
            self.give_back(channel)

    @contextlib.asynccontextmanager
    async def channel_async(self) -> AsyncIterator[CallChannel]:
        """As :meth:`channel`, in an event loop (connecting is quick and local: it does not block)."""
        channel = self.take()
        try:
            yield channel
        finally:
            self.give_back(channel)

    def close(self) -> None:
        """Closes the idle connections; those in use close when their call ends. Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            if self._pid != os.getpid():  # a forked child: the parent's connections are not its own to end
                return
        for channel in idle:
            channel.close()

    def take(self) -> CallChannel:
        """A connection of the pool, or a new one; :meth:`give_back` it after its call."""
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's connections are not its own
                self._idle, self._pid = [], os.getpid()
            if self._closed:
                raise ChannelClosed("the server is stopping")
            if self._idle:
                return self._idle.pop()
        return CallChannel(self.address, self._token, self._shm_limit)

    def give_back(self, channel: CallChannel) -> None:
        """Takes a connection back for the next call, or closes it when its call broke it, or when
        it brought large outputs and the pool holds such a connection already."""
        with self._lock:
            spare = not (channel.large and any(idle.large for idle in self._idle))
            if spare and not (channel.broken or self._closed) and len(self._idle) < _MAX_IDLE:
                self._idle.append(channel)
                return
        channel.close()



def _raise_failed(reply: Reply) -> None:
    if reply.failed:
        raise CallFailed(reply.code or 0, reply.text)


def _check(channel: "CallChannel", reply: Reply) -> None:
    """Raises a failed reply's error; a failure before the call's end leaves the connection unusable."""
    if reply.failed:
        if not reply.final:
            channel.broken = True
        raise CallFailed(reply.code or 0, reply.text)

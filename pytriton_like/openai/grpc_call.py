"""One gRPC call on an HTTP/2 connection (grpc_connection.py): its messages framed and read in order,
its bytes acknowledged as its reader takes them, its end."""

import asyncio
import collections
from typing import Any, Deque, List, Optional

from h2.errors import ErrorCodes

from .grpc_status import CANCELLED, INTERNAL, OK, RpcError

__all__ = ["Call"]


class Call:
    """One gRPC call: its messages written and read in order, one reader and one writer at a time."""

    __slots__ = ("_connection", "stream_id", "_messages", "_partial", "_partial_size", "_needed", "_owed",
                 "_ack_batch", "_status", "_waiter", "_window_waiter", "_half_closed")

    def __init__(self, connection: Any, stream_id: int, ack_batch: int):
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

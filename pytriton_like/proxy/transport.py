"""The relay's two transports between a stub and its worker, behind one small interface.

Stdlib and zmq only: this module runs inside the Python-backend stub too.

- ``unix://PATH`` — a plain Unix stream socket, for non-decoupled models: one batch in flight
  per instance, so a blocking socket suffices, and a round trip costs a few microseconds where
  ZeroMQ's I/O threads cost ~140 µs (bench/transport_rtt.py).
- ``ipc://PATH`` — a ZeroMQ DEALER, for decoupled models, whose relay thread polls the socket
  together with an inproc pair.

Both carry the same messages (a list of frames, protocol.py); only the socket calls differ.
On a Unix socket a message is framed as::

    <Q rest length> <I frame count n> <n × Q frame lengths> <the frames, back to back>

and a rest length of 0 (no frames) is a *nudge*: "a message follows shortly". The stub nudges
its worker before it encodes a batch, so that the worker's thread — and its CPU, which a VM
halts when idle — wakes while the stub is still encoding, instead of after (docs/performance.md).
"""

import select
import socket
import struct
import time
from typing import Any, List, Optional, Sequence

import zmq

__all__ = [
    "UNIX_SCHEME",
    "ZMQ_SCHEME",
    "ChannelClosed",
    "FramingError",
    "UnixChannel",
    "ZmqChannel",
    "NUDGE",
    "connect",
    "send_frames",
    "recv_frames",
    "spin_until_readable",
]

UNIX_SCHEME = "unix://"
ZMQ_SCHEME = "ipc://"
# A message larger than this is refused as corrupt (a forged length must not allocate gigabytes
# blindly); tensors this large travel through shared memory anyway.
MAX_MESSAGE_BYTES = 1 << 31
# Below this, the frames are joined and sent with one call; above, sent one by one (no copy).
_JOIN_BYTES = 1 << 18

_REST = struct.Struct("<Q")
_COUNT = struct.Struct("<I")
NUDGE = _REST.pack(0)


class ChannelClosed(ConnectionError):
    """The other end closed the connection (its process exited or closed the socket)."""


class FramingError(ValueError):
    """Bytes on a Unix socket that are not a framed message; the connection cannot be trusted."""


def send_frames(sock: socket.socket, frames: Sequence[Any]) -> None:
    """Send one message (a list of buffers) on a blocking Unix stream socket."""
    buffers = [frame if isinstance(frame, (bytes, memoryview)) else memoryview(frame) for frame in frames]
    lengths = [memoryview(buffer).nbytes for buffer in buffers]
    heads = struct.pack(f"<I{len(lengths)}Q", len(lengths), *lengths)
    rest = len(heads) + sum(lengths)
    parts = [_REST.pack(rest), heads, *buffers]
    # MSG_NOSIGNAL: a peer gone is an error here, not a SIGPIPE that kills the stub
    if rest <= _JOIN_BYTES:
        sock.sendall(b"".join(parts), socket.MSG_NOSIGNAL)
    else:
        for part in parts:
            sock.sendall(part, socket.MSG_NOSIGNAL)


def recv_frames(sock: socket.socket) -> List[memoryview]:
    """Receive one message sent by :func:`send_frames`; the frames are views of one new buffer.

    A nudge is a message of no frames: an empty list.

    Raises:
        ChannelClosed: the peer closed the connection (before or inside a message).
        FramingError: the bytes are not a framed message.
    """
    (rest,) = _REST.unpack(_recv_exactly(sock, _REST.size, at_start=True))
    if rest == 0:
        return []
    if not _COUNT.size <= rest <= MAX_MESSAGE_BYTES:
        raise FramingError(f"a message of {rest} bytes")
    body = memoryview(_recv_exactly(sock, rest))
    (count,) = _COUNT.unpack_from(body)
    start = _COUNT.size + 8 * count
    if start > rest:
        raise FramingError(f"{count} frames do not fit in {rest} bytes")
    lengths = struct.unpack_from(f"<{count}Q", body, _COUNT.size)
    if start + sum(lengths) != rest:
        raise FramingError(f"frames of {sum(lengths)} bytes in a message of {rest - start}")
    frames = []
    for length in lengths:
        frames.append(body[start : start + length])
        start += length
    return frames


def _recv_exactly(sock: socket.socket, size: int, at_start: bool = False) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        count = sock.recv_into(view[got:])
        if count == 0:
            raise ChannelClosed("the connection closed" + ("" if at_start and got == 0 else " inside a message"))
        got += count
    return buffer


def spin_until_readable(poller: select.poll, spin_ns: int) -> bool:
    """Poll ``poller`` without sleeping for up to ``spin_ns``; whether something became readable."""
    poll, now = poller.poll, time.perf_counter_ns
    deadline = now() + spin_ns
    while not poll(0):
        if now() > deadline:
            return False
    return True


class UnixChannel:
    """The stub's end of a Unix stream socket to its worker.

    Args:
        spin_us: how long :meth:`recv` polls without sleeping before it blocks, and whether
            :meth:`nudge` sends anything (0: no spin, no nudges). An answer that comes while the
            stub is still on its CPU saves the wake-ups a sleeping receiver costs
            (docs/performance.md). While answers take longer than that on average, it blocks at
            once.
    """

    def __init__(self, path: str, spin_us: int = 0):
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.socket.connect(path)
        except BaseException:
            self.socket.close()
            raise
        self._poller = select.poll()
        self._poller.register(self.socket, select.POLLIN)
        self._spin_ns = spin_us * 1000
        self._typical_wait_ns = 0  # how long answers take lately; no spin while it exceeds the spin time

    def nudge(self) -> None:
        """Tell the worker that a message follows shortly (nothing when spinning is off)."""
        if self._spin_ns:
            self.socket.sendall(NUDGE, socket.MSG_NOSIGNAL)

    def send(self, frames: Sequence[Any]) -> None:
        send_frames(self.socket, frames)

    def recv(self, timeout_ms: int) -> Optional[List[memoryview]]:
        """The next message, or None if none started within ``timeout_ms`` (after the spin)."""
        if self._spin_ns:
            started = time.perf_counter_ns()
            if self._typical_wait_ns > self._spin_ns or not spin_until_readable(self._poller, self._spin_ns):
                if not self._poller.poll(timeout_ms):
                    return None
            # a moving average over about the last eight answers; one slow answer counts as at most
            # twice the spin time, so that spinning resumes soon after it
            waited = min(time.perf_counter_ns() - started, 2 * self._spin_ns)
            self._typical_wait_ns += (waited - self._typical_wait_ns) >> 3
            return recv_frames(self.socket)
        if not self._poller.poll(timeout_ms):
            return None
        return recv_frames(self.socket)

    def close(self) -> None:
        self.socket.close()


class ZmqChannel:
    """The stub's end of a ZeroMQ DEALER socket to its worker (``context`` and ``socket`` are
    public: the streaming relay polls the socket with an inproc pair of the same context)."""

    def __init__(self, address: str):
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(address)

    def send(self, frames: Sequence[Any]) -> None:
        self.socket.send_multipart(frames)

    def recv(self, timeout_ms: int) -> Optional[List[Any]]:
        """The next message, or None if none came within ``timeout_ms``."""
        if not self.socket.poll(timeout_ms):
            return None
        return self.socket.recv_multipart()

    def close(self) -> None:
        self.socket.close(linger=0)
        self.context.term()


def connect(address: str, spin_us: int = 0):
    """The channel for ``address``, chosen by its scheme (``spin_us``: see :class:`UnixChannel`)."""
    if address.startswith(UNIX_SCHEME):
        return UnixChannel(address[len(UNIX_SCHEME) :], spin_us)
    if address.startswith(ZMQ_SCHEME):
        return ZmqChannel(address)
    raise ValueError(f"unknown relay address {address!r}: expected {UNIX_SCHEME}PATH or {ZMQ_SCHEME}PATH")

"""The relay's transport: a Unix stream socket carrying length-prefixed messages, with at most
one file descriptor (a shared-memory arena, shm.py) attached to a message.

One interface, :class:`Channel`, and one factory per end of the process boundary:
:func:`listen` for the relay server's end (it binds; the backend connects) and :func:`connect` for the
backend's end (the backend is C, ``native/transport.c``; tests use this one in its place).

On the socket a message is ``<u64 length> <length bytes>`` (protocol.py says what the bytes
are). A length of 0 is a *nudge* ("a message follows shortly"), which a receiver skips; the
backend sends none since its encoding takes microseconds (bench/README.md).
"""

import array
import contextlib
import os
import select
import socket
import struct
from typing import Any, List, Optional, Sequence, Tuple

__all__ = [
    "UNIX_SCHEME",
    "ChannelClosed",
    "FramingError",
    "Channel",
    "Listener",
    "listen",
    "connect",
    "MAX_MESSAGE_BYTES",
]

UNIX_SCHEME = "unix://"
# A message larger than this is refused as corrupt (a forged length must not allocate gigabytes
# blindly); tensors this large travel through shared memory anyway.
MAX_MESSAGE_BYTES = 1 << 31
# Below this, the parts are joined and sent with one call.
_JOIN_BYTES = 1 << 18
_LENGTH = struct.Struct("<Q")
_FD_SPACE = socket.CMSG_SPACE(4 * array.array("i").itemsize)
_EMPTY = memoryview(b"")


class ChannelClosed(ConnectionError):
    """The other end closed the connection (its process exited or closed the socket)."""


class FramingError(ValueError):
    """Bytes that are not a framed message; the connection cannot be trusted any more."""


def _collect(ancillary, fds: List[int]) -> None:
    """The descriptors of a recvmsg's ancillary data, into ``fds``."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(data[: len(data) - len(data) % received.itemsize])
            fds.extend(received)


def _close_all(fds: List[int]) -> None:
    """Closes the descriptors of a message that will not be read."""
    for fd in fds:
        os.close(fd)


def _path(address: str) -> str:
    if not address.startswith(UNIX_SCHEME):
        raise ValueError(f"a relay address is {UNIX_SCHEME}PATH, got {address!r}")
    return address[len(UNIX_SCHEME) :]


class Channel:
    """One connection between a backend instance and its relay server."""

    def __init__(self, sock: socket.socket):
        self.socket = sock
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)

    def fileno(self) -> int:
        return self.socket.fileno()

    def send(self, parts: Sequence[Any], fd: Optional[int] = None) -> None:
        """Send one message made of ``parts`` (buffers), with ``fd`` attached when given."""
        views = [part if type(part) is memoryview else memoryview(part) for part in parts]
        length = sum(view.nbytes for view in views)
        buffers: List[Any] = [_LENGTH.pack(length), *views]
        if length <= _JOIN_BYTES:
            buffers = [b"".join(buffers)]
            if fd is None:
                self.socket.sendall(buffers[0], socket.MSG_NOSIGNAL)
                return
        ancillary = [] if fd is None else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
        sock = self.socket
        while buffers:
            # MSG_NOSIGNAL: a peer gone is an error here, not a SIGPIPE
            sent = sock.sendmsg(buffers, ancillary, socket.MSG_NOSIGNAL)
            ancillary = []
            while buffers and sent >= memoryview(buffers[0]).nbytes:
                sent -= memoryview(buffers[0]).nbytes
                buffers.pop(0)
            if sent:
                buffers[0] = memoryview(buffers[0])[sent:]

    def recv(self) -> Tuple[memoryview, Optional[int]]:
        """The next message (a view of a new, writable buffer) and the descriptor that came with it.

        A nudge is an empty message.

        Raises:
            ChannelClosed: the peer closed the connection (before or inside a message).
            FramingError: the length is not one of a message.
        """
        fds: List[int] = []
        try:
            view = self._recv(fds)
        except BaseException:  # the message is not read: nothing that came with it stays open
            _close_all(fds)
            raise
        return view, self._one(fds) if fds else None

    def _recv(self, fds: List[int]) -> memoryview:
        prefix = bytearray(_LENGTH.size)
        # A descriptor comes with a message's first bytes: only the length is read with recvmsg.
        count, ancillary, _, _ = self.socket.recvmsg_into([prefix], _FD_SPACE)
        if ancillary:
            _collect(ancillary, fds)
        if count < _LENGTH.size:
            if count == 0:
                raise ChannelClosed("the connection closed")
            self._recv_into(memoryview(prefix)[count:], fds)
        (length,) = _LENGTH.unpack(prefix)
        if length == 0:
            return _EMPTY
        if length > MAX_MESSAGE_BYTES:
            raise FramingError(f"a message of {length} bytes")
        body = bytearray(length)
        view = memoryview(body)
        got = self.socket.recv_into(view)
        if got < length:
            if got == 0:
                raise ChannelClosed("the connection closed inside a message")
            self._recv_into(view[got:], fds)
        return view

    def readable(self, timeout_ms: int) -> bool:
        """Whether a message starts within ``timeout_ms`` (-1: no limit)."""
        return bool(self._poll.poll(timeout_ms))

    def _recv_into(self, view: memoryview, fds: List[int]) -> None:
        got = 0
        size = view.nbytes
        sock = self.socket
        while got < size:
            count, ancillary, _, _ = sock.recvmsg_into([view[got:]], _FD_SPACE)
            if ancillary:
                _collect(ancillary, fds)
            if count == 0:
                raise ChannelClosed("the connection closed inside a message")
            got += count

    @staticmethod
    def _one(fds: List[int]) -> Optional[int]:
        """The first descriptor; any others are closed (a message carries at most one)."""
        for extra in fds[1:]:
            os.close(extra)
        return fds[0] if fds else None

    def close(self) -> None:
        self.socket.close()


class Listener:
    """The relay server's listening socket; :meth:`accept` gives each backend instance's channel."""

    def __init__(self, address: str):
        self.path = _path(address)
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # bound beside the path, then renamed over it: a restarted worker process replaces its
        # dead predecessor's socket without a moment in which the path is missing (the backend
        # takes a missing path as "no relay server will come back")
        bound = self.path + "~"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(bound)
            self.socket.bind(bound)
            os.chmod(bound, 0o600)  # only the server's user may connect (docs/security.md)
            self.socket.listen()
            os.replace(bound, self.path)
        except BaseException:
            self.socket.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(bound)
            raise

    def fileno(self) -> int:
        return self.socket.fileno()

    def accept(self) -> Channel:
        return Channel(self.socket.accept()[0])

    def close(self) -> None:
        self.socket.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def listen(address: str) -> Listener:
    """The relay server's end: bind ``unix://PATH``."""
    return Listener(address)


def connect(address: str) -> Channel:
    """The backend's end (as the C backend does it; used by tests): connect to ``unix://PATH``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(_path(address))
    except BaseException:
        sock.close()
        raise
    return Channel(sock)

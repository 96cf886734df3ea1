"""The user-process end of one model instance's relay, for non-decoupled models.

One thread per instance: receive a batch, run the callable, reply — the stub sends one batch
at a time, so nothing waits behind a running callable.
"""

import contextlib
import logging
import os
import select
import socket
import threading
import time
from typing import Optional

from ..proxy.protocol import Flags, Kind, ProtocolError, decode_message, encode_message
from ..proxy.shm import ArenaReader, ArenaWriter
from ..proxy.transport import UNIX_SCHEME, FramingError, recv_frames, send_frames, spin_until_readable
from .calling import BatchCall
from .handling import BatchHandler

__all__ = ["InstanceWorker"]

logger = logging.getLogger(__name__)

# How long close() waits for a callable still running.
_CLOSE_TIMEOUT_S = 10


class InstanceWorker:
    """Serves one model instance: owns its Unix socket, its stubs' connections, its output arena
    and a thread.

    Normally one stub connects; each connection is served in turn (transport.py frames the
    messages). A connection that breaks the framing is logged and closed: a stream cannot resync.
    After a stub's nudge the thread polls that connection without sleeping, for up to
    ``spin_us``, until the batch arrives; if it is later, the thread goes back to sleep in poll.

    Args:
        call: the bound callable in the internal shape ``Requests -> Responses``; closed with the worker.
        address: ``unix://PATH`` to bind.
        arena_tag: names this worker's shared-memory arena.
        shm_limit: the largest arena it may use, in bytes (None: as large as a message needs).
        spin_us: how long to wait for a nudged batch without sleeping.
    """

    def __init__(
        self,
        *,
        handler: BatchHandler,
        call: BatchCall,
        address: str,
        owner_pid: int,
        arena_tag: str,
        shm_limit: Optional[int] = None,
        spin_us: int = 0,
    ):
        self._handler = handler
        self._spin_ns = spin_us * 1000
        self._call = call
        self._arena = ArenaWriter(owner_pid, arena_tag, shm_limit)
        self._reader = ArenaReader()
        if not address.startswith(UNIX_SCHEME):
            raise ValueError(f"a worker binds {UNIX_SCHEME}PATH, got {address!r}")
        self._path = address[len(UNIX_SCHEME) :]
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self._path)
        os.chmod(self._path, 0o600)  # only the server's user may connect (docs/security.md)
        self._listener.listen()
        # close() wakes the thread through this pair; the thread closes every socket itself
        self._wake_reader, self._wake_writer = socket.socketpair()
        # select.poll, not selectors: the loop below runs once per batch, and less Python per
        # batch is what makes the relay fast (docs/performance.md)
        self._poll = select.poll()
        self._sockets = {}  # file descriptor -> socket, of every socket polled
        self._peer_polls = {}  # file descriptor -> a poll of that stub connection alone, to spin on
        for sock in (self._listener, self._wake_reader):
            self._watch(sock)
        self._failed = None  # why the worker serves no more, once it failed
        self._busy = False
        self._thread = threading.Thread(target=self._serve, name=f"pytriton_like-{arena_tag}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread; a callable that is still running is waited for only a while."""
        with contextlib.suppress(OSError):  # the thread may have ended and closed its end already
            self._wake_writer.send(b"x")
        self._thread.join(_CLOSE_TIMEOUT_S)
        if self._thread.is_alive():
            logger.warning("model %s: a callable is still running; leaving its worker behind", self._handler.model_name)

    @property
    def busy(self) -> bool:
        """Whether a batch is being handled right now."""
        return self._busy

    def _serve(self) -> None:
        try:
            while True:
                for fd, _ in self._poll.poll():
                    sock = self._sockets[fd]
                    if sock is self._wake_reader:
                        return
                    if sock is self._listener:
                        self._watch_peer(self._listener.accept()[0])
                    else:
                        self._serve_one(sock)
        finally:
            self._call.close()
            for sock in self._sockets.values():
                sock.close()
            self._wake_writer.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path)
            self._arena.close()
            self._reader.close()

    def _serve_one(self, peer: socket.socket) -> None:
        """Answer the message waiting on ``peer``; drop the connection if it closed or broke the framing."""
        try:
            frames = recv_frames(peer)
            while not frames:  # a nudge: the batch follows shortly
                if not spin_until_readable(self._peer_polls[peer.fileno()], self._spin_ns):
                    return  # it is late: wait for it in poll, with the other sockets
                frames = recv_frames(peer)
            self._busy = True
            reply = self._handle(frames)
            self._busy = False
            if reply is not None:
                send_frames(peer, reply)
        except ConnectionError:  # the stub closed its end (ChannelClosed) or went away
            self._drop(peer)
        except (FramingError, OSError) as exc:
            logger.error("model %s: closing a broken connection: %s", self._handler.model_name, exc)
            self._drop(peer)

    def _watch(self, sock: socket.socket) -> None:
        self._sockets[sock.fileno()] = sock
        self._poll.register(sock, select.POLLIN)

    def _watch_peer(self, peer: socket.socket) -> None:
        self._watch(peer)
        alone = self._peer_polls[peer.fileno()] = select.poll()
        alone.register(peer, select.POLLIN)

    def _drop(self, peer: socket.socket) -> None:
        self._busy = False
        self._poll.unregister(peer)
        del self._sockets[peer.fileno()]
        del self._peer_polls[peer.fileno()]
        peer.close()

    def _handle(self, frames):
        try:
            message = decode_message(frames, self._reader, writable=True)
        except ProtocolError as exc:
            logger.error("model %s: dropping a malformed message: %s", self._handler.model_name, exc)
            return None
        if message.kind is Kind.HELLO:
            return self._handler.welcome(message)
        if message.kind is not Kind.BATCH:
            logger.error("model %s: unexpected %s message", self._handler.model_name, message.kind.name)
            return None
        if self._failed is not None:
            return encode_message(Kind.RESULT, message.batch_id, error=self._failed, flags=Flags.FINAL)
        started = time.perf_counter_ns()
        try:
            requests = self._handler.requests(message)
            responses = self._call(requests)
            callable_ns = time.perf_counter_ns() - started
            return self._handler.result(
                message.batch_id, requests, responses, arena=self._arena, callable_ns=callable_ns
            )
        except Exception as exc:  # noqa: BLE001 - every failure of the callable becomes an error response
            return self._handler.failure(message.batch_id, exc, callable_ns=time.perf_counter_ns() - started)
        except BaseException as exc:  # noqa: BLE001 - SystemExit & co. end this worker, but it must answer
            self._failed = (
                f"the worker of model {self._handler.model_name!r} failed and serves no more requests:"
                f" {type(exc).__name__}: {exc}"
            )
            logger.critical("model %s: %s", self._handler.model_name, self._failed, exc_info=exc)
            return encode_message(Kind.RESULT, message.batch_id, error=self._failed, flags=Flags.FINAL)

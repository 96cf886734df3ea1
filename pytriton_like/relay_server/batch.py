"""The user-process end of one model instance's relay, for non-decoupled models.

One thread per instance: receive a batch, run the callable, reply. The backend may send the
next batch while the callable runs (several batch slots in flight); it waits in the socket until
the thread is done, and each slot has its own arenas, so an answer's outputs are never
overwritten before the backend has copied them.
"""

import contextlib
import logging
import os
import select
import socket
import threading
import time
from typing import Any, Dict, List, Optional

import numpy as np

from ..relay.protocol import Flags, Kind, ProtocolError, decode_batch, failed_result, read_header
from ..relay.shm import ARENA_KEEP_BYTES, Arena, give_back, map_received
from ..relay.transport import Channel, FramingError, listen
from .calling import BatchCall
from .handling import BatchHandler, Flag

__all__ = ["BatchServer"]

logger = logging.getLogger(__name__)

# How long close() waits for a callable still running.
_CLOSE_TIMEOUT_S = 10
_NEW_ARENA = int(Flags.NEW_ARENA)


class _Peer:
    """A connected backend instance: its channel and, per batch slot, both arenas."""

    def __init__(self, channel: Channel):
        self.channel = channel
        self.inputs: List[Optional[object]] = []  # per slot: the mapping of the backend's arena
        self.outputs: List[Arena] = []  # per slot: our arena

    def close(self) -> None:
        for arena in self.outputs:
            arena.close()
        for mapping in self.inputs:
            if mapping is not None:
                with contextlib.suppress(BufferError):  # arrays handed out keep it; it goes with them
                    mapping.close()
        self.channel.close()


class BatchServer:
    """Serves one model instance: owns its Unix socket, its backend connections and a thread.

    Normally one backend instance connects; each connection is served in turn. A connection
    that breaks the framing is logged and closed: a stream cannot resync.

    Args:
        call: the bound callable in the internal shape ``Requests -> Responses``; closed with the relay server.
        address: ``unix://PATH`` to bind.
        shm_limit: the largest arena it may use, in bytes (None: as large as a message needs).
        busy_flag: where to say whether a batch is being handled (an object with ``value``).
    """

    def __init__(
        self,
        *,
        handler: BatchHandler,
        call: BatchCall,
        address: str,
        shm_limit: Optional[int] = None,
        busy_flag: Optional[Any] = None,
    ):
        self._handler = handler
        self._call = call
        self._shm_limit = shm_limit
        self._listener = listen(address)
        # close() wakes the thread through this pair; the thread closes every socket itself
        self._wake_reader, self._wake_writer = socket.socketpair()
        # select.poll, not selectors: the loop below runs once per batch, and less Python per
        # batch is what makes the relay fast (bench/README.md)
        self._poll = select.poll()
        self._poll.register(self._listener.socket, select.POLLIN)
        self._poll.register(self._wake_reader, select.POLLIN)
        self._peers: Dict[int, _Peer] = {}
        self._failed: Optional[str] = None  # why this relay server serves no more, once it failed
        self._busy = busy_flag if busy_flag is not None else Flag()  # .value: a batch is being handled
        name = os.path.basename(self._listener.path)
        self._thread = threading.Thread(target=self._serve, name=f"pytriton_like-{name}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread; a callable that is still running is waited for only a while."""
        with contextlib.suppress(OSError):  # the thread may have ended and closed its end already
            self._wake_writer.send(b"x")
        self._thread.join(_CLOSE_TIMEOUT_S)
        if self._thread.is_alive():
            logger.warning("model %s: a callable is still running; leaving its relay server behind", self._handler.model_name)

    def busy(self) -> bool:
        """Whether a batch is being handled right now."""
        return bool(self._busy.value)

    def serving(self) -> bool:
        """Whether it takes batches: until it is closed, or failed (a callable ended its thread)."""
        return self._thread.is_alive() and self._failed is None

    def cancel(self, key: str) -> None:
        """Nothing to do: a model that does not stream answers each batch once (cancel keys are
        for streams, :mod:`.cancel_keys`)."""

    def _serve(self) -> None:
        listener_fd, wake_fd = self._listener.fileno(), self._wake_reader.fileno()
        try:
            while True:
                for fd, _ in self._poll.poll():
                    if fd == wake_fd:
                        return
                    if fd == listener_fd:
                        peer = _Peer(self._listener.accept())
                        self._peers[peer.channel.fileno()] = peer
                        self._poll.register(peer.channel.socket, select.POLLIN)
                    else:
                        peer = self._peers.get(fd)
                        if peer is not None:
                            self._serve_one(peer)
        finally:
            self._call.close()
            for peer in self._peers.values():
                peer.close()
            self._listener.close()
            self._wake_reader.close()
            self._wake_writer.close()

    def _serve_one(self, peer: _Peer) -> None:
        """Answer the message waiting on ``peer``; drop the connection if it closed or broke the framing."""
        channel = peer.channel
        try:
            body, fd = channel.recv()
            if not body:  # a nudge (the protocol allows them; this relay server needs none)
                if fd is not None:
                    os.close(fd)
                return
            self._busy.value = True
            try:
                reply, arena = self._handle(peer, body, fd)
            finally:
                self._busy.value = False
            if reply is not None:
                channel.send(reply, None if arena is None else arena.pending_fd)
                if arena is not None:
                    arena.sent()
        except ConnectionError:  # the backend closed its end (ChannelClosed) or went away
            self._drop(peer)
        except (FramingError, OSError) as exc:
            logger.error("model %s: closing a broken connection: %s", self._handler.model_name, exc)
            self._drop(peer)

    def _drop(self, peer: _Peer) -> None:
        self._busy.value = False
        fd = peer.channel.fileno()
        self._poll.unregister(fd)
        del self._peers[fd]
        peer.close()

    def _handle(self, peer: _Peer, body, fd):
        """The reply to one message (parts, and the arena whose descriptor must go along), or (None, None)."""
        handler = self._handler
        try:
            header = read_header(body) if body[2:3] != bytes([Kind.HELLO]) else None
            if header is None:
                if fd is not None:
                    os.close(fd)
                welcome, slots = handler.welcome(body)
                if slots is not None:
                    peer.inputs = [None] * slots
                    peer.outputs = [Arena(self._shm_limit) for _ in range(slots)]
                return [welcome], None
            if header.kind != Kind.BATCH or header.slot >= len(peer.outputs):
                raise ProtocolError(f"unexpected message kind {header.kind} (slot {header.slot})")
            slot = header.slot
            if header.flags & _NEW_ARENA:
                if fd is None:
                    raise ProtocolError("a new arena was announced but none came")
                fd, mapping = None, map_received(fd)
                old, peer.inputs[slot] = peer.inputs[slot], mapping
                if old is not None:
                    with contextlib.suppress(BufferError):
                        old.close()
            batch = decode_batch(body, peer.inputs[slot])
        except (ProtocolError, ValueError) as exc:
            logger.error("model %s: malformed message from the backend: %s", handler.model_name, exc)
            if fd is not None:
                os.close(fd)
            try:  # fail the batch, if the header says which, rather than leave it waiting
                header = read_header(body)
            except ProtocolError:
                return None, None
            if header.kind != Kind.BATCH:
                return None, None
            return [failed_result(header.batch_id, header.slot, f"malformed batch: {exc}")], None
        if fd is not None:
            os.close(fd)
        if self._failed is not None:
            return [failed_result(batch.batch_id, slot, self._failed)], None
        arena = peer.outputs[slot]
        started = time.perf_counter_ns()
        try:
            requests = batch.requests
            responses = self._call(requests)
            callable_ns = time.perf_counter_ns() - started
            if header.value > ARENA_KEEP_BYTES and not _may_hold_inputs(responses, peer.inputs[slot]):
                give_back(peer.inputs[slot], header.value)  # a large batch's inputs are done with
            parts, replaced = handler.result(
                batch.batch_id, slot, requests, responses, arena=arena, callable_ns=callable_ns
            )
            return parts, arena if replaced else None
        except Exception as exc:  # noqa: BLE001 - every failure of the callable becomes an error response
            return [handler.failure(batch.batch_id, slot, exc, time.perf_counter_ns() - started)], None
        except BaseException as exc:  # noqa: BLE001 - SystemExit & co. end this relay server, but it must answer
            self._failed = (
                f"the instance of model {handler.model_name!r} failed and serves no more requests:"
                f" {type(exc).__name__}: {exc}"
            )
            logger.critical("model %s: %s", handler.model_name, self._failed, exc_info=exc)
            return [failed_result(batch.batch_id, slot, self._failed)], None


def _may_hold_inputs(responses, mapping) -> bool:
    """Whether an output of ``responses`` may lie in ``mapping`` (an input returned, or a view of one)."""
    if mapping is None or not isinstance(responses, (list, tuple)):
        return True
    whole = np.frombuffer(mapping, np.uint8)
    for response in responses:
        if not isinstance(response, dict):
            return True
        for value in response.values():
            if not isinstance(value, np.ndarray) or np.may_share_memory(value, whole):
                return True
    return False


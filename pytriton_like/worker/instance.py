"""The user-process end of one model instance's relay, for non-decoupled models.

One thread per instance: receive a batch, run the callable, reply — the stub sends one batch
at a time, so nothing waits behind a running callable.
"""

import logging
import threading
import time
from typing import Optional

import zmq

from ..proxy.protocol import Flags, Kind, ProtocolError, decode_message, encode_message
from ..proxy.shm import ArenaReader, ArenaWriter
from .calling import BatchCall
from .handling import BatchHandler

__all__ = ["InstanceWorker"]

logger = logging.getLogger(__name__)

# How long close() waits for a callable still running.
_CLOSE_TIMEOUT_S = 10


class InstanceWorker:
    """Serves one model instance: owns its ZeroMQ context and socket, its output arena and a thread.

    Args:
        call: the bound callable in the internal shape ``Requests -> Responses``; closed with the worker.
        address: ipc address to bind.
        arena_tag: names this worker's shared-memory arena.
        shm_limit: the largest arena it may use, in bytes (None: as large as a message needs).
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
    ):
        self._handler = handler
        self._call = call
        self._arena = ArenaWriter(owner_pid, arena_tag, shm_limit)
        self._reader = ArenaReader()
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(address)
        self._failed = None  # why the worker serves no more, once it failed
        self._busy = False
        self._thread = threading.Thread(target=self._serve, name=f"pytriton_like-{arena_tag}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread; a callable that is still running is waited for only a while."""
        # term() ends the blocking receive; it waits for the thread to close the socket.
        terminator = threading.Thread(target=self._context.term, daemon=True)
        terminator.start()
        terminator.join(_CLOSE_TIMEOUT_S)
        if terminator.is_alive():
            logger.warning("model %s: a callable is still running; leaving its worker behind", self._handler.model_name)

    @property
    def busy(self) -> bool:
        """Whether a batch is being handled right now."""
        return self._busy

    def _serve(self) -> None:
        try:
            while True:
                peer, *frames = self._socket.recv_multipart()
                self._busy = True
                reply = self._handle(frames)
                self._busy = False
                if reply is not None:
                    self._socket.send_multipart([peer, *reply])
        except zmq.ContextTerminated:
            pass
        finally:
            self._call.close()
            self._socket.close(linger=0)
            self._arena.close()
            self._reader.close()

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

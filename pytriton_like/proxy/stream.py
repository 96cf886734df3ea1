"""Relay for a decoupled (streaming) model: many RESULTs per batch, sent as they come.

``execute`` hands the batch to a relay thread and returns at once, so Triton may send further
batches while earlier ones still stream. The relay thread owns the socket to the worker
(ZeroMQ sockets are single-threaded): it forwards batches from ``execute`` through an inproc
pair and sends each RESULT it receives with the requests' response senders. Tensors travel as
frames only: several batches are in flight, so there is no single arena to reuse.
"""

import logging
import threading
from typing import Dict, List, Optional

import triton_python_backend_utils as pb_utils  # provided by the stub
import zmq

from .batch import error_response, response
from .connection import LIVENESS_PERIOD_MS, Connection, RelayError, request_items
from .metrics import RelayMetrics
from .protocol import Kind, Message, ProtocolError, decode_message, encode_message

__all__ = ["StreamRelay"]

logger = logging.getLogger(__name__)

_STOP = [b""]


class StreamRelay:
    """Streams each batch's responses back through its requests' response senders."""

    def __init__(self, connection: Connection, metrics: RelayMetrics):
        self._connection = connection
        self._metrics = metrics
        self._senders: Dict[int, List[Optional[object]]] = {}  # batch id -> senders (None once done)
        self._lock = threading.Lock()
        inbox = f"inproc://pytriton_like-batches-{id(self)}"
        self._inbox = connection.channel.context.socket(zmq.PAIR)  # the relay thread's end
        self._inbox.bind(inbox)
        self._outbox = connection.channel.context.socket(zmq.PAIR)  # execute's end
        self._outbox.connect(inbox)
        self._thread = threading.Thread(target=self._run, name="pytriton_like-stream-relay", daemon=True)
        self._thread.start()

    def execute(self, requests):
        connection = self._connection
        batch_id = next(connection.ids)
        with self._lock:
            self._senders[batch_id] = [request.get_response_sender() for request in requests]
        # the relay's time is not measured here: execute returns before the callable starts
        self._metrics.record(len(requests))
        try:
            frames = encode_message(Kind.BATCH, batch_id, request_items(requests))
        except (MemoryError, TypeError, ValueError) as exc:
            self._finish(batch_id, f"pytriton_like relay failed for model {connection.model!r}: {exc}", relay=True)
            return None
        self._outbox.send_multipart(frames)
        return None

    def _run(self) -> None:
        connection = self._connection
        poller = zmq.Poller()
        poller.register(connection.channel.socket, zmq.POLLIN)
        poller.register(self._inbox, zmq.POLLIN)
        while True:
            events = dict(poller.poll(LIVENESS_PERIOD_MS))
            if self._inbox in events:
                frames = self._inbox.recv_multipart()
                if frames == _STOP:
                    return
                connection.channel.socket.send_multipart(frames)
            if connection.channel.socket in events:
                try:
                    self._dispatch(decode_message(connection.channel.socket.recv_multipart(), connection.reader))
                except ProtocolError as exc:
                    logger.error("model %s: dropping a malformed message: %s", connection.model, exc)
            if not events:
                try:
                    connection.check_owner()
                except RelayError as exc:
                    self._finish_all(str(exc), relay=True)

    def _dispatch(self, message: Message) -> None:
        with self._lock:
            senders = self._senders.get(message.batch_id)
        if senders is None:
            return
        if message.final:
            self._metrics.record_errors(callable_ns=message.extra.get("c", 0))
        if message.error is not None:
            self._finish(message.batch_id, message.error, relay=False)
            return
        if message.items and len(message.items) != len(senders):
            error = f"worker answered {len(message.items)} responses for {len(senders)} requests"
            self._finish(message.batch_id, error, relay=True)
            return
        for index, (item, tensors) in enumerate(zip(message.items, message.tensors)):
            sender = senders[index]
            if sender is None:
                continue
            if "e" in item:
                sender.send(error_response(str(item["e"])), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                senders[index] = None
                self._metrics.record_errors(callable_errors=1)
            else:
                sender.send(response(item, tensors))
        if message.final:
            self._finish(message.batch_id, None)

    def _finish(self, batch_id: int, error: Optional[str], relay: bool = False) -> None:
        """Close every open stream of the batch, with ``error`` as its last response if given.

        Args:
            relay: the error is the relay's, not the callable's (for the failure metrics).
        """
        with self._lock:
            senders = self._senders.pop(batch_id, [])
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        failed = 0
        for sender in senders:
            if sender is None:
                continue
            if error is None:
                sender.send(flags=final)
            else:
                sender.send(error_response(error), flags=final)
                failed += 1
        if failed:
            self._metrics.record_errors(**{"relay_errors" if relay else "callable_errors": failed})

    def _finish_all(self, error: str, relay: bool) -> None:
        with self._lock:
            pending = list(self._senders)
        for batch_id in pending:
            self._finish(batch_id, error, relay=relay)

    def close(self) -> None:
        self._outbox.send_multipart(_STOP)
        self._thread.join()
        self._finish_all(f"model {self._connection.model!r} is unloading", relay=True)
        self._metrics.close()
        self._outbox.close(linger=0)
        self._inbox.close(linger=0)
        self._connection.close()

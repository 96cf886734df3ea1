"""The proxy model: runs inside Triton's Python-backend stub and relays batches to the worker.

One instance of it per model instance; each connects to its own worker socket in the user
process, says HELLO, and from then on sends each ``execute`` batch as one BATCH message and
waits for its RESULT. Imports only the stdlib, numpy, zmq and this package.
"""

import itertools
import json
import logging
import os

import triton_python_backend_utils as pb_utils  # provided by the stub
import zmq

from .protocol import Kind, ProtocolError, decode_message, encode_message
from .shm import ArenaReader, ArenaWriter, process_alive

__all__ = ["TritonPythonModel"]

logger = logging.getLogger(__name__)

# How often a waiting proxy checks that the user process is still alive.
_LIVENESS_PERIOD_MS = 1000


class RelayError(Exception):
    """The worker could not be reached or answered out of protocol."""


class TritonPythonModel:
    """Triton's Python-backend entry points, relaying to the worker in the user process."""

    def initialize(self, args):
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(version_dir, "relay.json"), encoding="utf-8") as file:
            settings = json.load(file)
        index = int(args["model_instance_name"].rsplit("_", 1)[1])
        address = settings["sockets"][index]
        self._model = args["model_name"]
        self._owner_pid = int(settings["owner_pid"])
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(address)
        self._ids = itertools.count(1)
        self._reader = ArenaReader()
        self._arena = ArenaWriter(self._owner_pid, f"{settings['tag']}-{index}-in")
        self._socket.send_multipart(
            encode_message(Kind.HELLO, extra={"instance": args["model_instance_name"], "pid": os.getpid()})
        )
        welcome = self._receive(0, timeout_ms=int(settings["handshake_timeout_s"] * 1000))
        if welcome.kind != Kind.WELCOME:
            raise RelayError(f"expected WELCOME from the worker at {address}, got {welcome.kind.name}")
        self._threshold = int(welcome.extra["shm_threshold"])

    def execute(self, requests):
        items = []
        for request in requests:
            tensors = {tensor.name(): tensor.as_numpy() for tensor in request.inputs()}
            fields = {"p": request.parameters(), "q": list(request.requested_output_names())}
            items.append((fields, tensors))
        batch_id = next(self._ids)
        try:
            frames = encode_message(Kind.BATCH, batch_id, items, arena=self._arena, threshold=self._threshold)
            self._socket.send_multipart(frames)
            result = self._receive(batch_id)
        except (RelayError, ProtocolError, MemoryError, TypeError, zmq.ZMQError) as exc:
            message = f"pytriton_like relay failed for model {self._model!r}: {type(exc).__name__}: {exc}"
            return [_error_response(message) for _ in requests]
        if result.error is not None:
            return [_error_response(result.error) for _ in requests]
        if len(result.items) != len(requests):
            message = f"worker answered {len(result.items)} responses for {len(requests)} requests"
            return [_error_response(message) for _ in requests]
        return [_response(item, tensors) for item, tensors in zip(result.items, result.tensors)]

    def _receive(self, batch_id: int, timeout_ms: int = -1):
        """The next message for ``batch_id``; waits while the user process lives (and ``timeout_ms``)."""
        waited = 0
        while True:
            if self._socket.poll(_LIVENESS_PERIOD_MS):
                message = decode_message(self._socket.recv_multipart(), self._reader)
                if message.batch_id == batch_id:
                    return message
                logger.warning("dropping a reply to batch %d while waiting for %d", message.batch_id, batch_id)
                continue
            waited += _LIVENESS_PERIOD_MS
            if not process_alive(self._owner_pid):
                raise RelayError(f"the user process (pid {self._owner_pid}) that serves the model is gone")
            if 0 <= timeout_ms <= waited:
                raise RelayError(f"no answer from the worker within {timeout_ms / 1000:.0f} s")

    def finalize(self):
        self._socket.close(linger=0)
        self._context.term()
        self._arena.close()
        self._reader.close()


def _response(item, tensors):
    if "e" in item:
        return _error_response(str(item["e"]))
    outputs = [pb_utils.Tensor(name, array) for name, array in tensors.items()]
    return pb_utils.InferenceResponse(output_tensors=outputs)


def _error_response(message: str):
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message))


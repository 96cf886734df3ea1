"""Relay for a non-decoupled model: one execute, one BATCH, one RESULT, one response per request."""

import triton_python_backend_utils as pb_utils  # provided by the stub
import zmq

from .connection import Connection, RelayError, request_items
from .protocol import Flags, Kind, ProtocolError, encode_message
from .shm import ArenaWriter

__all__ = ["BatchRelay", "error_response", "response"]


class BatchRelay:
    """Sends each batch and waits for its outcome (the stub runs one execute at a time)."""

    items = staticmethod(request_items)  # what a BATCH says of each request

    def __init__(self, connection: Connection):
        self._connection = connection
        self._arena = ArenaWriter(
            connection.owner_pid, f"{connection.tag}-{connection.index}-in", connection.shm_limit
        )

    def execute(self, requests):
        connection = self._connection
        batch_id = next(connection.ids)
        try:
            frames = encode_message(
                Kind.BATCH, batch_id, self.items(requests), arena=self._arena, threshold=connection.shm_threshold
            )
            connection.socket.send_multipart(frames)
            result = connection.receive(batch_id)
        except (RelayError, ProtocolError, MemoryError, TypeError, zmq.ZMQError) as exc:
            message = f"pytriton_like relay failed for model {connection.model!r}: {type(exc).__name__}: {exc}"
            return [error_response(message) for _ in requests]
        if result.error is not None:
            return [error_response(result.error) for _ in requests]
        if not result.flags & Flags.FINAL or len(result.items) != len(requests):
            message = f"worker answered {len(result.items)} responses for {len(requests)} requests"
            return [error_response(message) for _ in requests]
        return [response(item, tensors) for item, tensors in zip(result.items, result.tensors)]

    def close(self) -> None:
        self._arena.close()
        self._connection.close()


def response(item, tensors):
    """The InferenceResponse for one RESULT item."""
    if "e" in item:
        return error_response(str(item["e"]))
    return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(name, array) for name, array in tensors.items()])


def error_response(message: str):
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message))

"""Relay for a non-decoupled model: one execute, one BATCH, one RESULT, one response per request."""

import time

import triton_python_backend_utils as pb_utils  # provided by the stub

from .connection import Connection, RelayError, request_items
from .metrics import RelayMetrics
from .protocol import Kind, ProtocolError, encode_message
from .shm import ArenaWriter

__all__ = ["BatchRelay", "error_response", "response"]


class BatchRelay:
    """Sends each batch and waits for its outcome (the stub runs one execute at a time)."""

    items = staticmethod(request_items)  # what a BATCH says of each request

    def __init__(self, connection: Connection, metrics: RelayMetrics):
        self._connection = connection
        self._metrics = metrics
        self._arena = ArenaWriter(
            connection.owner_pid, f"{connection.tag}-{connection.index}-in", connection.shm_limit
        )

    def execute(self, requests):
        started = time.perf_counter_ns()
        connection = self._connection
        count = len(requests)
        batch_id = next(connection.ids)
        try:
            connection.nudge()  # the worker wakes while this batch is encoded
            frames = encode_message(
                Kind.BATCH, batch_id, self.items(requests), arena=self._arena, threshold=connection.shm_threshold
            )
            connection.send(frames)
            result = connection.receive(batch_id)
        except (RelayError, ProtocolError, MemoryError, TypeError) as exc:
            message = f"pytriton_like relay failed for model {connection.model!r}: {type(exc).__name__}: {exc}"
            self._metrics.record(count, execute_ns=time.perf_counter_ns() - started, relay_errors=count)
            # A worker that is gone (its process killed) is UNAVAILABLE (HTTP 503): worth a retry elsewhere.
            unavailable = isinstance(exc, RelayError)
            return [error_response(message, unavailable=unavailable) for _ in requests]
        callable_ns = result.extra.get("c", 0)
        if result.error is not None:
            responses, callable_errors, relay_errors = [error_response(result.error) for _ in requests], count, 0
        elif not result.final or len(result.items) != count:
            message = f"worker answered {len(result.items)} responses for {count} requests"
            responses, callable_errors, relay_errors = [error_response(message) for _ in requests], 0, count
        else:
            responses = [response(item, tensors) for item, tensors in zip(result.items, result.tensors)]
            callable_errors, relay_errors = sum("e" in item for item in result.items), 0
        self._metrics.record(
            count,
            execute_ns=time.perf_counter_ns() - started,
            callable_ns=callable_ns,
            callable_errors=callable_errors,
            relay_errors=relay_errors,
        )
        return responses

    def close(self) -> None:
        self._metrics.close()
        self._arena.close()
        self._connection.close()


def response(item, tensors):
    """The InferenceResponse for one RESULT item."""
    if "e" in item:
        return error_response(str(item["e"]))
    return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(name, array) for name, array in tensors.items()])


def error_response(message: str, unavailable: bool = False):
    if unavailable:
        error = pb_utils.TritonError(message, pb_utils.TritonError.UNAVAILABLE)
    else:
        error = pb_utils.TritonError(message)
    return pb_utils.InferenceResponse(output_tensors=[], error=error)

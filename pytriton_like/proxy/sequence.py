"""Relay for a model with a sequence batcher: the correlation id and start/end flags go along.

Triton's ``direct`` strategy keeps each sequence in its own batch slot and fills the slots
that have no request with null requests (correlation id 0, flags 0, uninitialised inputs);
their responses are thrown away. They never reach the worker: the callable sees only the
real requests.
"""

import triton_python_backend_utils as pb_utils  # provided by the stub

from .batch import BatchRelay
from .connection import sequence_request_items

__all__ = ["SequenceRelay"]


class SequenceRelay(BatchRelay):
    """A :class:`BatchRelay` whose requests carry their sequence, without the batcher's null requests."""

    items = staticmethod(sequence_request_items)

    def execute(self, requests):
        # Triton refuses a request to a sequence model without a correlation id (0 or ""), so
        # only the batcher's null requests have none.
        real = [bool(request.correlation_id()) for request in requests]
        if all(real):
            return super().execute(requests)
        responses = iter(super().execute([request for request, is_real in zip(requests, real) if is_real]))
        return [next(responses) if is_real else _null_response() for is_real in real]


def _null_response():
    return pb_utils.InferenceResponse(output_tensors=[])

"""The proxy model: runs inside Triton's Python-backend stub and relays batches to the worker.

One instance of it per model instance; each connects to its own worker socket in the user
process and says HELLO (so the model is ready only once its worker answers). Imports only the
stdlib, numpy, zmq and this package.
"""

import triton_python_backend_utils as pb_utils  # provided by the stub

from .batch import BatchRelay
from .connection import Connection
from .metrics import RelayMetrics
from .sequence import SequenceRelay
from .stream import StreamRelay

__all__ = ["TritonPythonModel"]


class TritonPythonModel:
    """Triton's Python-backend entry points, relaying to the worker in the user process."""

    def initialize(self, args):
        metrics = RelayMetrics(pb_utils, args["model_name"], args["model_version"])
        try:
            connection = Connection(args)
        except BaseException:
            metrics.close()
            raise
        if connection.decoupled:
            self._relay = StreamRelay(connection, metrics)
        elif connection.sequence:
            self._relay = SequenceRelay(connection, metrics)
        else:
            self._relay = BatchRelay(connection, metrics)

    def execute(self, requests):
        return self._relay.execute(requests)

    def finalize(self):
        self._relay.close()

"""The proxy model: runs inside Triton's Python-backend stub and relays batches to the worker.

One instance of it per model instance; each connects to its own worker socket in the user
process and says HELLO (so the model is ready only once its worker answers). Imports only the
stdlib, numpy, zmq and this package.
"""

from .batch import BatchRelay
from .connection import Connection
from .sequence import SequenceRelay
from .stream import StreamRelay

__all__ = ["TritonPythonModel"]


class TritonPythonModel:
    """Triton's Python-backend entry points, relaying to the worker in the user process."""

    def initialize(self, args):
        connection = Connection(args)
        if connection.decoupled:
            self._relay = StreamRelay(connection)
        elif connection.sequence:
            self._relay = SequenceRelay(connection)
        else:
            self._relay = BatchRelay(connection)

    def execute(self, requests):
        return self._relay.execute(requests)

    def finalize(self):
        self._relay.close()

"""A nested call with the least Python there can be, for bench/nested.py and bench/nested_split.py.

``triton_context.client()`` checks the call's arguments against the model, plans the request,
takes a pooled connection, encodes the CALL, decodes the REPLY and maps errors. :class:`RawCaller`
does only what the backend needs: a connection of its own to the backend's call socket, a CALL of
small tensors encoded and sent, the REPLY received and decoded (its outputs inline: tensors under
``calls.OUTPUT_THRESHOLD_BYTES``). The difference between the two is what the client's Python
costs a nested call.
"""

import threading
from typing import Dict

import numpy as np
import psutil

from pytriton_like.proxy.types import Request
from pytriton_like.relay import call_codec, calls, transport

__all__ = ["calls_socket", "RawCaller"]


def calls_socket() -> str:
    """``unix://PATH`` of the backend's call socket, from the command line of the tritonserver
    this process runs (a Triton of this process)."""
    for child in psutil.Process().children(recursive=True):
        try:
            arguments = child.cmdline()
        except psutil.Error:
            continue
        for argument in arguments:
            if "calls-socket=" in argument:
                return transport.UNIX_SCHEME + argument.split("calls-socket=", 1)[1]
    raise RuntimeError("no tritonserver with a call socket among this process's children")


class RawCaller:
    """Calls ``model`` with small tensors over a connection of its own, one call at a time.

    Args:
        model: the model called.
    """

    def __init__(self, model: str):
        self._model = model
        self._lock = threading.Lock()
        self._channel = transport.connect(calls_socket())
        self._channel.send([call_codec.encode_hello(None, calls.OUTPUT_THRESHOLD_BYTES, None)])
        self._channel.readable(-1)
        self._channel.recv()  # WELCOME

    def call(self, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """The outputs of ``model`` for ``inputs`` (each under OUTPUT_THRESHOLD_BYTES)."""
        parts, _ = call_codec.encode_call(1, self._model, None, "1", Request(inputs))
        with self._lock:
            self._channel.send(parts)
            self._channel.readable(-1)
            body, _ = self._channel.recv()
        reply = call_codec.decode_reply(body)
        if reply.failed:
            raise RuntimeError(reply.text)
        return reply.outputs

    def close(self) -> None:
        self._channel.close()

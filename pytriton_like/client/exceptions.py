"""Errors raised by the pytriton_like clients.

The client branch of the error tree rooted at :class:`pytriton_like.exceptions.PyTritonError`::

    PyTritonError
    └── PyTritonClientError                          any client failure
        ├── PyTritonClientValueError                 bad arguments (inputs, parameters, headers); a ValueError too
        │   └── PyTritonClientInvalidUrlError        a url that cannot be parsed or has a bad scheme
        ├── PyTritonClientTimeoutError               server/model not ready in time, or inference too slow
        │   └── PyTritonClientModelUnavailableTimeoutError  the wait ended, the model still unavailable
        │                                                   (also a PyTritonClientModelUnavailableError)
        ├── PyTritonClientModelUnavailableError      model unknown, not loaded, or server unreachable
        │   └── PyTritonClientModelNotFoundError     ... the server answered a request so (HTTP 404)
        │                                            (also a PyTritonClientInferenceServerError, as PyTriton raises)
        ├── PyTritonClientClosedError                the client was closed
        ├── PyTritonClientModelDoesntSupportBatchingError  infer_batch on a model with max_batch_size 0
        ├── PyTritonClientInferenceServerError       the server (or the callable) failed the request
        └── PyTritonClientQueueFullError             FuturesModelClient's request queue is full

Every error keeps the context it was raised in as attributes (``model_name``,
``model_version``, ``url``; ``timeout_s`` for timeouts), ``None`` when unknown.
Errors translated from tritonclient, grpc or socket errors chain the original
as ``__cause__``.
"""

from typing import Optional

from ..exceptions import PyTritonError

__all__ = [
    "PyTritonClientError",
    "PyTritonClientValueError",
    "PyTritonClientInvalidUrlError",
    "PyTritonClientTimeoutError",
    "PyTritonClientModelUnavailableTimeoutError",
    "PyTritonClientModelUnavailableError",
    "PyTritonClientModelNotFoundError",
    "PyTritonClientClosedError",
    "PyTritonClientModelDoesntSupportBatchingError",
    "PyTritonClientInferenceServerError",
    "PyTritonClientQueueFullError",
]


class PyTritonClientError(PyTritonError):
    """Root of every error raised by the clients.

    Args:
        message: what was expected and what came.
        model_name: name of the model the client talks to, when known.
        model_version: requested model version (``None``: the latest).
        url: the server url with its scheme, e.g. ``grpc://localhost:8001``.

    Attributes:
        model_name: name of the model the client talks to, when known.
        model_version: requested model version (``None``: the latest).
        url: the server url with its scheme.
    """

    def __init__(
        self,
        message: str,
        *,
        model_name: Optional[str] = None,
        model_version: Optional[str] = None,
        url: Optional[str] = None,
    ):
        super().__init__(message)
        self.model_name = model_name
        self.model_version = model_version
        self.url = url


class PyTritonClientValueError(PyTritonClientError, ValueError):
    """An argument given to a client has a wrong value or type (also a ``ValueError``)."""


class PyTritonClientInvalidUrlError(PyTritonClientValueError):
    """The server url cannot be parsed or has a scheme other than http/grpc."""


class PyTritonClientTimeoutError(PyTritonClientError):
    """The server or model was not ready in time, or an inference took too long.

    Args:
        message: what timed out.
        timeout_s: the timeout that expired, in seconds.
        **context (str | None): ``model_name``, ``model_version`` and ``url``, as :class:`PyTritonClientError` takes them.

    Attributes:
        timeout_s: the timeout that expired, in seconds, when known.
    """

    def __init__(self, message: str, *, timeout_s: Optional[float] = None, **context):
        super().__init__(message, **context)
        self.timeout_s = timeout_s


class PyTritonClientModelUnavailableError(PyTritonClientError):
    """The model (or its version) is not available: unknown, not loaded, or the server is unreachable."""


class PyTritonClientModelUnavailableTimeoutError(PyTritonClientModelUnavailableError, PyTritonClientTimeoutError):
    """The wait for a model (``init_timeout_s``, ``wait_for_model``) ended with the model still
    unavailable: not in the server's repository, not loaded, or failed to load.

    A :class:`PyTritonClientTimeoutError`, as PyTriton raises when the wait ends, and a
    :class:`PyTritonClientModelUnavailableError`, as the server's repository index tells; the
    message says which models the server has.
    """


class PyTritonClientClosedError(PyTritonClientError):
    """The client was used after ``close()``."""


class PyTritonClientModelDoesntSupportBatchingError(PyTritonClientError):
    """``infer_batch`` was called for a model that does not batch (``max_batch_size`` 0)."""


class PyTritonClientInferenceServerError(PyTritonClientError):
    """The server refused or failed an inference request; the message is the server's.

    Args:
        message: the server's message (for a bound callable that raised, its exception's type and text).
        status: the status the server answered with.
        **context (str | None): ``model_name``, ``model_version`` and ``url``, as :class:`PyTritonClientError` takes them.

    Attributes:
        status: the status the server answered with (HTTP code such as ``"500"`` or gRPC
            status such as ``"StatusCode.INTERNAL"``), when known.
    """

    def __init__(self, message: str, *, status: Optional[str] = None, **context):
        super().__init__(message, **context)
        self.status = status


class PyTritonClientQueueFullError(PyTritonClientError):
    """A non-blocking ``FuturesModelClient`` could not queue a request: its queue is full."""


class PyTritonClientModelNotFoundError(PyTritonClientModelUnavailableError, PyTritonClientInferenceServerError):
    """The server answered a request that it has no such model (version): unknown, or unloaded meanwhile.

    Both a :class:`PyTritonClientModelUnavailableError` (what it means) and a
    :class:`PyTritonClientInferenceServerError` (what PyTriton raises then).
    """

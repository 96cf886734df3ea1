"""The one place where tritonclient, grpc, aiohttp and socket errors become client errors.

Errors are told apart by type, then (for tritonclient's ``InferenceServerException``
and grpc's ``RpcError``) by the status the server answered with:

==========================================================  ======================================
what came                                                   what is raised
==========================================================  ======================================
socket / asyncio timeout, gRPC ``DEADLINE_EXCEEDED``        PyTritonClientTimeoutError
HTTP 404, gRPC ``NOT_FOUND`` (unknown model or version)     PyTritonClientModelNotFoundError (an unavailable model, and a server error)
HTTP 503, gRPC ``UNAVAILABLE``, refused/reset connections,  PyTritonClientModelUnavailableError
a connection the server closed mid-answer (it died),
unresolvable host, aiohttp connection errors
any other status the server answered with                   PyTritonClientInferenceServerError
tritonclient errors without a status (raised client-side)   PyTritonClientError
==========================================================  ======================================

A nested call's failure (``relay.calls.CallFailed``: Triton's own error code and message, from
inside the server) maps as the gRPC status Triton's gRPC endpoint would have sent for that code.

Errors that are already client errors pass through unchanged.

A gRPC stream delivers the server's error responses as data: tritonclient turns each
into an ``InferenceServerException`` without a status. :func:`translate_stream_error`
maps those to ``PyTritonClientInferenceServerError`` (the server's answer, its message
kept) and everything else as :func:`translate_error` does.
"""

import asyncio
import contextlib
import dataclasses
import http.client
import socket
import sys
from typing import Iterator, Optional, Tuple

from tritonclient.utils import InferenceServerException

from ..relay.calls import CallFailed
from .exceptions import (
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientModelNotFoundError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)

__all__ = ["ErrorContext", "mapped_errors", "translate_error", "translate_stream_error", "map_errors"]

# What map_errors catches (mapped_errors()); anything else (e.g. a bug of ours) propagates untouched.
# http.client.HTTPException: geventhttpclient's HTTPConnectionClosed when the server went away mid-answer.
_ALWAYS_MAPPED = (InferenceServerException, CallFailed, OSError, asyncio.TimeoutError, http.client.HTTPException)


def _loaded_type(module: str, name: str) -> Optional[type]:
    """``module.name`` if that module is loaded. grpc and aiohttp are imported with the clients that
    use them (client/connections.py): an error of theirs means they are loaded."""
    return getattr(sys.modules.get(module), name, None)


def mapped_errors() -> Tuple[type, ...]:
    """The errors :func:`map_errors` translates: tritonclient's, the socket layer's, asyncio's
    timeout, and grpc's ``RpcError`` and aiohttp's ``ClientError`` once those are loaded."""
    loaded = (_loaded_type("grpc", "RpcError"), _loaded_type("aiohttp", "ClientError"))
    return _ALWAYS_MAPPED + tuple(kind for kind in loaded if kind is not None)

# Triton's error codes (TRITONSERVER_Error_Code) as its gRPC endpoint answers them.
_GRPC_STATUS_OF_TRITON_CODE = {
    0: "StatusCode.UNKNOWN",
    1: "StatusCode.INTERNAL",
    2: "StatusCode.NOT_FOUND",
    3: "StatusCode.INVALID_ARGUMENT",
    4: "StatusCode.UNAVAILABLE",
    5: "StatusCode.UNIMPLEMENTED",
    6: "StatusCode.ALREADY_EXISTS",
    7: "StatusCode.CANCELLED",
}
_TIMEOUT_STATUSES = frozenset({"StatusCode.DEADLINE_EXCEEDED", "408", "504"})
_NOT_FOUND_STATUSES = frozenset({"StatusCode.NOT_FOUND", "404"})
_UNAVAILABLE_STATUSES = frozenset({"StatusCode.UNAVAILABLE", "503"})


@dataclasses.dataclass(frozen=True)
class ErrorContext:
    """What a client was doing when an error came; it goes into the message and attributes.

    Attributes:
        operation: what was attempted, e.g. ``"inference"`` or ``"readiness check"``.
        model_name: the model the client talks to.
        model_version: the requested version (``None``: the latest).
        url: the server url with its scheme.
        timeout_s: the timeout that applied to the operation, if any.
    """

    operation: str
    model_name: Optional[str]
    model_version: Optional[str]
    url: str
    timeout_s: Optional[float] = None

    def describe(self) -> str:
        """E.g. ``inference of model 'Double' (latest version) at http://localhost:8000``
        (``log settings request at http://localhost:8000`` for a server-wide call, with no model)."""
        if self.model_name is None:
            return f"{self.operation} at {self.url}"
        version = f"version {self.model_version}" if self.model_version else "latest version"
        return f"{self.operation} of model {self.model_name!r} ({version}) at {self.url}"

    def attributes(self) -> dict:
        """Context keyword arguments of :class:`PyTritonClientError`."""
        return {"model_name": self.model_name, "model_version": self.model_version, "url": self.url}


def translate_error(exc: BaseException, context: ErrorContext) -> PyTritonClientError:
    """Returns the client error for ``exc``; the caller raises it ``from exc``.

    Args:
        exc: an error raised by tritonclient, grpc, aiohttp or the socket layer.
        context: what the client was doing.

    Returns:
        The matching :class:`PyTritonClientError` (``exc`` itself if it already is one).
    """
    if isinstance(exc, PyTritonClientError):
        return exc
    if isinstance(exc, InferenceServerException):
        return _from_status(exc.status(), exc.message() or str(exc), context)
    if isinstance(exc, CallFailed):
        return _from_status(_GRPC_STATUS_OF_TRITON_CODE.get(exc.code, "StatusCode.UNKNOWN"), exc.message, context)
    rpc_error = _loaded_type("grpc", "RpcError")
    if rpc_error is not None and isinstance(exc, rpc_error):
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = exc.details() if callable(getattr(exc, "details", None)) else None
        return _from_status(str(code) if code is not None else None, details or str(exc), context)
    # socket.timeout is TimeoutError (an OSError) since 3.10, and asyncio.TimeoutError is TimeoutError
    # since 3.11; aiohttp's ServerTimeoutError is both an asyncio.TimeoutError and a ClientError.
    if isinstance(exc, (socket.timeout, TimeoutError, asyncio.TimeoutError)):
        return _timeout(context, str(exc) or type(exc).__name__)
    client_error = _loaded_type("aiohttp", "ClientError")
    if isinstance(exc, (OSError, http.client.HTTPException)) or (client_error is not None and isinstance(exc, client_error)):
        return PyTritonClientModelUnavailableError(
            f"{context.describe()} failed: cannot reach the server: {type(exc).__name__}: {exc}",
            **context.attributes(),
        )
    return PyTritonClientError(
        f"{context.describe()} failed: {type(exc).__name__}: {exc}",
        **context.attributes(),
    )


def translate_stream_error(exc: BaseException, context: ErrorContext) -> PyTritonClientError:
    """Returns the client error for an error a gRPC stream delivered; the caller raises it ``from exc``.

    tritonclient (sync and asyncio) reports an error response in a stream (e.g. the model's
    callable failed after some responses) as an ``InferenceServerException`` with no status;
    unlike a status-less error tritonclient raises itself, it is the server's answer.
    Errors of the stream itself (``UNAVAILABLE``, ``CANCELLED``...) carry a status and map
    as in :func:`translate_error`.
    """
    if isinstance(exc, InferenceServerException) and exc.status() is None or isinstance(exc, CallFailed):
        message = exc.message if isinstance(exc, CallFailed) else exc.message() or exc
        return PyTritonClientInferenceServerError(
            f"{context.describe()} failed: {message}", status=None, **context.attributes()
        )
    return translate_error(exc, context)


@contextlib.contextmanager
def map_errors(context: ErrorContext) -> Iterator[None]:
    """Re-raises errors of :func:`mapped_errors` as client errors chained ``from`` the original."""
    try:
        yield
    except PyTritonClientError:
        raise
    except Exception as exc:
        if not isinstance(exc, mapped_errors()):
            raise
        raise translate_error(exc, context) from exc


def _from_status(status: Optional[str], message: str, context: ErrorContext) -> PyTritonClientError:
    if status is None:
        # tritonclient raised it itself, before or after talking to the server
        return PyTritonClientError(f"{context.describe()} failed in tritonclient: {message}", **context.attributes())
    if status in _TIMEOUT_STATUSES:
        return _timeout(context, message)
    if status in _NOT_FOUND_STATUSES:
        return PyTritonClientModelNotFoundError(
            f"{context.describe()} failed: model not available: {message}", status=status, **context.attributes()
        )
    if status in _UNAVAILABLE_STATUSES:
        return PyTritonClientModelUnavailableError(
            f"{context.describe()} failed: server unavailable: {message}", **context.attributes()
        )
    return PyTritonClientInferenceServerError(
        f"{context.describe()} failed: {message}", status=status, **context.attributes()
    )


def _timeout(context: ErrorContext, detail: str) -> PyTritonClientTimeoutError:
    limit = f" within {context.timeout_s:g} s" if context.timeout_s is not None else ""
    return PyTritonClientTimeoutError(
        f"{context.describe()} did not finish{limit}: {detail}",
        timeout_s=context.timeout_s,
        **context.attributes(),
    )

"""What every client of a Triton server is apart from its I/O: url, timeouts, access token, closed state, errors.

:class:`ServerCore` is the part of a client that concerns the server, not a model: the server-wide
calls (readiness, repository index, ``call_server``) need only this. A model client's
:class:`~pytriton_like.client.core.ClientCore` adds the model. Neither talks to the server.
"""

import contextlib
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

from ..access_tokens import is_local_host, read_token
from .arguments import verify_flag
from .error_mapping import ErrorContext, map_errors
from .exceptions import PyTritonClientClosedError, PyTritonClientValueError
from .management import index_entries, message_to_dict
from .readiness import ReadinessWaiter
from .server_calls import ServerCall, build_server_call
from .url import Protocol, TritonUrl

__all__ = ["ServerCore", "DEFAULT_INIT_TIMEOUT_S", "DEFAULT_INFERENCE_TIMEOUT_S", "check_timeout"]

DEFAULT_INIT_TIMEOUT_S = 300.0
DEFAULT_INFERENCE_TIMEOUT_S = 60.0
# After a readiness wait expired, one more call asks the repository index why; it gets this long.
_VERDICT_TIMEOUT_S = 1.0
_MIN_PROBE_TIMEOUT_S = 0.05
# Where Triton's restricted endpoints look for the access token (--http-restricted-api /
# --grpc-restricted-protocol ...:triton-access-token=<token>); gRPC prefixes the metadata key.
_ACCESS_TOKEN_HEADERS = {Protocol.HTTP: "triton-access-token", Protocol.GRPC: "triton-grpc-protocol-triton-access-token"}


class ServerCore:
    """What a client of a server is, without its connections.

    Args:
        url: server url, ``[http://|grpc://]host[:port]``.
        init_timeout_s: how long to wait for the server (and a model) to be ready (default 300 s).
        inference_timeout_s: how long one request may take (default 60 s).
        access_token: token for Triton's restricted endpoints, sent with every call; ``None``:
            for a server on this host, the token its owner recorded (access_tokens.py), once
            a restricted call needs it.

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed.
        PyTritonClientValueError: a bad timeout or token.
    """

    model_name: Optional[str] = None  # a model client's (ClientCore) model; None: the server's calls only
    model_version: Optional[str] = None

    def __init__(
        self,
        url: Union[str, TritonUrl],
        *,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        access_token: Optional[str] = None,
    ):
        self.url = url if isinstance(url, TritonUrl) else TritonUrl.from_url(url)
        self.init_timeout_s = check_timeout("init_timeout_s", init_timeout_s, DEFAULT_INIT_TIMEOUT_S)
        self.inference_timeout_s = check_timeout("inference_timeout_s", inference_timeout_s, DEFAULT_INFERENCE_TIMEOUT_S)
        if access_token is not None and (not isinstance(access_token, str) or not access_token):
            raise PyTritonClientValueError("access_token must be a non-empty string or None")
        self._access_token = access_token
        self._auth_headers = {_ACCESS_TOKEN_HEADERS[self.protocol]: access_token} if access_token else {}
        # Without a token, a client of a server on this host uses the one its owner recorded for
        # this port (access_tokens.py), once there is one.
        self._find_token = access_token is None and is_local_host(self.url.hostname)
        self._closed = threading.Event()

    @property
    def protocol(self) -> Protocol:
        """HTTP or gRPC."""
        return self.url.protocol

    @property
    def closed(self) -> bool:
        """Whether the client was closed."""
        return self._closed.is_set()

    def close(self) -> None:
        """Marks the client closed; later calls raise :class:`PyTritonClientClosedError`."""
        self._closed.set()

    def check_open(self) -> None:
        """Raises :class:`PyTritonClientClosedError` if the client was closed."""
        if self._closed.is_set():
            raise PyTritonClientClosedError(f"{self._who()} is closed", **self.attributes())

    def context(self, operation: str, timeout_s: Optional[float] = None, *, server_wide: bool = False) -> ErrorContext:
        """The error context of an operation of this client (``server_wide``: of no model)."""
        return ErrorContext(
            operation=operation,
            model_name=None if server_wide else self.model_name,
            model_version=None if server_wide else self.model_version,
            url=self.url.with_scheme,
            timeout_s=timeout_s,
        )

    @contextlib.contextmanager
    def errors(self, operation: str, timeout_s: Optional[float] = None, *, server_wide: bool = False) -> Iterator[None]:
        """Maps errors of the I/O inside to client errors (see :mod:`.error_mapping`); ``server_wide``:
        the operation concerns no model (``call_server``).

        Any error that happens because the client was closed meanwhile (from another
        thread) becomes :class:`PyTritonClientClosedError`.
        """
        try:
            with map_errors(self.context(operation, timeout_s, server_wide=server_wide)):
                yield
        except Exception as exc:
            # a call racing close() fails in whatever way its closed connection does (grpc raises
            # ValueError on a closed channel); what the caller needs to know is that it was closed
            if self._closed.is_set() and not isinstance(exc, PyTritonClientClosedError):
                raise PyTritonClientClosedError(
                    f"{self._who()} was closed during {operation}: {exc}", **self.attributes()
                ) from exc
            raise

    def pause(self, seconds: float) -> None:
        """Sleeps between readiness probes (sync clients); returns early, raising, if the client is closed."""
        self._closed.wait(seconds)
        self.check_open()

    def waiter(self, timeout_s: Optional[float], asyncio_words: bool = False) -> ReadinessWaiter:
        """A readiness wait of ``timeout_s`` (default: ``init_timeout_s``); ``asyncio_words``: its
        timeout errors begin as PyTriton's asyncio clients' do."""
        timeout_s = self.init_timeout_s if timeout_s is None else check_timeout("timeout_s", timeout_s, None)
        return ReadinessWaiter(timeout_s, self.context("wait for readiness", timeout_s), asyncio_words=asyncio_words)

    def control_timeout_s(self, waiter: Optional[ReadinessWaiter] = None) -> float:
        """Timeout of one readiness probe or config read: never past the wait's deadline."""
        limit = min(self.inference_timeout_s, self.init_timeout_s)
        if waiter is None:
            return limit
        # a probe gets at least 50 ms, so that a nearly spent deadline still allows a real try
        return max(_MIN_PROBE_TIMEOUT_S, min(limit, waiter.remaining()))

    def grpc_kwargs(self, timeout_s: float) -> Dict[str, float]:
        """Per-call timeout keyword arguments of tritonclient.grpc (HTTP has its timeouts per client)."""
        return {"client_timeout": timeout_s} if self.protocol is Protocol.GRPC else {}

    def control_kwargs(self, timeout_s: float) -> Dict[str, Any]:
        """Keyword arguments of tritonclient's readiness calls: timeout (gRPC) and access token."""
        kwargs: Dict[str, Any] = self.grpc_kwargs(timeout_s)
        if self._find_token and not self._auth_headers:
            token = read_token(self.url.port)
            if token is not None:
                self._auth_headers = {_ACCESS_TOKEN_HEADERS[self.protocol]: token}
        if self._auth_headers:
            kwargs["headers"] = dict(self._auth_headers)
        return kwargs

    def verdict_timeout_s(self) -> float:
        """Timeout of the repository-index call that explains an expired readiness wait."""
        return min(_VERDICT_TIMEOUT_S, self.control_timeout_s())

    def server_call(self, name: str, arguments: Mapping[str, Any]) -> ServerCall:
        """A server-wide call (``server_calls.SERVER_CALLS``) with the token and, for gRPC, the timeout.

        Raises:
            PyTritonClientValueError: an unknown call or a bad argument.
        """
        call = build_server_call(self.protocol, name, arguments)
        call.kwargs.update(self.control_kwargs(self.control_timeout_s()))
        return call

    def statistics_call(self, all_models: bool, timeout_s: float) -> Dict[str, Any]:
        """Arguments of tritonclient's ``get_inference_statistics``: this client's model (version), or every model
        (``all_models``, or a client of no model).

        Raises:
            PyTritonClientValueError: ``all_models`` is not a bool.
        """
        kwargs: Dict[str, Any] = {"model_name": self.model_name or "", "model_version": self.model_version or ""}
        kwargs.update(self.control_kwargs(timeout_s))
        if verify_flag("all_models", all_models):
            kwargs.update(model_name="", model_version="")  # Triton's "every model"
        return kwargs

    def raw_statistics(self, response: Any) -> Dict[str, Any]:
        """``{"model_stats": [...]}`` from ``get_inference_statistics`` (``statistics_call`` arguments)."""
        return response if self.protocol is Protocol.HTTP else message_to_dict(response)

    def raw_index(self, response: Any) -> List[Dict[str, Any]]:
        """The entries from ``get_model_repository_index`` (``control_kwargs`` arguments)."""
        return index_entries(response)

    def _who(self) -> str:
        if self.model_name is None:
            return f"the client of {self.url}"
        return f"the client of model {self.model_name!r} at {self.url}"

    def attributes(self) -> dict:
        """The keyword arguments that tie a client error to this client: model, version, url."""
        return {"model_name": self.model_name, "model_version": self.model_version, "url": self.url.with_scheme}


def check_timeout(name: str, value: Optional[float], default: Optional[float]) -> float:
    """A timeout argument checked (``None``: ``default``)."""
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise PyTritonClientValueError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)

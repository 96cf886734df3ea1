"""Helpers over tritonclient clients, as PyTriton's ``pytriton.client.utils``.

Users call them to wait for a server or a model before sending requests with their own
tritonclient clients (``ModelClient`` waits by itself)::

    client = create_client_from_url("grpc://localhost:8001")
    wait_for_model_ready(client, "AddSub", timeout_s=60)

Restricted API groups (the repository index among them, docs/security.md) need the token:
pass ``headers={"triton-access-token": token}``.
"""

import logging
import socket
import time
import warnings
from typing import Any, Dict, Optional, Tuple, Union

import tritonclient.grpc
import tritonclient.http
from grpc import RpcError
from tritonclient.utils import InferenceServerException

from ..constants import DEFAULT_GRPC_PORT, DEFAULT_HTTP_PORT
from ..model_config.triton_model_config import TritonModelConfig
from ..polling import poll
from .config_parser import parse_model_config
from .exceptions import PyTritonClientTimeoutError
from .readiness import ModelState
from .url import TritonUrl
from .warnings import NotSupportedTimeoutWarning

__all__ = [
    "DEFAULT_GRPC_PORT",
    "DEFAULT_HTTP_PORT",
    "LATEST_MODEL_VERSION",
    "ModelState",
    "TritonUrl",
    "create_client_from_url",
    "get_model_config",
    "get_model_state",
    "parse_grpc_response",
    "parse_http_response",
    "wait_for_model_ready",
    "wait_for_server_ready",
]

_LOGGER = logging.getLogger(__name__)

_DEFAULT_NETWORK_TIMEOUT_S = 60.0
_DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S = 60.0
_DEFAULT_WAIT_FOR_MODEL_TIMEOUT_S = 300.0

LATEST_MODEL_VERSION = "<latest>"
"""How messages name the version of a model asked for without one (Triton then picks the highest ready)."""

SyncClient = Union[tritonclient.grpc.InferenceServerClient, tritonclient.http.InferenceServerClient]


def parse_http_response(models) -> Dict[Tuple[str, str], ModelState]:
    """States by ``(name, version)`` from an HTTP repository index (entries without a version are left out).

    Args:
        models (list): the index as ``tritonclient.http``'s ``get_model_repository_index()`` returns it.
    """
    return _states((entry.get("name"), entry.get("version"), entry.get("state")) for entry in models)


def parse_grpc_response(models) -> Dict[Tuple[str, str], ModelState]:
    """States by ``(name, version)`` from the ``models`` of a gRPC repository index.

    Args:
        models (Sequence): the ``models`` field of ``tritonclient.grpc``'s ``get_model_repository_index()`` answer.
    """
    return _states((entry.name, entry.version, entry.state) for entry in models)


def _states(entries) -> Dict[Tuple[str, str], ModelState]:
    # A version listed without a state is still being loaded.
    return {(name, version): ModelState(state) if state else ModelState.LOADING for name, version, state in entries if version}


def latest_state(states: Dict[Tuple[str, str], ModelState], model_name: str, model_version: Optional[str]) -> ModelState:
    """The state of ``model_version`` of ``model_name`` (its highest version when None); UNAVAILABLE if unknown."""
    if model_version is not None:
        return states.get((model_name, model_version), ModelState.UNAVAILABLE)
    versions = [(int(version), state) for (name, version), state in states.items() if name == model_name]
    return max(versions)[1] if versions else ModelState.UNAVAILABLE


def get_model_state(
    client: SyncClient, model_name: str, model_version: Optional[str] = None, headers: Optional[dict] = None
) -> ModelState:
    """The state of a model version in the server's repository index (UNAVAILABLE when it is not there).

    Args:
        client: a tritonclient HTTP or gRPC client.
        model_name: the model.
        model_version: its version; ``None``: the highest one.
        headers: sent with the request (the access token of a restricted server).
    """
    index = client.get_model_repository_index(headers=headers)
    states = parse_http_response(index) if isinstance(index, list) else parse_grpc_response(index.models)
    return latest_state(states, model_name, model_version)


def get_model_config(
    client: SyncClient,
    model_name: str,
    model_version: Optional[str] = None,
    timeout_s: Optional[float] = None,
    headers: Optional[dict] = None,
) -> TritonModelConfig:
    """Waits for the model to be ready (``timeout_s``, default 300 s), then reads its configuration.

    Args:
        client: a tritonclient HTTP or gRPC client.
        model_name: the model.
        model_version: its version; ``None``: the latest.
        timeout_s: how long to wait for the server and the model (default 300 s).
        headers: sent with the requests (the access token of a restricted server).

    Raises:
        PyTritonClientTimeoutError: the server or model was not ready in time.
    """
    wait_for_model_ready(client, model_name=model_name, model_version=model_version, timeout_s=timeout_s, headers=headers)
    if isinstance(client, tritonclient.grpc.InferenceServerClient):
        config = client.get_model_config(model_name, model_version or "", as_json=True, headers=headers)["config"]
    else:
        config = client.get_model_config(model_name, model_version or "", headers=headers)
    return parse_model_config(config, model_version)


def _warn_on_too_big_network_timeout(client: SyncClient, timeout_s: float) -> None:
    if not isinstance(client, tritonclient.http.InferenceServerClient):
        return
    pool = getattr(getattr(client, "_client_stub", None), "_connection_pool", None)  # tritonclient's own state
    if pool is None:
        return
    for name in ("network_timeout", "connection_timeout"):
        if (getattr(pool, name) - timeout_s) / timeout_s > 0.001:
            warnings.warn(
                "Client network and/or connection timeout is bigger than the requested timeout_s, so a wait can"
                f" overrun it: {name}={getattr(pool, name)} timeout_s={timeout_s}",
                NotSupportedTimeoutWarning,
                stacklevel=3,
            )
            return


def _server_ready(client: SyncClient, headers: Optional[dict]) -> bool:
    try:
        return bool(client.is_server_ready(headers=headers) and client.is_server_live(headers=headers))
    except (InferenceServerException, RpcError, ConnectionError, socket.gaierror):
        return False


def wait_for_server_ready(client: SyncClient, timeout_s: Optional[float] = None, headers: Optional[dict] = None) -> None:
    """Waits until the server is ready and live (``timeout_s``, default 60 s).

    Args:
        client: a tritonclient HTTP or gRPC client.
        timeout_s: how long to wait (default 60 s).
        headers: sent with the requests.

    Raises:
        PyTritonClientTimeoutError: it was not ready in time.
    """
    timeout_s = _DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S if timeout_s is None else timeout_s
    _warn_on_too_big_network_timeout(client, timeout_s)
    if not poll(lambda: _server_ready(client, headers), timeout_s):
        raise PyTritonClientTimeoutError("Waiting for server to be ready timed out.", timeout_s=timeout_s)


def wait_for_model_ready(
    client: SyncClient,
    model_name: str,
    model_version: Optional[str] = None,
    timeout_s: Optional[float] = None,
    headers: Optional[dict] = None,
) -> None:
    """Waits until the server and the model (``model_version``, default its latest) are ready.

    Args:
        client: a tritonclient HTTP or gRPC client.
        model_name: the model.
        model_version: its version; ``None``: the latest.
        timeout_s: for both together; default 300 s.
        headers: sent with the requests.

    Raises:
        PyTritonClientTimeoutError: either was not ready in time.

    Example:
        >>> client = create_client_from_url("grpc://localhost:8001")       # doctest: +SKIP
        >>> wait_for_model_ready(client, "AddSub", timeout_s=60)            # doctest: +SKIP
    """
    version = model_version or ""
    timeout_s = _DEFAULT_WAIT_FOR_MODEL_TIMEOUT_S if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s
    wait_for_server_ready(client, timeout_s=timeout_s, headers=headers)
    remaining = max(0.0, deadline - time.monotonic())
    if not poll(lambda: client.is_model_ready(model_name, version, headers=headers), remaining):
        raise PyTritonClientTimeoutError(
            f"Waiting for model {model_name}/{version or LATEST_MODEL_VERSION} to be ready timed out.",
            timeout_s=timeout_s,
            model_name=model_name,
            model_version=model_version,
        )


def create_client_from_url(url: str, network_timeout_s: Optional[float] = None) -> SyncClient:
    """A tritonclient client for ``url`` (``[http|grpc://]host[:port]``; HTTP and its port by default).

    Args:
        url: the server, ``[http|grpc://]host[:port]``.
        network_timeout_s: the HTTP client's connection and network timeouts (tritonclient.grpc
            takes none but for inference: a ``NotSupportedTimeoutWarning`` says so).

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed.
    """
    parsed = TritonUrl.from_url(url)
    kwargs: Dict[str, Any] = {}
    if parsed.scheme == "grpc":
        warnings.warn(
            "tritonclient.grpc doesn't support timeout for other commands than infer."
            f" Ignoring network_timeout: {network_timeout_s or _DEFAULT_NETWORK_TIMEOUT_S}.",
            NotSupportedTimeoutWarning,
            stacklevel=2,
        )
        return tritonclient.grpc.InferenceServerClient(parsed.without_scheme)
    if network_timeout_s is not None:
        kwargs = {"connection_timeout": network_timeout_s, "network_timeout": network_timeout_s}
    return tritonclient.http.InferenceServerClient(parsed.without_scheme, **kwargs)

"""Model control calls to a running server (load, unload, readiness, index, config, statistics).

The boundary between our process and the server's control API: one interface,
:class:`ServerControl`, over tritonclient's HTTP client (what ``Triton`` uses; the answers are
Triton's JSON documents as its HTTP endpoint sends them) or its gRPC client (``RemoteTriton``
with a ``grpc://`` url: the health and load/unload calls). Its refusals are ``ControlError``;
:mod:`.management` is the one place that turns them into ``PyTritonServerError``.
"""

import time
from typing import Any, Callable, Dict, List, Optional, Union

# Imported with the module, not at first call: a call can come while the server starts, when a
# signal may cut serve() short, and an import cut short leaves gevent half-initialised.
import tritonclient.grpc
import tritonclient.http
from tritonclient.utils import InferenceServerException

from .security import ACCESS_TOKEN_HEADER

__all__ = ["ServerControl", "ControlError"]


_LOADED_STATES = {"READY", "LOADING", "UNLOADING"}
_FIRST_POLL_S = 0.01
_MAX_POLL_S = 0.2


class ControlError(Exception):
    """The server refused or failed a control call; the message is the server's."""


class ServerControl:
    """Calls Triton's model-repository and health endpoints on ``host:port``.

    Args:
        access_token: sent with every call, for the restricted API groups (security.py); or a
            function that tells it at each call.
        grpc: talk to the gRPC endpoint on ``host:port`` instead of HTTP (the health and
            load/unload calls; the others answer in protobuf there).
    """

    def __init__(
        self,
        host: str,
        port: int,
        access_token: Union[str, None, Callable[[], Optional[str]]] = None,
        *,
        grpc: bool = False,
    ):
        self._address = f"{host}:{port}"
        self._grpc = grpc
        self._header = f"triton-grpc-protocol-{ACCESS_TOKEN_HEADER}" if grpc else ACCESS_TOKEN_HEADER
        self._token = access_token

    def _headers(self) -> Optional[Dict[str, str]]:
        """The token's header, read now when the token is a function (RemoteTriton: the owner's file)."""
        token = self._token() if callable(self._token) else self._token
        return {self._header: token} if token else None

    @property
    def address(self) -> str:
        """``host:port`` of the server's endpoint."""
        return self._address

    def load(
        self, model_name: str, timeout_s: float, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None
    ) -> None:
        """Load (or reload) a model; returns when it is loaded, raises ControlError if it failed.

        Args:
            config: the model's config as JSON, instead of its config.pbtxt in the server's repository.
            files: ``{"file:<path>": content}`` of the model's folder (with ``config``), for a server
                that cannot read our files.
        """
        extra: Dict[str, Any] = {"config": config, "files": files} if config is not None else {}
        self._call(timeout_s, lambda client: client.load_model(model_name, headers=self._headers(), **extra))

    def unload(self, model_name: str, timeout_s: float) -> None:
        """Unload a model."""
        self._call(timeout_s, lambda client: client.unload_model(model_name, headers=self._headers()))

    def wait_unloaded(self, model_name: str, timeout_s: float) -> None:
        """Wait until no version of the model is loaded or unloading (Triton's unload returns before that).

        Triton tells of it only in its repository index, so this polls the index with a short backoff.
        """
        deadline = time.monotonic() + timeout_s
        delay = _FIRST_POLL_S
        while True:
            busy = sorted(
                {entry.get("state") for entry in self.repository_index() if entry.get("name") == model_name}
                & _LOADED_STATES
            )
            if not busy:
                return
            if time.monotonic() > deadline:
                raise ControlError(f"model {model_name!r} is still {', '.join(busy)} after {timeout_s:.0f} s")
            time.sleep(delay)
            delay = min(delay * 2, _MAX_POLL_S)

    def loaded(self, model_names) -> List[str]:
        """Those of ``model_names`` with a version still loaded, loading or unloading."""
        wanted = set(model_names)
        return sorted(
            {entry.get("name") for entry in self.repository_index() if entry.get("state") in _LOADED_STATES} & wanted
        )

    def server_live(self, timeout_s: float = 10) -> bool:
        """Whether the server is live (answers at all)."""
        try:
            return self._call(timeout_s, lambda client: client.is_server_live(headers=self._headers()))
        except ControlError:
            return False

    def server_ready(self, timeout_s: float = 10) -> bool:
        """Whether the server reports ready (``/v2/health/ready`` answers 200)."""
        try:
            return self._call(timeout_s, lambda client: client.is_server_ready(headers=self._headers()))
        except ControlError:
            return False

    def model_ready(self, model_name: str, version: Optional[int] = None, timeout_s: float = 10) -> bool:
        """Whether the model (version) is ready."""
        try:
            return self._call(
                timeout_s, lambda client: client.is_model_ready(model_name, _version(version), headers=self._headers())
            )
        except ControlError:
            return False

    def repository_index(self, timeout_s: float = 10) -> List[Dict[str, Any]]:
        """Every model of every repository: ``name``, and ``version``, ``state``, ``reason`` once loaded."""
        return self._call(timeout_s, lambda client: client.get_model_repository_index(headers=self._headers()))

    def model_config(self, model_name: str, version: Optional[int] = None, timeout_s: float = 10) -> Dict[str, Any]:
        """The configuration of a loaded model (version)."""
        return self._call(
            timeout_s, lambda client: client.get_model_config(model_name, _version(version), headers=self._headers())
        )

    def statistics(
        self, model_name: Optional[str] = None, version: Optional[int] = None, timeout_s: float = 10
    ) -> Dict[str, Any]:
        """Inference statistics (``{"model_stats": [...]}``) of one model (version), or of all."""
        return self._call(
            timeout_s,
            lambda client: client.get_inference_statistics(
                model_name or "", _version(version) if model_name else "", headers=self._headers()
            ),
        )

    def _call(self, timeout_s: float, call: Callable[[Any], Any]) -> Any:
        """``call`` with a client of its own, closed after it: no connection stays open (an open
        HTTP connection holds up tritonserver's stop), and the calls of several threads never
        share a client (tritonclient.http's clients are not thread-safe)."""
        if self._grpc:  # its timeouts are per call; these calls take none (as tritonclient's defaults)
            client = tritonclient.grpc.InferenceServerClient(self._address)
        else:
            client = tritonclient.http.InferenceServerClient(
                self._address, connection_timeout=timeout_s, network_timeout=timeout_s
            )
        try:
            return call(client)
        except InferenceServerException as exc:
            raise ControlError(exc.message() or f"HTTP {exc.status()}") from exc
        except OSError as exc:
            raise ControlError(f"cannot reach the server at {'grpc' if self._grpc else 'http'}://{self._address}: {exc}") from exc
        finally:
            client.close()


def _version(version: Optional[int]) -> str:
    """tritonclient's model version argument ("": the latest)."""
    return str(version) if version else ""

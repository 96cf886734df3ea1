"""Model control calls to a running server (load, unload, readiness, index, config, statistics).

The boundary between our process and the server's control API: one interface,
:class:`ServerControl`, over Triton's HTTP endpoint (what ``Triton`` uses: a few JSON calls, made
with the standard library's ``http.client``, so a process that only serves loads neither
tritonclient's HTTP stack nor gevent) or tritonclient's gRPC client (``RemoteTriton`` with a
``grpc://`` url: the health and load/unload calls). Its refusals are ``ControlError``;
:mod:`.management` is the one place that turns them into ``PyTritonServerError``.
"""

import base64
import http.client
import json
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import quote

from ..polling import poll
from .security import ACCESS_TOKEN_HEADER

__all__ = ["ServerControl", "ControlError"]


_LOADED_STATES = {"READY", "LOADING", "UNLOADING"}


class ControlError(Exception):
    """The server refused or failed a control call; the message is the server's."""


class ServerControl:
    """Calls Triton's model-repository and health endpoints on ``host:port``.

    Args:
        access_token: sent with every call, for the restricted API groups (security.py); or a
            function that tells it at each call.
        grpc: talk to the gRPC endpoint on ``host:port`` instead of HTTP (the health,
            load/unload and repository-index calls; the model config and statistics are read
            over HTTP only).
    """

    def __init__(
        self,
        host: str,
        port: int,
        access_token: Union[str, None, Callable[[], Optional[str]]] = None,
        *,
        grpc: bool = False,
    ):
        self._host = host
        self._port = port
        self._address = f"{host}:{port}"
        self._token = access_token
        self._grpc = None
        if grpc:
            # Imported now, not at the first call: a call can come while the server starts, when a
            # signal may cut serve() short, and an import cut short is not imported again.
            import tritonclient.grpc  # noqa: PLC0415 - only RemoteTriton over gRPC needs it

            self._grpc = tritonclient.grpc

    def _token_now(self) -> Optional[str]:
        """The token, read now when it is a function (RemoteTriton: the owner's file)."""
        return self._token() if callable(self._token) else self._token

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
        if self._grpc:
            extra: Dict[str, Any] = {"config": config, "files": files} if config is not None else {}
            self._grpc_call(lambda client, headers: client.load_model(model_name, headers=headers, **extra))
            return
        parameters: Dict[str, str] = {}
        if config is not None:
            parameters["config"] = config
            for path, content in (files or {}).items():
                parameters[path] = base64.b64encode(content).decode("ascii")
        body = {"parameters": parameters} if parameters else {}
        self._http("POST", f"/v2/repository/models/{quote(model_name)}/load", timeout_s, body)

    def unload(self, model_name: str, timeout_s: float) -> None:
        """Unload a model."""
        if self._grpc:
            self._grpc_call(lambda client, headers: client.unload_model(model_name, headers=headers))
            return
        body = {"parameters": {"unload_dependents": False}}
        self._http("POST", f"/v2/repository/models/{quote(model_name)}/unload", timeout_s, body)

    def wait_unloaded(self, model_name: str, timeout_s: float, give_up: Callable[[], bool] = lambda: False) -> bool:
        """Wait until no version of the model is loaded or unloading (Triton's unload returns before
        that); Triton tells of it only in its repository index, which is polled (pytriton_like/polling.py).

        Returns True once it is unloaded, False as soon as ``give_up()`` says so while it is not.
        """
        busy: List[str] = []

        def unloaded() -> bool:
            index = self.repository_index()
            busy[:] = sorted({entry.get("state") for entry in index if entry.get("name") == model_name} & _LOADED_STATES)
            return not busy or give_up()

        if not poll(unloaded, timeout_s):
            raise ControlError(f"model {model_name!r} is still {', '.join(busy)} after {timeout_s:.0f} s")
        return not busy

    def loaded(self, model_names) -> List[str]:
        """Those of ``model_names`` with a version still loaded, loading or unloading."""
        wanted = set(model_names)
        return sorted(
            {entry.get("name") for entry in self.repository_index() if entry.get("state") in _LOADED_STATES} & wanted
        )

    def server_live(self, timeout_s: float = 10) -> bool:
        """Whether the server is live (answers at all)."""
        if self._grpc:
            return self._grpc_answers(lambda client, headers: client.is_server_live(headers=headers))
        return self._http_ok("/v2/health/live", timeout_s)

    def server_ready(self, timeout_s: float = 10) -> bool:
        """Whether the server reports ready (``/v2/health/ready`` answers 200)."""
        if self._grpc:
            return self._grpc_answers(lambda client, headers: client.is_server_ready(headers=headers))
        return self._http_ok("/v2/health/ready", timeout_s)

    def model_ready(self, model_name: str, version: Optional[int] = None, timeout_s: float = 10) -> bool:
        """Whether the model (version) is ready."""
        if self._grpc:
            version_text = str(version) if version else ""
            return self._grpc_answers(
                lambda client, headers: client.is_model_ready(model_name, version_text, headers=headers)
            )
        return self._http_ok(f"{_model_path(model_name, version)}/ready", timeout_s)

    def repository_index(self, timeout_s: float = 10) -> List[Dict[str, Any]]:
        """Every model of every repository: ``name``, and ``version``, ``state``, ``reason`` once loaded."""
        if self._grpc:
            answer = self._grpc_call(lambda client, headers: client.get_model_repository_index(headers, as_json=True))
            return answer.get("models", [])
        return self._http("POST", "/v2/repository/index", timeout_s, {})

    def model_config(self, model_name: str, version: Optional[int] = None, timeout_s: float = 10) -> Dict[str, Any]:
        """The configuration of a loaded model (version)."""
        return self._http("GET", f"{_model_path(model_name, version)}/config", timeout_s)

    def statistics(
        self, model_name: Optional[str] = None, version: Optional[int] = None, timeout_s: float = 10
    ) -> Dict[str, Any]:
        """Inference statistics (``{"model_stats": [...]}``) of one model (version), or of all."""
        path = f"{_model_path(model_name, version)}/stats" if model_name else "/v2/models/stats"
        return self._http("GET", path, timeout_s)

    def _http(self, method: str, path: str, timeout_s: float, body: Optional[Dict[str, Any]] = None) -> Any:
        """One call on a connection of its own, closed after it: no connection stays open (an open
        HTTP connection holds up tritonserver's stop), and the calls of several threads share
        nothing. Returns the answer's JSON; raises ControlError with the server's message."""
        if self._grpc:
            raise ControlError(f"{method} {path}: this control call is made over HTTP only")
        status, data = self._exchange(method, path, timeout_s, body)
        if status != 200:
            raise ControlError(_error_message(status, data))
        return json.loads(data) if data else None

    def _http_ok(self, path: str, timeout_s: float) -> bool:
        """Whether a GET of ``path`` answers 200 (False also when the server cannot be reached)."""
        try:
            return self._exchange("GET", path, timeout_s)[0] == 200
        except ControlError:
            return False

    def _exchange(
        self, method: str, path: str, timeout_s: float, body: Optional[Dict[str, Any]] = None
    ) -> Tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        token = self._token_now()
        if token:
            headers[ACCESS_TOKEN_HEADER] = token
        connection = http.client.HTTPConnection(self._host, self._port, timeout=timeout_s)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ControlError(f"cannot reach the server at http://{self._address}: {exc}") from exc
        finally:
            connection.close()

    def _grpc_call(self, call: Callable[[Any, Optional[Dict[str, str]]], Any]) -> Any:
        """``call(client, headers)`` with a gRPC client of its own, closed after it. Its timeouts are
        per call; these calls take none (as tritonclient's defaults)."""
        token = self._token_now()
        headers = {f"triton-grpc-protocol-{ACCESS_TOKEN_HEADER}": token} if token else None
        client = self._grpc.InferenceServerClient(self._address)
        try:
            return call(client, headers)
        except self._grpc.InferenceServerException as exc:
            raise ControlError(exc.message() or f"gRPC status {exc.status()}") from exc
        except OSError as exc:
            raise ControlError(f"cannot reach the server at grpc://{self._address}: {exc}") from exc
        finally:
            client.close()

    def _grpc_answers(self, call: Callable[[Any, Optional[Dict[str, str]]], bool]) -> bool:
        try:
            return self._grpc_call(call)
        except ControlError:
            return False


def _model_path(model_name: str, version: Optional[int]) -> str:
    """``/v2/models/<name>`` with ``/versions/<n>`` when a version is given (none: the latest)."""
    path = f"/v2/models/{quote(model_name)}"
    return f"{path}/versions/{version}" if version else path


def _error_message(status: int, data: bytes) -> str:
    """The server's words for a refused call: the ``error`` of its JSON answer, else its text."""
    text = data.decode("utf-8", "replace").strip()
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and answer.get("error"):
        return str(answer["error"])
    return text or f"HTTP {status}"

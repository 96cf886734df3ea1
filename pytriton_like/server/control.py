"""Model control calls to the running server (load, unload, readiness, index, config, statistics) over HTTP.

The answers are Triton's JSON documents as its HTTP endpoint sends them.
"""

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional

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
        access_token: sent with every call, for the restricted API groups (security.py).
    """

    def __init__(self, host: str, port: int, access_token: Optional[str] = None):
        self._base = f"http://{host}:{port}"
        self._headers = {ACCESS_TOKEN_HEADER: access_token} if access_token else {}

    def load(self, model_name: str, timeout_s: float) -> None:
        """Load (or reload) a model; returns when it is loaded, raises ControlError if it failed."""
        self._call("POST", f"/v2/repository/models/{_quoted(model_name)}/load", timeout_s, body=b"{}")

    def unload(self, model_name: str, timeout_s: float) -> None:
        """Unload a model."""
        self._call("POST", f"/v2/repository/models/{_quoted(model_name)}/unload", timeout_s, body=b"{}")

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

    def server_ready(self, timeout_s: float = 10) -> bool:
        """Whether the server reports ready (``/v2/health/ready`` answers 200)."""
        try:
            self._call("GET", "/v2/health/ready", timeout_s)
        except ControlError:
            return False
        return True

    def model_ready(self, model_name: str, version: Optional[int] = None, timeout_s: float = 10) -> bool:
        """Whether the model (version) is ready."""
        path = _model_path(model_name, version) + "/ready"
        try:
            self._call("GET", path, timeout_s)
        except ControlError:
            return False
        return True

    def repository_index(self, timeout_s: float = 10) -> List[Dict[str, Any]]:
        """Every model of every repository: ``name``, and ``version``, ``state``, ``reason`` once loaded."""
        return json.loads(self._call("POST", "/v2/repository/index", timeout_s, body=b"{}"))

    def model_config(self, model_name: str, version: Optional[int] = None, timeout_s: float = 10) -> Dict[str, Any]:
        """The configuration of a loaded model (version)."""
        return json.loads(self._call("GET", _model_path(model_name, version) + "/config", timeout_s))

    def statistics(
        self, model_name: Optional[str] = None, version: Optional[int] = None, timeout_s: float = 10
    ) -> Dict[str, Any]:
        """Inference statistics (``{"model_stats": [...]}``) of one model (version), or of all."""
        path = _model_path(model_name, version) if model_name else "/v2/models"
        return json.loads(self._call("GET", path + "/stats", timeout_s))

    def _call(self, method: str, path: str, timeout_s: float, body: Optional[bytes] = None) -> bytes:
        request = urllib.request.Request(self._base + path, data=body, method=method, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            raise ControlError(_server_message(exc.read()) or f"HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ControlError(f"cannot reach the server at {self._base}: {exc}") from exc


def _quoted(model_name: str) -> str:
    return urllib.parse.quote(model_name, safe="")


def _model_path(model_name: str, version: Optional[int]) -> str:
    path = f"/v2/models/{_quoted(model_name)}"
    return path + (f"/versions/{version}" if version else "")


def _server_message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("error", ""))
    except (ValueError, AttributeError):
        return body.decode("utf-8", "replace")

"""Model control calls to the running server (load, unload, readiness) over its HTTP endpoint."""

import json
import urllib.error
import urllib.request
from typing import Optional

__all__ = ["ServerControl", "ControlError"]


class ControlError(Exception):
    """The server refused or failed a control call; the message is the server's."""


class ServerControl:
    """Calls Triton's model-repository and health endpoints on ``host:port``."""

    def __init__(self, host: str, port: int):
        self._base = f"http://{host}:{port}"

    def load(self, model_name: str, timeout_s: float) -> None:
        """Load (or reload) a model; returns when it is loaded, raises ControlError if it failed."""
        self._call("POST", f"/v2/repository/models/{model_name}/load", timeout_s, body=b"{}")

    def unload(self, model_name: str, timeout_s: float) -> None:
        """Unload a model."""
        self._call("POST", f"/v2/repository/models/{model_name}/unload", timeout_s, body=b"{}")

    def model_ready(self, model_name: str, version: Optional[int] = None, timeout_s: float = 10) -> bool:
        """Whether the model (version) is ready."""
        path = f"/v2/models/{model_name}" + (f"/versions/{version}" if version else "") + "/ready"
        try:
            self._call("GET", path, timeout_s)
        except ControlError:
            return False
        return True

    def _call(self, method: str, path: str, timeout_s: float, body: Optional[bytes] = None) -> bytes:
        request = urllib.request.Request(self._base + path, data=body, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            raise ControlError(_server_message(exc.read()) or f"HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ControlError(f"cannot reach the server at {self._base}: {exc}") from exc


def _server_message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("error", ""))
    except (ValueError, AttributeError):
        return body.decode("utf-8", "replace")

"""Model management on the running server, with its errors as ``PyTritonServerError``.

:class:`~.control.ServerControl` makes the calls and raises ``ControlError`` with the server's
words; this is the one place that turns those into :class:`PyTritonServerError`, with the end of
the server's log. After every load the Python-backend stubs' shared-memory regions are made
owner-only (Triton creates them readable by all; see :meth:`ServerProcess.protect_stub_regions`).
"""

import contextlib
from typing import Any, Dict, Iterable, Iterator, List, Optional, Protocol

from ..exceptions import PyTritonInvalidOperationError, PyTritonServerError
from .control import ControlError, ServerControl

__all__ = ["ServerModels", "LOAD_TIMEOUT_S", "no_control"]

# Longest wait for the server to load or unload a model.
LOAD_TIMEOUT_S = 120


class Server(Protocol):
    """What of the server process the calls need: its log, and its stubs' regions."""

    def log_tail(self) -> str:
        """The last lines the server printed."""

    def protect_stub_regions(self) -> None:
        """Make its stubs' shared-memory regions owner-only."""


class ServerModels:
    """The model-management calls of a running server (started by ``Triton``, or another's for ``RemoteTriton``).

    It keeps the names of the models loaded through it or at the start (:attr:`loaded`): a server
    started again loads those.

    Args:
        control: the server's control calls.
        server: the server process (for its log, and its stubs' regions); ``None`` for a server
            another process started (``RemoteTriton``).
        name: how errors name the server.
        loaded: the models the server loaded at its start.
    """

    def __init__(
        self, control: ServerControl, server: Optional[Server], name: str = "tritonserver", loaded: Iterable[str] = ()
    ):
        self.control = control
        self._server = server
        self._name = name
        self._loaded: Dict[str, None] = dict.fromkeys(loaded)  # in the order they were loaded

    @property
    def loaded(self) -> List[str]:
        """The models loaded through these calls (or at the start) and not unloaded since, in load order."""
        return list(self._loaded)

    @contextlib.contextmanager
    def failing_to(self, operation: str) -> Iterator[None]:
        """Turn a ``ControlError`` of the block into ``PyTritonServerError("tritonserver failed to <operation>: …")``."""
        try:
            yield
        except ControlError as exc:
            log_tail = self._server.log_tail() if self._server is not None else None
            raise PyTritonServerError(f"{self._name} failed to {operation}: {exc}", log_tail=log_tail) from None

    def load(
        self,
        model_name: str,
        operation: Optional[str] = None,
        config: Optional[str] = None,
        files: Optional[Dict[str, bytes]] = None,
    ) -> None:
        """Load (or reload) a model; ``operation`` names it in the error (default: ``load model 'name'``).

        ``config`` and ``files``: the model's entry sent with the call (see :meth:`ServerControl.load`).
        """
        with self.failing_to(operation or f"load model {model_name!r}"):
            self.control.load(model_name, LOAD_TIMEOUT_S, config=config, files=files)
            self._loaded[model_name] = None
            if self._server is not None:
                self._server.protect_stub_regions()

    def unload(self, model_name: str) -> None:
        """Unload every version of a model; returns once Triton has unloaded it."""
        with self.failing_to(f"unload model {model_name!r}"):
            self._loaded.pop(model_name, None)
            self.control.unload(model_name, LOAD_TIMEOUT_S)
            self.control.wait_unloaded(model_name, LOAD_TIMEOUT_S)

    def repository_index(self) -> List[Dict[str, Any]]:
        """Every model of the server's repositories (Triton's index entries)."""
        with self.failing_to("read the repository index"):
            return self.control.repository_index()

    def model_ready(self, model_name: str, version: Optional[int] = None) -> bool:
        """Whether the model (version) is ready for requests."""
        return self.control.model_ready(model_name, version)

    def model_config(self, model_name: str, version: Optional[int] = None) -> Dict[str, Any]:
        """The configuration of a loaded model as Triton holds it."""
        with self.failing_to(f"read the config of model {model_name!r}"):
            return self.control.model_config(model_name, version)

    def statistics(self, model_name: Optional[str] = None) -> Dict[str, Any]:
        """Triton's inference statistics of one model or all."""
        with self.failing_to("read inference statistics"):
            return self.control.statistics(model_name)


def no_control(operation: str) -> PyTritonInvalidOperationError:
    """The error of a model-control ``operation`` on a server without its HTTP endpoint."""
    return PyTritonInvalidOperationError(
        f"cannot {operation}: model control goes through the HTTP endpoint, which allow_http=False disabled"
    )

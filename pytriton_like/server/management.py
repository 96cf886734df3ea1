"""Model management on the running server, with its errors as ``PyTritonServerError``.

:class:`~.control.ServerControl` makes the calls and raises ``ControlError`` with the server's
words; this is the one place that turns those into :class:`PyTritonServerError`, with the end of
the server's log. After every load the Python-backend stubs' shared-memory regions are made
owner-only (Triton creates them readable by all; see :meth:`ServerProcess.protect_stub_regions`).

A load or unload asked while the supervisor starts tritonserver again waits for it (up to
:data:`LOAD_TIMEOUT_S`), and one that the server's death cut short is made again once it serves.

tritonserver 2.51 keeps a decoupled model ``UNLOADING`` for good once a gRPC stream of it was
cancelled by its client (the relay answers such a stream nothing more: native/responses.h). An
unload that sits there while none of the model's requests is in flight for :data:`STUCK_AFTER_S`
restarts the server, which comes back without the model.
"""

import contextlib
import hashlib
import pathlib
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Tuple, TypeVar

from ..exceptions import PyTritonInvalidOperationError, PyTritonServerError
from .control import ControlError, ServerControl

__all__ = ["ServerModels", "LOAD_TIMEOUT_S", "STUCK_AFTER_S", "no_control", "load_api_entry"]

# Longest wait for the server to load or unload a model (a restart of the server under way included).
LOAD_TIMEOUT_S = 120
# How long a model may stay UNLOADING with none of its requests in flight before the server is
# restarted without it.
STUCK_AFTER_S = 3.0
# Names the binding in the config of a model sent to another process's server (load_api_entry).
_BINDING_PARAMETER = "pytriton_like_binding"

T = TypeVar("T")


class Server(Protocol):
    """What of the server process the calls need: its log, its stubs' regions, whether it serves."""

    def log_tail(self) -> str:
        """The last lines the server printed."""

    def protect_stub_regions(self) -> None:
        """Make its stubs' shared-memory regions owner-only."""

    def wait_serving(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the server to serve (a restart under way done); False if it does not,
        or will not (it is not started again)."""

    def serving(self) -> bool:
        """Whether the server serves now (its process runs, and no restart is under way)."""

    def models_changed(self) -> None:
        """A model was loaded or unloaded (its memory's baseline moves)."""

    def restart(self, reason: str) -> None:
        """Stop the server for ``reason``: its supervisor starts it again with the models loaded now."""


class ServerModels:
    """The model-management calls of a running server (started by ``Triton``, or another's for ``RemoteTriton``).

    It keeps the names of the models loaded through it or at the start (:attr:`loaded`): a server
    started again loads those.

    Args:
        control: the server's control calls.
        server: the server process (for its log, its stubs' regions and its restarts); ``None``
            for a server another process started (``RemoteTriton``).
        name: how errors name the server.
        loaded: the models the server loaded at its start.
        entries: for a server that cannot read our model repository (``RemoteTriton``): our
            repository, whose entry of a model each load sends (:func:`load_api_entry`).
        idle: whether none of a model's requests is in flight (False when that is not known);
            with it an unload that does not end restarts the server (see the module's text).
    """

    def __init__(
        self,
        control: ServerControl,
        server: Optional[Server],
        name: str = "tritonserver",
        loaded: Iterable[str] = (),
        entries: Optional[pathlib.Path] = None,
        idle: Optional[Callable[[str], bool]] = None,
    ):
        self.control = control
        self._server = server
        self._idle = idle
        self._name = name
        self._entries = entries
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

    def load(self, model_name: str, operation: Optional[str] = None) -> None:
        """Load (or reload) a model; ``operation`` names it in the error (default: ``load model 'name'``)."""

        def load() -> None:
            if self._entries is None:
                self.control.load(model_name, LOAD_TIMEOUT_S)
            else:
                config, files = load_api_entry(self._entries / model_name)
                self.control.load(model_name, LOAD_TIMEOUT_S, config=config, files=files)
            self._loaded[model_name] = None
            if self._server is not None:
                self._server.protect_stub_regions()
                self._server.models_changed()

        self._while_serving(operation or f"load model {model_name!r}", load)

    def unload(self, model_name: str) -> None:
        """Unload every version of a model; returns once Triton has unloaded it."""

        def unload() -> None:
            self._loaded.pop(model_name, None)
            self.control.unload(model_name, LOAD_TIMEOUT_S)
            if not self.control.wait_unloaded(model_name, LOAD_TIMEOUT_S, give_up=self._stuck(model_name)):
                self._restart_without(model_name)
            if self._server is not None:
                self._server.models_changed()

        self._while_serving(f"unload model {model_name!r}", unload)

    def _stuck(self, model_name: str) -> Callable[[], bool]:
        """Whether the model (asked while it unloads) has had none of its requests in flight for
        :data:`STUCK_AFTER_S`; never without ``idle`` or a server of our own."""
        idle_since: List[float] = []

        def stuck() -> bool:
            if self._idle is None or self._server is None or not self._idle(model_name):
                idle_since.clear()
                return False
            now = time.monotonic()
            if not idle_since:
                idle_since.append(now)
            return now - idle_since[0] >= STUCK_AFTER_S

        return stuck

    def _restart_without(self, model_name: str) -> None:
        """Restart the server, which comes back without ``model_name`` (no longer in :attr:`loaded`)."""
        reason = (
            f"model {model_name!r} stayed UNLOADING with none of its requests in flight for {STUCK_AFTER_S:.0f} s,"
            " held by a gRPC stream its client cancelled: docs/known_issues.md"
        )
        self._server.restart(reason)
        if not self._server.wait_serving(LOAD_TIMEOUT_S):
            raise ControlError(f"it was restarted to unload it, and did not serve again within {LOAD_TIMEOUT_S} s")

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

    def _while_serving(self, operation: str, call: Callable[[], T]) -> T:
        """``call()`` once the server serves: a restart under way is waited for, and a call that the
        server's death cut short is made again once it serves (up to :data:`LOAD_TIMEOUT_S` in all)."""
        server = self._server
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while True:
            if server is not None and not server.wait_serving(max(0.0, deadline - time.monotonic())):
                raise PyTritonServerError(
                    f"{self._name} failed to {operation}: it died, and did not serve again within {LOAD_TIMEOUT_S} s"
                    " (or was not started again)", log_tail=server.log_tail(),
                )
            try:
                with self.failing_to(operation):
                    return call()
            except PyTritonServerError:
                if server is None or server.serving() or time.monotonic() >= deadline:
                    raise
                # the server died under the call: once it serves again, the call is made again


def no_control(operation: str) -> PyTritonInvalidOperationError:
    """The error of a model-control ``operation`` on a server without its HTTP endpoint."""
    return PyTritonInvalidOperationError(
        f"cannot {operation}: model control goes through the HTTP endpoint, which allow_http=False disabled"
    )


def load_api_entry(model_dir: pathlib.Path) -> Tuple[str, Dict[str, bytes]]:
    """A model's entry for Triton's load API: its config as JSON and its other files as
    ``{"file:<path>": bytes}``, for a server that cannot read our files (``RemoteTriton``)."""
    from google.protobuf import json_format, text_format  # noqa: PLC0415 - comes with tritonclient
    from ..model_config.proto import model_config_pb2  # noqa: PLC0415

    message = text_format.Parse((model_dir / "config.pbtxt").read_text(encoding="utf-8"), model_config_pb2.ModelConfig())
    files = {}
    for path in sorted(model_dir.rglob("*")):
        if path.is_file() and path.name != "config.pbtxt" and "__pycache__" not in path.parts:
            files[f"file:{path.relative_to(model_dir).as_posix()}"] = path.read_bytes()
    # Triton keeps a loaded model's running instances when a load brings the same config, whatever
    # the files: a model of the server's own under this name would go on answering from its
    # process. The files (relay.conf: our sockets) name this binding, so their digest goes in the
    # config, and the load replaces the model, as PyTriton's RemoteTriton does.
    digest = hashlib.sha256(b"".join(name.encode() + data for name, data in files.items())).hexdigest()[:16]
    message.parameters[_BINDING_PARAMETER].string_value = digest
    config_json = json_format.MessageToJson(message, preserving_proto_field_name=True)
    return config_json, files

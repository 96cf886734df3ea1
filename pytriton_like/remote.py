"""``RemoteTriton``: bind callables to a Triton server that another process started on this host.

The callables run here, as with ``Triton``; the server is someone else's (usually another
process's ``Triton``). Binding writes the model's repository entry (its config and the relay's
settings, relay.conf) to our own workspace and sends it through the server's model-repository
API (``load`` with the config and the files), which needs the access token: a server started by
``Triton`` on this host records it in an owner-only file per port, where ``RemoteTriton`` finds
it (docs/remote_mode.md). The server's relay backend connects back to our workers' Unix
sockets, so the server must run on this host, as the same user (and be a pytriton_like server,
whose workspace has the relay's backend). Closing a ``RemoteTriton``
unloads its models; the server and its other models go on serving.
"""

import hashlib
import logging
import os
import pathlib
import shutil
import signal
import tempfile
import threading
import time
from typing import Callable, List, Optional, Sequence, Union

from .access_tokens import read_token
from .exceptions import PyTritonInvalidOperationError, PyTritonServerError
from .model_config import ModelConfig, Tensor
from .models.bindings import BoundModels, bound_model_config
from .models.worker_process import check_not_in_worker
from .models.worker_options import WorkerOptions
from .models.nested_calls import NestedCalls
from .models.nested_settings import NestedCallSettings
from .models.model import Model
from .server.config import DEFAULT_RELAY_SPIN_US
from .server.control import ControlError, ServerControl
from .server.management import ServerModels
from .server.workspace import PRIVATE_MODE, WORKSPACE_PREFIX
from .supervisor import Supervisor
from .tracing import model_tracer

__all__ = ["RemoteTriton"]

logger = logging.getLogger(__name__)

MONITORING_PERIOD_S = 10.0
"""How often ``serve()`` checks by default that the server and the models are alive (PyTriton's default)."""
_SERVER_TIMEOUT_S = 120  # waiting for the server to be ready (PyTriton's DEFAULT_TRITON_STARTUP_TIMEOUT_S)
_LOAD_TIMEOUT_S = 120
_POLL_S = 0.1
_BINDING_PARAMETER = "pytriton_like_binding"  # names the binding in a remote model's config


class RemoteTriton:
    """Binds Python callables to a Triton server already running on this host.

    Args:
        url: the server, ``[http|grpc://]host[:port]`` (HTTP and port 8000 by default).
        workspace: folder for our sockets and the models' repository entries (a temporary one,
            removed at stop, when ``None``). The server's stubs connect to the sockets in it.
        access_token: the server's token for its model-repository API; ``None``: the token a
            ``Triton`` on this host recorded for that port (docs/security.md).

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed.

    Example:
        >>> with RemoteTriton(url="localhost:8000") as triton:     # doctest: +SKIP
        ...     triton.bind("Mul2", mul2, inputs=[Tensor(dtype=np.float32, shape=(-1,))],
        ...                 outputs=[Tensor(dtype=np.float32, shape=(-1,))], config=ModelConfig(max_batch_size=8))
        ...     triton.serve()
    """

    def __init__(
        self, url: str, workspace: Union[str, pathlib.Path, None] = None, access_token: Optional[str] = None
    ):
        from .client.url import TritonUrl  # noqa: PLC0415 - serving alone does not load the client side

        check_not_in_worker("RemoteTriton()")
        self._url = TritonUrl.from_url(url)
        self._workspace_arg = pathlib.Path(workspace) if workspace is not None else None
        self._workspace: Optional[pathlib.Path] = None
        self._access_token = access_token
        self._models = BoundModels()
        self._lock = threading.RLock()
        self._connected = False
        self._stopped = False
        self._stop_requested = threading.Event()
        self._models_api: Optional[ServerModels] = None  # the server's model management, once connected
        self._loopback: Optional[NestedCalls] = None
        self._supervisor: Optional[Supervisor] = None  # of the models' worker processes, once one has some
        self._tags = 0

    # -- context manager ---------------------------------------------------------------------

    def __enter__(self) -> "RemoteTriton":
        self.connect()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- binding -----------------------------------------------------------------------------

    def bind(
        self,
        model_name: str,
        infer_func: Union[Callable, Sequence[Callable]],
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        model_version: int = 1,
        config: Optional[ModelConfig] = None,
        strict: bool = False,
        trace_config: Optional[List[str]] = None,
        workers: int = 1,
        worker_options: Optional[WorkerOptions] = None,
    ) -> None:
        """Serve ``infer_func`` as ``model_name`` on the remote server.

        Loaded at once when connected, else at :meth:`connect`. The arguments are those of
        :meth:`Triton.bind <pytriton_like.triton.Triton.bind>`.

        Args:
            model_name: the name clients call the model by.
            infer_func: a callable taking a list of requests and returning one dict of outputs per
                request, or a list of such callables (one model instance each).
            inputs: specs of the inputs, in the order clients pass them positionally.
            outputs: specs of the outputs.
            model_version: version number of the model.
            config: scheduling options (default ``ModelConfig()``).
            strict: check the callable's outputs against ``outputs``.
            trace_config: Triton's trace settings for this model's OpenTelemetry spans in this
                process (docs/tracing.md).
            workers: how many worker processes run ``infer_func`` (default 1: this process);
                see docs/workers.md.
            worker_options: how the worker processes start (:class:`~pytriton_like.triton.WorkerOptions`).

        Raises:
            PyTritonValidationError: a bad name, tensor spec, callable or configuration.
            PyTritonInvalidOperationError: the name and version are bound already, or this object was stopped.
            PyTritonServerError: the server refused or failed to load the model.
        """
        model_config, funcs = bound_model_config(
            model_name, infer_func, inputs, outputs, model_version, config, workers=workers
        )
        tracer = model_tracer(trace_config)
        with self._lock:
            if self._stopped:
                raise PyTritonInvalidOperationError(f"cannot bind model {model_name!r}: this RemoteTriton is stopped")
            self._tags += 1
            model = Model(
                model_config,
                funcs,
                strict=strict,
                tag=f"r{os.getpid()}m{self._tags}",
                tracer=tracer,
                workers=workers,
                worker_options=worker_options,
                trace_config=trace_config,
            )
            self._models.add(model)
            if self._connected:
                try:
                    self._load(model)
                except BaseException:
                    self._forget(model)
                    raise

    # -- lifecycle ---------------------------------------------------------------------------

    def connect(self) -> None:
        """Wait for the server (up to 120 s) and load every model bound so far; then serve them.

        Raises:
            PyTritonServerError: the server was not ready in time, or refused a model.
            PyTritonInvalidOperationError: this object was stopped.
        """
        with self._lock:
            if self._stopped:
                raise PyTritonInvalidOperationError("this RemoteTriton was stopped; create a new one")
            if self._connected:
                return
            try:
                self._open()
                for model in self._models:
                    self._load(model)
            except BaseException:
                self._close()
                raise
            self._connected = True
        logger.info("connected to %s: %s", self._url, ", ".join(self._models.names()) or "no models yet")

    def serve(self, monitoring_period_s: float = MONITORING_PERIOD_S) -> None:
        """Connect and block until SIGINT/SIGTERM, :meth:`stop`, or the server or our models are
        gone; then stop (our models are unloaded, the server goes on).

        Args:
            monitoring_period_s: how often to check that the server and our models are alive.

        Raises:
            PyTritonServerError: the server was not ready in time, or refused a model.
        """
        restore = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                restore[signum] = signal.signal(signum, lambda *_: self._stop_requested.set())
        try:
            self.connect()
            while not self._stop_requested.wait(monitoring_period_s):
                if not self.is_alive():
                    logger.warning("the server at %s or one of our models is gone; stopping", self._url)
                    break
        finally:
            for signum, handler in restore.items():
                signal.signal(signum, handler)
            self.stop()

    def stop(self) -> bool:
        """Unload our models from the server, stop their workers and remove our workspace.

        The server and its other models go on serving. Safe to call many times.

        Returns:
            True if this call stopped it.
        """
        with self._lock:
            if self._stopped:
                return False
            self._stopped = True
            was_connected, self._connected = self._connected, False
        self._stop_requested.set()
        if was_connected:
            for name in self._models.names():
                self._unload(name)
        self._close()
        logger.info("RemoteTriton of %s stopped", self._url)
        return True

    def is_connected(self) -> bool:
        """Whether :meth:`connect` succeeded and :meth:`stop` was not called."""
        return self._connected

    def is_alive(self) -> bool:
        """Whether the server and every model bound here are ready (before :meth:`connect`: whether
        nothing is bound yet, as PyTriton answers)."""
        if self._stopped:
            return False
        if not self._connected:
            return not list(self._models)
        models_api = self._models_api
        if models_api is None:  # stopped meanwhile
            return False
        control = models_api.control
        # a server that cannot be reached is "not alive" (the calls say False)
        return control.server_live() and all(
            control.model_ready(model.name, model.version) and model.is_alive() for model in self._models
        )

    # -- internals ---------------------------------------------------------------------------

    def _open(self) -> None:
        # the token given, else the one the server's owner recorded, read at each call (it may not exist yet)
        token = self._access_token if self._access_token is not None else lambda: read_token(self._url.port)
        control = ServerControl(self._url.hostname, self._url.port, token, grpc=self._url.scheme == "grpc")
        self._models_api = ServerModels(control, None, name=f"the Triton server at {self._url}")
        self._wait_for_server()
        if self._workspace_arg is None:
            self._workspace = pathlib.Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-remote-"))
        else:
            self._workspace = self._workspace_arg
            self._workspace.mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)
        for folder in (self._workspace / "model_repository", self._workspace / "sockets"):
            folder.mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)
        # the server's call socket is in its own workspace: nested calls go over its url
        self._loopback = NestedCalls(NestedCallSettings(self._url.with_scheme, access_token=self._access_token))

    def _wait_for_server(self) -> None:
        control = self._models_api.control
        deadline = time.monotonic() + _SERVER_TIMEOUT_S
        while not (control.server_live() and control.server_ready()):
            logger.debug("server at %s not ready yet", self._url)
            if time.monotonic() > deadline:
                raise PyTritonServerError(f"the Triton server at {self._url} was not ready within {_SERVER_TIMEOUT_S} s")
            time.sleep(_POLL_S)

    def _load(self, model: Model) -> None:
        """Start the model's workers, write its entry locally and have the server load it from the files sent."""
        repository = self._workspace / "model_repository"
        if model.processes and self._supervisor is None:
            self._supervisor = Supervisor()
        model.setup(
            repository,
            self._workspace / "sockets",
            self._on_unrecoverable,
            None,
            DEFAULT_RELAY_SPIN_US,
            loopback=self._loopback,
            supervisor=self._supervisor,
        )
        self._models.write_config(repository, model.name)
        config_json, files = _entry_for_load_api(repository / model.name)
        self._models_api.load(model.name, config=config_json, files=files)
        logger.info("model %s version %s loaded on %s", model.name, model.version, self._url)

    def _forget(self, model: Model) -> None:
        self._models.remove(model)
        if self._workspace is not None:
            model.teardown(self._workspace / "model_repository")

    def _unload(self, name: str) -> None:
        control = self._models_api.control
        try:
            control.unload(name, _LOAD_TIMEOUT_S)
        except ControlError as exc:  # the server may be gone: nothing left to unload then
            logger.warning("could not unload model %s from %s: %s", name, self._url, exc)
            return
        deadline = time.monotonic() + _LOAD_TIMEOUT_S
        while control.model_ready(name) and time.monotonic() < deadline:
            time.sleep(_POLL_S)

    def _close(self) -> None:
        if self._supervisor is not None:
            self._supervisor.pause()
        if self._loopback is not None:
            self._loopback.close()
            self._loopback = None
        if self._workspace is not None:
            for model in self._models:
                model.teardown(self._workspace / "model_repository")
        if self._supervisor is not None:  # after the worker processes stopped: their parent-death signal is tied to it
            self._supervisor.close()
            self._supervisor = None
            if self._workspace_arg is None:
                shutil.rmtree(self._workspace, ignore_errors=True)
            else:
                for folder in ("model_repository", "sockets"):
                    shutil.rmtree(self._workspace / folder, ignore_errors=True)
            self._workspace = None
        self._models_api = None  # its calls open and close a connection each

    def _on_unrecoverable(self, error: BaseException) -> None:
        logger.error("unrecoverable error in an inference callable; stopping: %s", error)
        self._stop_requested.set()
        threading.Thread(target=self.stop, name="pytriton_like-remote-stop", daemon=True).start()


def _entry_for_load_api(model_dir: pathlib.Path):
    """The model's config as JSON and its other files as ``{"file:<path>": bytes}``, for Triton's load API."""
    from google.protobuf import json_format, text_format  # noqa: PLC0415 - comes with tritonclient
    from .model_config.proto import model_config_pb2  # noqa: PLC0415

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


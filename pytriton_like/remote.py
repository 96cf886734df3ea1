"""``RemoteTriton``: bind callables to a Triton server that another process started on this host.

The callables run here, as with ``Triton``; the server is someone else's (usually another
process's ``Triton``). Binding writes the model's repository entry (its config and the relay's
settings, relay.conf) to our own workspace and sends it through the server's model-repository
API (``load`` with the config and the files), which needs the access token: a server started by
``Triton`` on this host records it in an owner-only file per port, where ``RemoteTriton`` finds
it (docs/remote_mode.md). The server's relay backend connects back to our relay servers' Unix
sockets, so the server must run on this host, as the same user (and be a pytriton_like server,
whose workspace has the relay's backend). Closing a ``RemoteTriton``
unloads its models; the server and its other models go on serving.
"""

import itertools
import logging
import os
import pathlib
import shutil
import tempfile
import threading
from typing import Optional, Union

from .access_tokens import read_token
from .binder import Binder
from .exceptions import PyTritonInvalidOperationError, PyTritonServerError
from .models.bindings import Bindings
from .models.host import ModelHost
from .models.nested_calls import NestedCalls
from .models.nested_settings import NestedCallSettings
from .models.model import Hosting, Model
from .models.worker_process import check_not_in_worker
from .polling import poll
from .server.control import ControlError, ServerControl
from .server.management import LOAD_TIMEOUT_S, ServerModels
from .server.signals import SignalSafeEvent, handling_signals
from .server.workspace import PRIVATE_MODE, WORKSPACE_PREFIX
from .supervisor import Supervisor

__all__ = ["RemoteTriton"]

logger = logging.getLogger(__name__)

MONITORING_PERIOD_S = 10.0
"""How often ``serve()`` checks by default that the server and the models are alive (PyTriton's default)."""
_SERVER_TIMEOUT_S = 120  # waiting for the server to be ready (PyTriton's DEFAULT_TRITON_STARTUP_TIMEOUT_S)


class RemoteTriton(Binder):
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
        self._bindings = Bindings()
        self._models = self._bindings.models
        self._lock = threading.RLock()
        self._connected = False
        self._stopped = False
        self._stop_requested = SignalSafeEvent()  # SIGINT and SIGTERM set it while serve() runs
        self._given_up: Optional[str] = None  # why its supervisor gave up
        self._models_api: Optional[ServerModels] = None  # the server's model management, once connected
        self._nested_calls: Optional[NestedCalls] = None
        self._supervisor: Optional[Supervisor] = None  # of its models' pools of worker processes, once connected
        self._host: Optional[ModelHost] = None  # once connected
        self._tags = itertools.count(1)

    # -- context manager ---------------------------------------------------------------------

    def __enter__(self) -> "RemoteTriton":
        self.connect()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- binding (Binder.bind) -------------------------------------------------------------------

    def _next_tag(self) -> str:
        return f"r{os.getpid()}m{next(self._tags)}"

    def _add_model(self, model: Model) -> None:
        with self._lock:
            if self._stopped:
                raise PyTritonInvalidOperationError(f"cannot bind model {model.name!r}: this RemoteTriton is stopped")
            self._bindings.add_model(model, stopped=False)
            if self._connected:
                self._host.load(model)

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
                for model in list(self._models):
                    self._host.load(model)
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
            PyTritonServerError: the server was not ready in time, or refused a model; or the
                worker processes of a model died more often than their restart policies allow
                (supervisor/__init__.py).
        """
        try:
            with handling_signals(lambda *_: self._stop_requested.set()):
                self.connect()
                while not self._stop_requested.wait(monitoring_period_s):
                    if not self.is_alive():
                        logger.warning("the server at %s or one of our models is gone; stopping", self._url)
                        break
        finally:
            self.stop()
        if self._given_up is not None:
            raise PyTritonServerError(f"{self._given_up}: the worker processes are not started again (docs/workers.md)")

    def stop(self) -> bool:
        """Unload our models from the server, stop their relay servers and remove our workspace.

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
        control, supervisor = models_api.control, self._supervisor
        # a server that cannot be reached is "not alive" (the calls say False)
        return control.server_live() and supervisor is not None and supervisor.serving() and all(
            control.model_ready(model.name, model.version) and model.is_alive() for model in self._models
        )

    # -- internals ---------------------------------------------------------------------------

    def _open(self) -> None:
        # the token given, else the one the server's owner recorded, read at each call (it may not exist yet)
        token = self._access_token if self._access_token is not None else lambda: read_token(self._url.port)
        control = ServerControl(self._url.hostname, self._url.port, token, grpc=self._url.scheme == "grpc")
        if not poll(lambda: control.server_live() and control.server_ready(), _SERVER_TIMEOUT_S):
            raise PyTritonServerError(f"the Triton server at {self._url} was not ready within {_SERVER_TIMEOUT_S} s")
        if self._workspace_arg is None:
            self._workspace = pathlib.Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-remote-"))
        else:
            self._workspace = self._workspace_arg
            self._workspace.mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)
        repository, sockets = self._workspace / "model_repository", self._workspace / "sockets"
        for folder in (repository, sockets):
            folder.mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)
        self._models_api = ServerModels(control, None, name=f"the Triton server at {self._url}", entries=repository)
        # the server's call socket is in its own workspace, out of reach: nested calls go over its url
        self._nested_calls = NestedCalls(NestedCallSettings(self._url.with_scheme, access_token=self._access_token))
        self._supervisor = Supervisor(name="the RemoteTriton", on_given_up=self._on_given_up)
        hosting = Hosting(
            repository=repository, sockets=sockets, supervisor=self._supervisor,
            on_unrecoverable=self._on_unrecoverable, nested_calls=self._nested_calls,
        )
        self._host = ModelHost(self._models, hosting, self._models_api)

    def _unload(self, name: str) -> None:
        control = self._models_api.control
        try:
            control.unload(name, LOAD_TIMEOUT_S)
        except ControlError as exc:  # the server may be gone: nothing left to unload then
            logger.warning("could not unload model %s from %s: %s", name, self._url, exc)
            return
        poll(lambda: not control.model_ready(name), LOAD_TIMEOUT_S)

    def _close(self) -> None:
        if self._supervisor is not None:
            self._supervisor.pause()
        if self._nested_calls is not None:
            self._nested_calls.close()
            self._nested_calls = None
        if self._host is not None:
            self._host.teardown()
            self._host = None
        if self._supervisor is not None:  # after the worker processes stopped: their parent-death signal is tied to it
            self._supervisor.close()
            self._supervisor = None
        if self._workspace is not None:
            if self._workspace_arg is None:
                shutil.rmtree(self._workspace, ignore_errors=True)
            else:
                for folder in ("model_repository", "sockets"):
                    shutil.rmtree(self._workspace / folder, ignore_errors=True)
            self._workspace = None
        self._models_api = None  # its calls open and close a connection each

    def _on_given_up(self, cause: str) -> None:
        # Its supervisor gave up (a pool of worker processes past the bound, supervisor/__init__.py): serve() raises.
        self._given_up = cause
        self._stop_requested.set()

    def _on_unrecoverable(self, error: BaseException) -> None:
        logger.error("unrecoverable error in an inference callable; stopping: %s", error)
        self._stop_requested.set()
        threading.Thread(target=self.stop, name="pytriton_like-remote-stop", daemon=True).start()

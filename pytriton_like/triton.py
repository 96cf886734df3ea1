"""``Triton``: bind Python callables and serve them with the bundled tritonserver (docs/quickstart.md).

``RemoteTriton`` binds them to a server another process started; ``TritonConfig`` holds the
server's options, ``WorkerOptions`` how the processes of ``bind(..., workers=N)`` start.

Example:
    >>> with Triton() as triton:                                  # doctest: +SKIP
    ...     triton.bind(model_name="AddSub", infer_func=add_sub,
    ...                 inputs=[Tensor(dtype=np.float32, shape=(-1,))] * 2,
    ...                 outputs=[Tensor(name="add", dtype=np.float32, shape=(-1,))],
    ...                 config=ModelConfig(max_batch_size=128))
    ...     triton.serve()
"""

import atexit
import itertools
import logging
import os
import pathlib
import threading
import weakref
from typing import TYPE_CHECKING, List, Optional, Sequence, Union

from .access_tokens import remove_token
from .binder import Binder
from .console import Console
from .constants import DEFAULT_TRITON_STARTUP_TIMEOUT_S
from .exceptions import PyTritonInvalidOperationError
from .model_config import ModelConfig, Tensor  # noqa: F401 - ModelConfig: importable from here, as before bind() moved
from .model_config.ensemble import EnsembleStep
from .model_management import ModelManagement
from .models.bindings import Bindings
from .models.model import Model
from .models.user_repository import open_repository
from .models.worker_process import check_not_in_worker
from .relay.shm import unlink_segments
from .remote import MONITORING_PERIOD_S, RemoteTriton
from .server.command_line import local_url
from .server.config import TritonConfig
from .server.lifecycle import DefaultTritonLifecyclePolicy, TritonLifecyclePolicy, TritonState, VertextAILifecyclePolicy
from .server.process import ServerProcess
from .server.security import ACCESS_TOKEN_HEADER, DEFAULT_RESTRICTED_ENDPOINTS, VALID_ENDPOINTS, TritonSecurityConfig
from .server.signals import StopRequests
from .server.workspace import Workspace
from .serving import Serving
from .startup import ServerRun, resolve_options
from .models.worker_options import WorkerInfo, WorkerOptions

if TYPE_CHECKING:
    from .runner import TritonRunner

__all__ = [
    "Triton",
    "RemoteTriton",
    "TritonConfig",
    "TritonLifecyclePolicy",
    "TritonSecurityConfig",
    "DefaultTritonLifecyclePolicy",
    "VertextAILifecyclePolicy",
    "WorkerInfo",
    "WorkerOptions",
    "MONITORING_PERIOD_S",
    "DEFAULT_TRITON_STARTUP_TIMEOUT_S",
    "MODEL_URL",
    "MODEL_READY_URL",
    "MODEL_CONFIG_URL",
    "MODEL_INFER_URL",
    "WAIT_FORM_MODEL_TIMEOUT_S",
    "DEFAULT_PROTECTED_ENDPOINTS",
    "TRITON_ACCESS_HEADER",
    "VALID_TRITON_ENDPOINTS",
]

MODEL_URL = "/v2/models/{model_name}"
"""A model's path on the HTTP endpoint (KServe v2); ``{model_name}`` to fill in."""
MODEL_READY_URL = f"{MODEL_URL}/ready/"
"""A model's readiness path on the HTTP endpoint: 200 when it is ready."""
MODEL_CONFIG_URL = f"{MODEL_URL}/config/"
"""A model's configuration path on the HTTP endpoint."""
MODEL_INFER_URL = f"{MODEL_URL}/infer/"
"""A model's inference path on the HTTP endpoint."""
WAIT_FORM_MODEL_TIMEOUT_S = 60.0  # (sic: PyTriton's name)
"""PyTriton's timeout, in seconds, for waiting for a model; kept under its name for code that imports it."""
VALID_TRITON_ENDPOINTS = set(VALID_ENDPOINTS)
"""The API groups ``TritonSecurityConfig(restricted_endpoints=...)`` may name (Triton's groups)."""
DEFAULT_PROTECTED_ENDPOINTS = list(DEFAULT_RESTRICTED_ENDPOINTS)
"""The API groups restricted by default: shared memory, model repository, statistics, trace, logging."""
TRITON_ACCESS_HEADER = ACCESS_TOKEN_HEADER
"""The header restricted calls carry the access token in (gRPC: ``triton-grpc-protocol-`` before it)."""

logger = logging.getLogger(__name__)

_instance_ids = itertools.count(1)
_live: "weakref.WeakSet[Triton]" = weakref.WeakSet()


class Triton(Binder, ModelManagement, Serving):
    """Serves bound Python callables through tritonserver.

    Args:
        config: server options; fields left ``None`` come from ``PYTRITON_TRITON_CONFIG_*``
            environment variables, then Triton's defaults.
        workspace: folder for the model repository, sockets and log; a temporary folder
            (removed at stop) when ``None``.
        model_repository: a folder of hand-written models to serve next to the bound ones, or an
            ``s3://`` URL of one (credentials from the AWS environment variables), loaded as
            ``config.model_control_mode`` says (see docs/model_management.md); given here, it
            wins over ``config.model_repository``.
        triton_lifecycle_policy: when the server starts (docs/lifecycle_policy.md). By default
            (PyTriton's) entering ``with Triton() as triton:`` starts it; with
            ``config.allow_vertex_ai`` (or ``launch_triton_on_startup=False``), and always without
            the HTTP endpoint, it starts at ``run()``/``serve()`` with every model bound by then.
        security_config: which API groups need the access token (``None``: the model-repository,
            shared-memory, statistics, trace and logging groups, with a random token; see
            docs/security.md). :meth:`get_access_token` tells the token.

    Raises:
        PyTritonValidationError: the model repository is not a folder (or a malformed S3 URL), or the security config
            restricts an API group that ``config.http_restricted_api`` /
            ``config.grpc_restricted_protocol`` restrict too.
    """

    def __init__(
        self,
        *,
        config: Optional[TritonConfig] = None,
        workspace: Union[str, pathlib.Path, None] = None,
        triton_lifecycle_policy: Optional[TritonLifecyclePolicy] = None,
        security_config: Optional[TritonSecurityConfig] = None,
        model_repository: Union[str, pathlib.Path, None] = None,
    ):
        check_not_in_worker("Triton()")
        self._lifecycle, self._config, self._security_config = resolve_options(
            config, triton_lifecycle_policy, security_config, model_repository
        )
        repository = self._config.model_repository
        self._bindings = Bindings(open_repository(repository) if repository is not None else None)
        self._models = self._bindings.models
        self._workspace_path = workspace
        self._id = next(_instance_ids)
        self._tags = itertools.count(1)
        self._state = TritonState.NEW
        self._changed = threading.Condition(threading.RLock())
        self._console = Console(logger)  # serve() prints its lines when no logging is configured
        self._stops = StopRequests(self._console)
        self._run: Optional[ServerRun] = None
        self._given_up: Optional[str] = None  # why the run's supervisor gave up

    # -- context manager -------------------------------------------------------------------

    def __enter__(self) -> "Triton":
        if self._lifecycle.launch_triton_on_startup and self._config.allow_http is not False:
            self.run()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- binding -----------------------------------------------------------------------------

    def _default_trace_config(self) -> Optional[List[str]]:
        return self._config.trace_config

    def _cache_configured(self) -> bool:
        return bool(self._config.cache_config)

    def _next_tag(self) -> str:
        return f"t{self._id}m{next(self._tags)}"

    def _add_model(self, model: Model) -> None:
        with self._changed:
            self._bindings.add_model(model, stopped=self._stopped())
            if self._state is TritonState.RUNNING:
                self._run.load(model)

    def bind_ensemble(
        self,
        model_name: str,
        steps: Sequence[EnsembleStep],
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        *,
        max_batch_size: int,
        model_version: int = 1,
    ) -> None:
        """Serve a pipeline of models as one model: Triton runs the steps, passing tensors by name.

        The steps may name bound models, other ensembles, or models of a model repository. For
        the ones whose specs are known here (bound before this call, or by ``run()``), the
        tensors and batch sizes are checked now; Triton checks the rest when it loads the
        ensemble. The ensemble is loaded after the models it uses and unloaded before them.

        Args:
            model_name: the name clients call the ensemble by.
            steps: the models to run, in the order they run (see :class:`EnsembleStep`).
            inputs: the ensemble's inputs (what clients send), without the batch axis.
            outputs: the ensemble's outputs, each written by a step's ``output_map``.
            max_batch_size: the largest batch a client may send (0: no batching); at most every
                step model's ``max_batch_size``.
            model_version: version number of the ensemble.

        Raises:
            PyTritonValidationError: an unknown tensor, a step naming a tensor its model does not
                have, mismatched data types, or a max_batch_size a step model cannot take.
            PyTritonInvalidOperationError: the name is bound already, or the server stopped.
            PyTritonServerError: bound after ``run()`` and the server failed to load it.

        Example:
            >>> triton.bind_ensemble(                                    # doctest: +SKIP
            ...     model_name="Pipeline",
            ...     steps=[EnsembleStep("Tokenize", input_map={"text": "TEXT"}, output_map={"ids": "ids"}),
            ...            EnsembleStep("Classify", input_map={"ids": "ids"}, output_map={"label": "LABEL"})],
            ...     inputs=[Tensor(name="TEXT", dtype=bytes, shape=(1,))],
            ...     outputs=[Tensor(name="LABEL", dtype=bytes, shape=(1,))],
            ...     max_batch_size=8)
        """
        config = self._bindings.new_ensemble(model_name, steps, inputs, outputs, max_batch_size, model_version)
        with self._changed:
            self._bindings.add_ensemble(config, stopped=self._stopped())
            if self._state is TritonState.RUNNING:
                self._run.load_ensemble(config)

    def _stopped(self) -> bool:
        return self._state in (TritonState.STOPPING, TritonState.STOPPED)

    # -- lifecycle ---------------------------------------------------------------------------

    def run(self) -> None:
        """Start the server in the background; returns when every bound model is ready.

        Raises:
            PyTritonServerError: the server failed to start or to load a model; the message shows
                the end of the server log.
        """
        with self._changed:
            if self._state is TritonState.RUNNING:
                return
            if self._state is not TritonState.NEW:
                raise PyTritonInvalidOperationError("this Triton was stopped; create a new one")
            self._run = ServerRun(
                self._config, self._security_config, self._bindings, self._workspace_path, self._console,
                on_unrecoverable=self._on_unrecoverable, on_given_up=self._on_given_up,
            )
            try:
                self._run.start(load_polled=self._load_polled, unload_polled=self._unload_polled)
            except BaseException:
                self._shutdown()
                self._run = None  # nothing is left to stop; run() may be called again
                raise
            self._state = TritonState.RUNNING
            _live.add(self)

    def _on_unrecoverable(self, error: BaseException) -> None:
        # Called from a relay server's thread: stopping joins relay servers, so it runs on its own thread.
        logger.error("unrecoverable error in an inference callable; stopping the server: %s", error)
        self._stops.requested.set()
        threading.Thread(target=self.stop, name="pytriton_like-stop", daemon=True).start()

    def _on_given_up(self, cause: str) -> None:
        # The run's supervisor gave up (supervisor/__init__.py): serve() raises, and all stops.
        if self._state is TritonState.RUNNING:
            self._given_up = cause
            self._stops.stop_now()

    def runner(
        self, *, init_timeout_s: Optional[float] = None, inference_timeout_s: Optional[float] = None
    ) -> "TritonRunner":
        """A :class:`~pytriton_like.runner.TritonRunner` of this server (HTTP, or gRPC without HTTP).

        Close it (``with triton.runner() as runner:``) before stopping the server. ``init_timeout_s``
        and ``inference_timeout_s`` are the runner's own (default 300 s and 60 s).
        """
        from .runner import TritonRunner  # noqa: PLC0415 - serving alone need not import the client side

        config = self._config
        url = local_url(config, "HTTP" if "HTTP" in config.ports else "gRPC")
        return TritonRunner(
            url,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            access_token=self._security_config.access_token,
        )

    def is_alive(self) -> bool:
        """Whether the server runs and every process of it serves, as its supervisors know them:
        False while tritonserver (or the OpenAI endpoint) is being started again after it died,
        while none of a model's worker processes serves, and once the run gave up. A model that
        serves with some of its worker processes while the others are started again is alive
        (docs/workers.md)."""
        running = self._state is TritonState.RUNNING and self._server is not None and self._server.returncode is None
        return running and self._run.serving()

    @property
    def _server(self) -> Optional[ServerProcess]:
        return self._run.server if self._run is not None else None

    @property
    def _workspace(self) -> Optional[Workspace]:
        return self._run.workspace if self._run is not None else None

    @property
    def _triton_server(self) -> Optional[ServerProcess]:
        # PyTriton's name of its server process (its tests check ``_triton_server.is_alive()``).
        return self._server

    def connect(self) -> None:
        """Start the server if it is not running and load the models bound so far (PyTriton's
        ``connect()``, which waits for the server its ``with`` block started); same as :meth:`run`.
        """
        self.run()

    def is_connected(self) -> bool:
        """Whether the server runs with this object's models loaded (after ``run()``, or entering ``with``)."""
        return self._state is TritonState.RUNNING

    def get_access_token(self) -> Optional[str]:
        """The token that Triton's restricted API groups need (``None`` when none is restricted).

        Clients pass it as ``access_token=``; clients of this package on this host find it
        themselves (docs/security.md).
        """
        return self._security_config.access_token

    def stop(self) -> bool:
        """Stop the server, the relay servers and worker processes, and remove the workspace; safe to call many times.

        Returns:
            True if this call stopped it, False if it was not running.
        """
        with self._changed:
            if self._state in (TritonState.STOPPING, TritonState.STOPPED):
                return False
            was_running = self._state is TritonState.RUNNING
            self._state = TritonState.STOPPING
        self._stops.stop_now()
        self._shutdown()
        with self._changed:
            self._state = TritonState.STOPPED
            self._changed.notify_all()
        _live.discard(self)
        return was_running

    def _shutdown(self) -> None:
        if self._run is not None:
            self._run.stop()
        if self._security_config.access_token:
            for port in (self._config.ports.get("HTTP"), self._config.ports.get("gRPC")):
                if port is not None:
                    remove_token(port)
        unlink_segments(os.getpid(), f"t{self._id}m")
        if self._run is not None:
            self._console.say("stopped")


@atexit.register
def _stop_all() -> None:
    for triton in list(_live):
        triton.stop()

"""``Triton``: bind Python callables and serve them with the bundled tritonserver.

This module only orchestrates: the server process lives in :mod:`pytriton_like.server`, bound
models and their workers in :mod:`pytriton_like.models`.

Example:
    >>> with Triton() as triton:                                  # doctest: +SKIP
    ...     triton.bind(model_name="AddSub", infer_func=add_sub,
    ...                 inputs=[Tensor(dtype=np.float32, shape=(-1,))] * 2,
    ...                 outputs=[Tensor(name="add", dtype=np.float32, shape=(-1,))],
    ...                 config=ModelConfig(max_batch_size=128))
    ...     triton.serve()
"""

import atexit
import dataclasses
import enum
import itertools
import logging
import os
import pathlib
import signal
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .access_tokens import remove_token, write_token
from .console import Console
from .constants import DEFAULT_TRITON_STARTUP_TIMEOUT_S
from .exceptions import (
    PyTritonInvalidOperationError,
    PyTritonServerError,
    PyTritonValidationError,
)
from .model_config import ModelConfig, Tensor
from .model_config.ensemble import EnsembleConfig, EnsembleStep, validate_ensemble
from .model_config.names import check_model_name
from .model_config.triton_model_config import TritonModelConfig, resolve_tensors
from .models.binding import bound_model_config
from .models.loopback import LoopbackClients, loopback_url
from .models.model import Model
from .models.poller import RepositoryPoller
from .models.registry import BoundModels
from .models.repository import remove_model_entry, write_ensemble_entry
from .models.s3_repository import is_s3_url
from .models.user_repository import open_repository, repository_location
from .remote import MONITORING_PERIOD_S, RemoteTriton
from .relay.shm import SHM_DIR, STUB_REGION_PREFIX, is_segment_name, unlink_orphaned_segments, unlink_segments
from .server.bundle import find_bundle
from .server.config import DEFAULT_POLL_SECS, TritonConfig, connect_host, endpoint_urls, local_url, server_argv
from .server.control import ControlError, ServerControl
from .server.drain import DRAINING_MODEL, report_not_ready
from .server.process import ServerProcess, ServerState, check_ports_free
from .server.security import (
    ACCESS_TOKEN_HEADER,
    DEFAULT_RESTRICTED_ENDPOINTS,
    VALID_ENDPOINTS,
    TritonSecurityConfig,
    check_restriction_overlap,
    restriction_value,
)
from .server.workspace import Workspace, remove_orphaned_workspaces
from .tracing import model_tracer
from .worker.hints import signature_warning

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

@dataclasses.dataclass
class TritonLifecyclePolicy:
    """When the server starts and where bound models' repository entries live (PyTriton's policy).

    Args:
        launch_triton_on_startup: start tritonserver when the ``with Triton()`` block is entered;
            models bound afterwards load at once. False: it starts at ``run()``/``serve()`` and
            loads every model bound until then in one go.
        local_model_store: the entries of bound models are written to the local model store
            before the server starts (what Vertex AI needs: the server must hold its models when
            it reports ready). pytriton_like always writes them locally for a server it starts,
            so this changes nothing for ``Triton``; ``RemoteTriton`` sends them through the
            server's model-repository API.
    """

    launch_triton_on_startup: bool = True
    local_model_store: bool = False


DefaultTritonLifecyclePolicy = TritonLifecyclePolicy()
VertextAILifecyclePolicy = TritonLifecyclePolicy(launch_triton_on_startup=False, local_model_store=True)
"""The policy ``Triton`` takes when ``config.allow_vertex_ai`` is set and none is given (PyTriton's name)."""

# PyTriton's module constants: the URLs of a model on the HTTP endpoint, and how long run() waits.
MODEL_URL = "/v2/models/{model_name}"
MODEL_READY_URL = f"{MODEL_URL}/ready/"
MODEL_CONFIG_URL = f"{MODEL_URL}/config/"
MODEL_INFER_URL = f"{MODEL_URL}/infer/"
WAIT_FORM_MODEL_TIMEOUT_S = 60.0  # (sic: PyTriton's name)

# PyTriton's names of the security constants (server/security.py holds them).
VALID_TRITON_ENDPOINTS = set(VALID_ENDPOINTS)
DEFAULT_PROTECTED_ENDPOINTS = list(DEFAULT_RESTRICTED_ENDPOINTS)
TRITON_ACCESS_HEADER = ACCESS_TOKEN_HEADER

logger = logging.getLogger(__name__)

# Longest wait for tritonserver to start and load the models bound before run().
_START_TIMEOUT_S = 120
_LOAD_TIMEOUT_S = 120
_DEFAULT_EXIT_TIMEOUT_S = 30
# Once the models are unloaded nothing is in flight: Triton gets this long to exit by itself
# (it takes about 1 s).
_GRACE_AFTER_UNLOAD_S = 3
# While models unload: how often our workers are checked, and how long they must sit idle before
# stop() stops waiting for Triton to finish the unload.
_UNLOAD_POLL_S = 0.5
_IDLE_BEFORE_GIVING_UP_S = 3

_instance_ids = itertools.count(1)
_live: "weakref.WeakSet[Triton]" = weakref.WeakSet()


class _SignalWhileStarting(KeyboardInterrupt):
    """Raised by serve()'s signal handler to cut a start short; serve() returns after it."""


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Triton:
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
            (PyTriton's) entering ``with Triton() as triton:`` starts it, and models bound
            then load at once; with ``config.allow_vertex_ai`` (or
            ``TritonLifecyclePolicy(launch_triton_on_startup=False)``) it starts at ``run()`` /
            ``serve()`` with every model bound until then. A server without its HTTP endpoint
            (``allow_http=False``) always starts at ``run()``: models load through that endpoint.
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
        if triton_lifecycle_policy is None:
            vertex_ai = config is not None and config.allow_vertex_ai
            triton_lifecycle_policy = VertextAILifecyclePolicy if vertex_ai else DefaultTritonLifecyclePolicy
        if not isinstance(triton_lifecycle_policy, TritonLifecyclePolicy):
            raise PyTritonValidationError(
                f"triton_lifecycle_policy must be a TritonLifecyclePolicy, got {type(triton_lifecycle_policy).__name__}"
            )
        self._lifecycle = triton_lifecycle_policy
        self._config = (config or TritonConfig()).with_env()
        self._security_config = security_config if security_config is not None else TritonSecurityConfig()
        if not isinstance(self._security_config, TritonSecurityConfig):
            raise PyTritonValidationError(
                f"security_config must be a TritonSecurityConfig, got {type(security_config).__name__}"
            )
        check_restriction_overlap(self._config, self._security_config)
        if model_repository is not None:
            self._config = dataclasses.replace(self._config, model_repository=repository_location(model_repository))
        repository = self._config.model_repository
        self._repository = open_repository(repository) if repository is not None else None
        self._poller: Optional[RepositoryPoller] = None
        self._workspace_path = workspace
        self._id = next(_instance_ids)
        self._tags = itertools.count(1)
        self._models = BoundModels()
        self._ensembles: Dict[str, EnsembleConfig] = {}
        self._state = _State.NEW
        self._changed = threading.Condition(threading.RLock())
        self._stop_requested = threading.Event()
        self._drain_requested = False  # by SIGTERM to serve()
        self._drain_over = threading.Event()  # a second signal, stop(), or the server's exit ends a drain
        self._workspace: Optional[Workspace] = None
        self._server: Optional[ServerProcess] = None
        self._control: Optional[ServerControl] = None
        self._loopback: Optional[LoopbackClients] = None
        self._failure: Optional[BaseException] = None
        self._server_exit: Optional[int] = None  # tritonserver's exit code, when it exited on its own
        self._console = Console(logger)  # serve() prints its lines when no logging is configured
        self._ready_models: List[Tuple[str, str, Optional[int]]] = []  # (what, name, version) loaded, for serve()'s lines

    # -- context manager -------------------------------------------------------------------

    def __enter__(self) -> "Triton":
        if self._lifecycle.launch_triton_on_startup and self._config.allow_http is not False:
            self.run()
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
    ) -> None:
        """Serve ``infer_func`` as model ``model_name``.

        Args:
            model_name: the name clients call the model by.
            infer_func: a callable taking a list of requests and returning one dict of outputs per
                request, or a list of such callables: one model instance per callable, and
                Triton spreads concurrent batches over them.
            inputs: specs of the inputs, in the order clients pass them positionally.
            outputs: specs of the outputs.
            model_version: version number of the model. Binding a name again with another version
                serves both (same inputs, outputs, config and number of callables); a client that
                names no version gets the highest one that is ready.
            config: scheduling options (batching, dynamic batcher, ...).
            strict: check the callable's outputs against ``outputs`` (names, dtypes).
            trace_config: Triton's trace settings for this model's OpenTelemetry spans in your
                process (``["mode=opentelemetry", "opentelemetry,url=...", ...]``); by default
                ``TritonConfig.trace_config``. See docs/tracing.md.

        Raises:
            PyTritonValidationError: a bad name, tensor spec or callable, or a version whose
                configuration differs from the versions bound already.
            PyTritonInvalidOperationError: this name and version are bound already, the name is a
                model of the model repository, or the server stopped.
            PyTritonServerError: bound after ``run()`` and the server failed to load it.
        """
        model_config, funcs = bound_model_config(model_name, infer_func, inputs, outputs, model_version, config)
        problem = signature_warning(funcs[0])  # the instances' callables are alike
        if problem is not None:
            logger.warning("model %s: %s", model_name, problem)
        if model_config.response_cache is not None and not self._config.cache_config:
            raise PyTritonValidationError(
                f"model {model_name!r}: response_cache=True needs a cache in TritonConfig, e.g. "
                "TritonConfig(cache_config=['local,size=1048576']); without one Triton ignores it"
            )
        tracer = model_tracer(trace_config if trace_config is not None else self._config.trace_config)
        with self._changed:
            self._check_bindable("model", model_name)  # another version of a bound model is fine
            model = Model(model_config, funcs, strict=strict, tag=f"t{self._id}m{next(self._tags)}", tracer=tracer)
            self._models.add(model)
            if self._state is _State.RUNNING:
                self._load(model)

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
        check_model_name(model_name, "ensemble")
        bad = [step for step in steps if not isinstance(step, EnsembleStep)]
        if bad:
            raise PyTritonValidationError(f"ensemble {model_name!r}: steps must be EnsembleStep, got {bad[0]!r}")
        try:
            config = EnsembleConfig(
                model_name=model_name,
                steps=tuple(steps),
                inputs=resolve_tensors(inputs, "INPUT"),
                outputs=resolve_tensors(outputs, "OUTPUT"),
                max_batch_size=max_batch_size,
                model_version=model_version,
            )
        except TypeError as exc:
            raise PyTritonValidationError(f"ensemble {model_name!r}: {exc}") from None
        with self._changed:
            self._check_bindable("ensemble", model_name)
            if model_name in self._models:
                raise PyTritonInvalidOperationError(f"a model named {model_name!r} is bound already")
            validate_ensemble(config, self._known_configs())
            self._ensembles[model_name] = config
            if self._state is _State.RUNNING:
                self._load_ensemble(config)

    def _check_bindable(self, what: str, model_name: str) -> None:
        """Raise unless a ``what`` ("model" or "ensemble") may be bound as ``model_name`` now.

        Called with ``self._changed`` held.
        """
        if self._state in (_State.STOPPING, _State.STOPPED):
            raise PyTritonInvalidOperationError(f"cannot bind {what} {model_name!r}: this Triton is stopped")
        if self._repository is not None and model_name in self._repository:
            raise PyTritonInvalidOperationError(
                f"cannot bind {what} {model_name!r}: the model repository {self._repository.path} has a model"
                " of that name; Triton needs unique names"
            )
        if model_name in self._ensembles:
            raise PyTritonInvalidOperationError(f"a model named {model_name!r} is bound already (an ensemble)")

    def _known_configs(self) -> Dict[str, TritonModelConfig]:
        """Specs of every bound model and ensemble, by name: what ensembles are checked against."""
        known = {model.name: model.config for model in self._models}  # the versions share one config
        known.update((name, ensemble.as_model_config()) for name, ensemble in self._ensembles.items())
        return known

    def _load_ensemble(self, config: EnsembleConfig) -> None:
        repository = self._workspace.model_repository
        write_ensemble_entry(repository, config)
        try:
            self._control.load(config.model_name, _LOAD_TIMEOUT_S)
            self._server.protect_stub_regions()  # Triton loads the ensemble's step models with it
        except ControlError as exc:
            self._ensembles.pop(config.model_name, None)
            remove_model_entry(repository, config.model_name)
            raise PyTritonServerError(
                f"tritonserver failed to load ensemble {config.model_name!r}: {exc}", log_tail=self._server.log_tail()
            ) from None
        self._ready_models.append(("ensemble", config.model_name, config.model_version))
        self._say_ready("ensemble", config.model_name, config.model_version)

    def _setup(self, model: Model) -> None:
        workspace = self._workspace
        model.setup(
            workspace.model_repository,
            workspace.sockets,
            self._on_unrecoverable,
            self._config.shm_limit_bytes,
            self._config.relay_spin(),
            self._config.relay_batches_in_flight(),
            loopback=self._loopback,
        )

    def _load(self, model: Model) -> None:
        """Start a model version's workers and have the running server (re)load its model.

        Triton reloads the model's other versions too; their workers accept the new backend instances.
        """
        try:
            control = self._require_control(f"bind model {model.name!r} after run()")
            self._setup(model)
            self._models.write_config(self._workspace.model_repository, model.name)
            control.load(model.name, _LOAD_TIMEOUT_S)
            self._server.protect_stub_regions()
        except ControlError as exc:
            self._forget(model)
            raise PyTritonServerError(
                f"tritonserver failed to load model {model.name!r} version {model.version}: {exc}",
                log_tail=self._server.log_tail(),
            ) from None
        except BaseException:
            self._forget(model)
            raise
        self._ready_models.append(("model", model.name, model.version))
        self._say_ready("model", model.name, model.version)

    def _forget(self, model: Model) -> None:
        """Undo the binding of a model version that failed to load."""
        self._models.remove(model)
        model.teardown(self._workspace.model_repository)
        self._models.write_config(self._workspace.model_repository, model.name)

    # -- lifecycle ---------------------------------------------------------------------------

    def run(self) -> None:
        """Start the server in the background; returns when every bound model is ready.

        Raises:
            PyTritonServerError: the server failed to start or to load a model; the message shows
                the end of the server log.
        """
        with self._changed:
            if self._state is _State.RUNNING:
                return
            if self._state is not _State.NEW:
                raise PyTritonInvalidOperationError("this Triton was stopped; create a new one")
            try:
                self._start()
            except BaseException:
                self._shutdown()
                raise
            self._state = _State.RUNNING
            _live.add(self)

    def _start(self) -> None:
        repository_models = self._startup_repository_models()
        # what the poll mode compares with later; taken before the start so changes during it count
        poll = self._repository is not None and self._config.model_control_mode == "poll"
        known = self._repository.snapshot() if poll else {}
        unlink_orphaned_segments()
        remove_orphaned_workspaces()
        bundle = find_bundle()
        config = self._config
        check_ports_free(config.ports, _bind_address(config))
        self._workspace = Workspace(bundle, self._workspace_path)
        self._loopback = LoopbackClients(loopback_url(config), access_token=self._security_config.access_token)
        for model in self._models:
            self._setup(model)
        for name in self._models.names():
            self._models.write_config(self._workspace.model_repository, name)
        configs = self._known_configs()
        for ensemble in self._ensembles.values():
            validate_ensemble(ensemble, configs)  # again: models bound after it are known now
            write_ensemble_entry(self._workspace.model_repository, ensemble)
        repositories = [self._workspace.model_repository]
        if self._repository is not None:
            repositories.append(self._repository.path)
        argv = server_argv(
            config,
            binary=bundle.binary,
            model_repositories=repositories,
            backend_directory=self._workspace.backends,
            cache_directory=bundle.caches,
            startup_models=self._models.names() + repository_models + list(self._ensembles),
            restriction=restriction_value(self._security_config),
        )
        self._security_config.warn_if_open()
        env = bundle.server_environment(os.environ)
        log_file = pathlib.Path(config.log_file) if config.log_file else self._workspace.log_file
        logger.debug("starting %s", " ".join(argv).replace(self._security_config.access_token or "\0", "<access token>"))
        if self._security_config.access_token:
            # before the server starts: a client of this host that sees a model ready (with the
            # native relay, a fraction of a second after the start) must find the token already
            for endpoint in ("HTTP", "gRPC"):
                if endpoint in config.ports:
                    write_token(config.ports[endpoint], self._security_config.access_token)
        self._server = ServerProcess(argv, env, log_file, endpoints=list(config.ports))
        self._server.add_exit_listener(self._on_server_exit)
        try:
            self._server.start(_START_TIMEOUT_S)
        except PyTritonServerError as exc:
            raise _name_remote_repository(exc, self._repository) from None
        expected = [("model", model.name, model.version) for model in self._models]
        expected += [("model", name, None) for name in repository_models]
        expected += [("ensemble", name, ensemble.model_version) for name, ensemble in self._ensembles.items()]
        if config.allow_http is not False:
            self._control = ServerControl(
                connect_host(config.http_address), config.ports["HTTP"], access_token=self._security_config.access_token
            )
            for what, name, version in expected:
                if not self._control.model_ready(name, version):
                    raise PyTritonServerError(
                        f"{what} {name!r} is not ready after start", log_tail=self._server.log_tail()
                    )
        self._server.protect_stub_regions()
        if config.model_control_mode == "poll":
            self._poller = RepositoryPoller(
                self._repository,
                config.repository_poll_secs or DEFAULT_POLL_SECS,
                load=self._load_polled,
                unload=self._unload_polled,
                known=known,
            )
            self._poller.start()
        self._ready_models = expected
        self._say_started()
        if config.log_verbose:
            # PyTriton's words (its tests and users' log alerts look for them)
            logger.warning(
                "Triton Inference Server is running with enabled verbose logs (log_verbose_level=%d). "
                "It may affect inference performance.",
                config.log_verbose,
            )

    def _say_started(self, logged: bool = True) -> None:
        """One line per endpoint (its url, and whether it listens on every interface), then one per
        model loaded so far.

        Args:
            logged: False when the lines were logged already (serve() after run()): only printed.
        """
        config = self._config
        addresses = {"HTTP": config.http_address, "gRPC": config.grpc_address, "metrics": config.metrics_address}
        for endpoint, url in endpoint_urls(config).items():
            everywhere = connect_host(addresses[endpoint]) != addresses[endpoint]
            suffix = " (listening on all interfaces)" if everywhere else ""
            self._console.say("%s on %s%s", endpoint, url, suffix, logged=logged)
        for what, name, version in self._ready_models:
            self._say_ready(what, name, version, logged=logged)

    def _say_ready(self, what: str, name: str, version: Optional[int], logged: bool = True) -> None:
        """The line of a model that is ready, with the url its inference requests go to over HTTP."""
        numbered = f" version {version}" if version is not None else ""
        if "HTTP" in self._config.ports:
            url = f"{local_url(self._config, 'HTTP')}/v2/models/{name}/infer"
            self._console.say("%s %s%s ready: %s", what, name, numbered, url, logged=logged)
        else:
            self._console.say("%s %s%s ready", what, name, numbered, logged=logged)

    def _startup_repository_models(self) -> List[str]:
        """The models of the user's repository to load at start, checked (names, config.pbtxt)."""
        if self._repository is None:
            return []
        names = self._repository.names()
        clashes = [name for name in self._models.names() if name in names]
        if clashes:
            raise PyTritonInvalidOperationError(
                f"the model repository {self._repository.path} has models named like bound ones: "
                f"{', '.join(clashes)}; Triton needs unique names"
            )
        if self._config.model_control_mode != "explicit":
            startup = names
        else:
            startup = list(self._config.load_model or ())
            missing = [name for name in startup if name not in names]
            if missing:
                raise PyTritonValidationError(
                    f"TritonConfig.load_model names models that are not in {self._repository.path}: "
                    f"{', '.join(missing)} (it has: {', '.join(names) or 'none'})"
                )
        for name in startup:
            self._repository.check(name)
        return startup

    def serve(self, monitoring_period_s: float = MONITORING_PERIOD_S) -> None:
        """Run the server and block until SIGINT or SIGTERM (or :meth:`stop`), then stop it.

        Signal handlers are installed only when called from the main thread; from another
        thread, call :meth:`stop` to end it. A signal that comes while the server is still
        starting cuts the start short; ``serve()`` then returns as well, once all is stopped.

        Args:
            monitoring_period_s: how often to check that the server and the models' workers are
                alive (a dead server is noticed at once anyway); when not, it stops and returns.

        Raises:
            PyTritonServerError: the server failed to start, or tritonserver exited while
                serving (killed, crashed): the message names its exit code and shows the end of
                its log, so that a supervisor (systemd, Kubernetes) sees a failure.
        """
        restore = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                restore[signum] = signal.signal(signum, self._on_signal)
        self._console.printing = True
        try:
            if self._state is _State.RUNNING:  # run() before: its lines were only logged
                self._say_started(logged=False)
            self.run()
            self._console.say("serving; press CTRL+C to stop")
            while not self._stop_requested.wait(monitoring_period_s):
                if not self.is_alive():
                    logger.error("the server or a model's worker is not alive any more; stopping")
                    break
            if self._drain_requested:
                self._drain()
        except _SignalWhileStarting as exc:
            self._console.say("%s; stopping", exc)
        finally:
            for signum, handler in restore.items():
                signal.signal(signum, handler)
            self.stop()
            self._console.printing = False
        if self._server_exit is not None:
            raise PyTritonServerError(
                f"tritonserver exited unexpectedly with code {self._server_exit} while serving",
                log_tail=self._server.log_tail(),
            )

    def _on_signal(self, signum, _frame) -> None:
        if signum == signal.SIGTERM and self._state is _State.NEW and not self._stop_requested.is_set():
            if self._server is not None and self._server.state is ServerState.READY:
                # tritonserver answers already (a load balancer may send it requests): run()
                # finishes, then the drain.
                logger.info("received SIGTERM as the start ends; stopping")
                self._drain_requested = True
                self._stop_requested.set()
                return
        if self._state is not _State.RUNNING:
            self._stop_requested.set()
            raise _SignalWhileStarting(f"received {signal.Signals(signum).name} while starting")
        if self._stop_requested.is_set():
            logger.info("received %s; stopping without waiting", signal.Signals(signum).name)
            self._drain_over.set()
            return
        self._console.say("received %s; stopping", signal.Signals(signum).name)
        self._drain_requested = signum == signal.SIGTERM
        self._stop_requested.set()

    def _drain(self) -> None:
        """Report not ready and go on serving for ``drain_secs`` (docs/deployment.md); stop() follows."""
        seconds = self._config.drain_time()
        if seconds <= 0 or not self.is_alive():
            return
        if self._control is None:
            logger.warning("draining without reporting not ready: that needs the HTTP endpoint (allow_http=False)")
        elif self._config.strict_readiness is False:
            logger.warning("draining without reporting not ready: that needs strict_readiness (False here)")
        elif not report_not_ready(self._control, self._workspace.model_repository):
            logger.warning("draining, but tritonserver still reports ready")
        self._console.say("draining: serving what comes for %.1f s before stopping (a second signal stops at once)", seconds)
        self._drain_over.wait(seconds)

    def _on_unrecoverable(self, error: BaseException) -> None:
        # Called from a worker thread: stopping joins workers, so it runs on its own thread.
        logger.error("unrecoverable error in an inference callable; stopping the server: %s", error)
        self._failure = error
        self._stop_requested.set()
        threading.Thread(target=self.stop, name="pytriton_like-stop", daemon=True).start()

    def _on_server_exit(self, returncode: int) -> None:
        if self._state is _State.RUNNING:
            self._server_exit = returncode
            logger.error(
                "tritonserver exited unexpectedly with code %s; the end of its log:\n%s", returncode, self._server.log_tail()
            )
            self._stop_requested.set()
            self._drain_over.set()

    def runner(
        self, *, init_timeout_s: Optional[float] = None, inference_timeout_s: Optional[float] = None
    ) -> "TritonRunner":
        """A :class:`~pytriton_like.runner.TritonRunner` of this server (HTTP, or gRPC without HTTP).

        Close it (``with triton.runner() as runner:``) before stopping the server.
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
        """Whether the server runs and the workers of its bound models are alive (False once
        tritonserver exited, which is logged at ERROR)."""
        running = self._state is _State.RUNNING and self._server is not None and self._server.returncode is None
        return running and all(model.is_alive() for model in self._models)

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
        return self._state is _State.RUNNING

    def get_access_token(self) -> Optional[str]:
        """The token that Triton's restricted API groups need (``None`` when none is restricted).

        Clients pass it as ``access_token=``; clients of this package on this host find it
        themselves (docs/security.md).
        """
        return self._security_config.access_token

    # -- model management (see docs/model_management.md) -------------------------------------
    # Answers are Triton's JSON documents, as its HTTP endpoint and ModelClient return them.

    def load_model(self, model_name: str) -> None:
        """Load (or reload) a model: one of the model repository, or a bound one that was unloaded.

        A model of the repository has its config.pbtxt checked first.

        Raises:
            PyTritonModelConfigError: the model's config.pbtxt is missing or broken (the message
                names the model, the file and the line).
            PyTritonInvalidOperationError: the server is not running, or has no HTTP endpoint.
            PyTritonServerError: the server failed to load the model (with the end of its log).
        """
        check_model_name(model_name)
        control = self._require_control(f"load model {model_name!r}")
        with self._changed:
            if self._repository is not None and model_name not in self._models and model_name in self._repository:
                self._repository.check(model_name)
            try:
                control.load(model_name, _LOAD_TIMEOUT_S)
                self._server.protect_stub_regions()
            except ControlError as exc:
                raise PyTritonServerError(
                    f"tritonserver failed to load model {model_name!r}: {exc}", log_tail=self._server.log_tail()
                ) from None
        self._say_ready("model", model_name, None)

    def unload_model(self, model_name: str) -> None:
        """Unload a model (every version); returns once Triton has unloaded it.

        A bound model keeps its workers while unloaded and can be loaded again.

        Raises:
            PyTritonInvalidOperationError: the server is not running, or has no HTTP endpoint.
            PyTritonServerError: the server refused.
        """
        check_model_name(model_name)
        control = self._require_control(f"unload model {model_name!r}")
        with self._changed:
            self._control_call(f"unload model {model_name!r}", control.unload, model_name, _LOAD_TIMEOUT_S)
            self._control_call(f"unload model {model_name!r}", control.wait_unloaded, model_name, _LOAD_TIMEOUT_S)
        logger.info("model %s unloaded", model_name)

    def get_model_repository_index(self) -> List[Dict[str, Any]]:
        """Every model of the bound and the user's repository: ``name``, and once loaded (or
        unloaded) ``version``, ``state`` (``READY``, ``UNAVAILABLE``, ``LOADING``...) and ``reason``.
        """
        control = self._require_control("read the repository index")
        return self._control_call("read the repository index", control.repository_index)

    def is_model_ready(self, model_name: str, version: Optional[int] = None) -> bool:
        """Whether the model (``version``; by default its highest ready one) is ready for requests."""
        return self._require_control("check model readiness").model_ready(model_name, version)

    def get_model_config(self, model_name: str, version: Optional[int] = None) -> Dict[str, Any]:
        """The configuration of a loaded model as Triton holds it (JSON, as ``config.pbtxt`` fields).

        Raises:
            PyTritonServerError: the model is not loaded.
        """
        control = self._require_control("read a model config")
        return self._control_call(f"read the config of model {model_name!r}", control.model_config, model_name, version)

    def get_inference_statistics(self, model_name: Optional[str] = None) -> Dict[str, Any]:
        """Triton's inference statistics: ``{"model_stats": [...]}`` for one model (all its versions) or all."""
        control = self._require_control("read inference statistics")
        return self._control_call("read inference statistics", control.statistics, model_name)

    def _require_control(self, operation: str) -> ServerControl:
        if self._state is not _State.RUNNING:
            raise PyTritonInvalidOperationError(f"cannot {operation}: this Triton is not running; call run() first")
        if self._control is None:
            raise PyTritonInvalidOperationError(
                f"cannot {operation}: model control goes through the HTTP endpoint, which allow_http=False disabled"
            )
        return self._control

    @staticmethod
    def _control_call(operation: str, call: Callable, *args) -> Any:
        try:
            return call(*args)
        except ControlError as exc:
            raise PyTritonServerError(f"tritonserver failed to {operation}: {exc}") from None

    def _load_polled(self, model_name: str) -> None:
        if model_name in self._models:
            raise PyTritonInvalidOperationError(f"a bound model has the name {model_name!r}; Triton needs unique names")
        self.load_model(model_name)

    def _unload_polled(self, model_name: str) -> None:
        if model_name not in self._models:
            self.unload_model(model_name)

    def stop(self) -> bool:
        """Stop the server, its workers, and remove the workspace; safe to call many times.

        Returns:
            True if this call stopped it, False if it was not running.
        """
        with self._changed:
            if self._state in (_State.STOPPING, _State.STOPPED):
                return False
            was_running = self._state is _State.RUNNING
            self._state = _State.STOPPING
        self._stop_requested.set()
        self._drain_over.set()
        self._shutdown()
        with self._changed:
            self._state = _State.STOPPED
            self._changed.notify_all()
        _live.discard(self)
        return was_running

    def _shutdown(self) -> None:
        if self._poller is not None:
            self._poller.stop()
        if self._server is not None:
            exit_timeout = self._config.exit_timeout_secs or _DEFAULT_EXIT_TIMEOUT_S
            # Python-backend stubs of the user's repository models
            regions = set(self._server.stub_regions())
            # Unload first: Triton's own stop waits out its exit timeout while any HTTP client
            # keeps a connection open, and then exits without finalising the models. Unloading
            # lets in-flight requests finish (for up to the exit timeout) and the models finalise;
            # after that, nothing is lost by cutting the server's stop short.
            unloaded = self._unload_models(exit_timeout)
            if self._loopback is not None:
                # Now, with no callable running: open HTTP connections would hold up the server's
                # stop, and the asyncio clients close in the workers' loops, which stop below.
                self._loopback.close()
            if unloaded:
                if not self._server.stop(timeout_s=_GRACE_AFTER_UNLOAD_S):
                    # tritonserver 2.51's gRPC shutdown joins an executor thread that can sit in a
                    # poll for seconds after large gRPC requests (tens of MiB); nothing is left to lose.
                    logger.info(
                        "tritonserver was still exiting %.0f s after its models unloaded; stopped it", _GRACE_AFTER_UNLOAD_S
                    )
            elif not self._server.stop(timeout_s=exit_timeout + 5):
                logger.warning("tritonserver did not stop within %.0f s; killed it", exit_timeout + 5)
            _remove_regions(regions)
        if self._security_config.access_token:
            for port in (self._config.ports.get("HTTP"), self._config.ports.get("gRPC")):
                if port is not None:
                    remove_token(port)
        if self._workspace is not None:
            for model in self._models:
                model.teardown(self._workspace.model_repository)
            self._workspace.close()
        unlink_segments(os.getpid(), f"t{self._id}m")
        self._console.say("stopped")

    def _unload_models(self, timeout_s: float) -> bool:
        """Unload every model (bound or not) and wait (up to ``timeout_s``) until they are unloaded.

        Returns False if the server could not be asked (no HTTP endpoint, or already gone).
        """
        if self._control is None or self._server.returncode is not None:
            return False
        names = [*self._ensembles, *self._models.names()]  # ensembles first: they use the models
        try:
            loaded = [entry["name"] for entry in self._control.repository_index() if entry.get("state")]
        except ControlError as exc:
            logger.warning("reading the repository index: %s", exc)
            loaded = []
        # The draining model stays failed: the server then reports not ready until it exits.
        for name in names + sorted(set(loaded) - set(names) - {DRAINING_MODEL}):
            try:
                self._control.unload(name, timeout_s)
            except ControlError as exc:
                logger.warning("unloading model %s: %s", name, exc)
        self._wait_unloaded(names + sorted(set(loaded) - set(names)), timeout_s)
        return True

    def _wait_unloaded(self, names, timeout_s: float) -> None:
        """Wait for the models to unload, up to ``timeout_s``, or until our workers sat idle a while.

        Triton 2.51 can keep a decoupled model UNLOADING for good after a gRPC stream was cancelled
        as its last response went out, although every request got its final response; once no
        batch is in flight in our workers, nothing is lost by not waiting for it.
        """
        deadline = time.monotonic() + timeout_s
        idle_since = None
        delay = 0.01
        while True:
            try:
                if not self._control.loaded(names):
                    return
            except ControlError as exc:
                logger.warning("reading the repository index: %s", exc)
                return
            time.sleep(delay)
            delay = min(2 * delay, _UNLOAD_POLL_S)
            now = time.monotonic()
            if now >= deadline:
                logger.warning("a model did not unload within %.0f s (a callable still running?)", timeout_s)
                return
            if any(model.busy() for model in self._models):
                idle_since = None
            elif idle_since is None:
                idle_since = now
            elif now - idle_since >= _IDLE_BEFORE_GIVING_UP_S:
                logger.warning(
                    "tritonserver has not finished unloading although no request is in flight for %.0f s;"
                    " stopping it", _IDLE_BEFORE_GIVING_UP_S,
                )
                return


def _remove_regions(names) -> None:
    """Unlink Triton stub regions a killed server could not (normally gone already)."""
    for name in names:
        if name and is_segment_name(name, prefix=STUB_REGION_PREFIX):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
                logger.warning("removed shared memory %s left by the server", name)
            except FileNotFoundError:
                pass


def _name_remote_repository(error: PyTritonServerError, repository: Any) -> PyTritonServerError:
    """A start failure of a server with an S3 repository whose log blames S3: the error names the URL."""
    path = getattr(repository, "path", None)
    if not (is_s3_url(path) and "S3" in str(error)):
        return error
    message = str(error).split(PyTritonServerError.TAIL_HEADER, 1)[0]
    return PyTritonServerError(f"tritonserver could not read model repository {path}: {message}", log_tail=error.log_tail)


def _bind_address(config: TritonConfig) -> str:
    return config.http_address or "0.0.0.0"


@atexit.register
def _stop_all() -> None:
    for triton in list(_live):
        triton.stop()

"""One run of tritonserver for a ``Triton``: what ``run()`` starts and ``stop()`` ends.

:class:`ServerRun` holds what a run creates (the supervisor, the workspace, the nested calls' clients,
the models' host, the server process, its control calls, the repository poller), each set as soon
as it exists, so that :meth:`ServerRun.stop` ends whatever a failed start got to. The order of the
start is docs/architecture.md's "Start-up". Every process of the run — tritonserver, the OpenAI
endpoint's process, the pools of worker processes — is a child of the run's
:class:`~pytriton_like.supervisor.Supervisor`: one that dies is started again (docs/reliability.md).
"""

import dataclasses
import logging
import os
import pathlib
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple, Union

from .access_tokens import write_token
from .console import Console
from .exceptions import PyTritonServerError, PyTritonValidationError
from .model_config.ensemble import EnsembleConfig, validate_ensemble
from .models.bindings import Bindings
from .models.host import ModelHost
from .models.nested_calls import NestedCalls
from .models.model import Hosting, Model
from .models.poller import RepositoryPoller
from .models.repository import remove_model_entry, write_ensemble_entry
from .models.s3_repository import name_remote_repository
from .models.user_repository import repository_location
from .openai.contract import OpenAIModel, catalog
from .relay.shm import unlink_orphaned_segments
from .server.bundle import TritonBundle, find_install
from .server.child import TritonServerChild
from .server.command_line import connect_host, server_argv
from .server.config import DEFAULT_POLL_SECS, TritonConfig
from .server.console_lines import Ready, ServerLines
from .server.control import ServerControl
from .server.lifecycle import DefaultTritonLifecyclePolicy, TritonLifecyclePolicy, VertextAILifecyclePolicy
from .server.management import ServerModels, no_control
from .server.process import ServerProcess, check_ports_free
from .server.security import TritonSecurityConfig, check_restriction_overlap, hide_token_environment, restriction_value
from .server.shutdown import DEFAULT_EXIT_TIMEOUT_S, stop_server
from .server.workspace import Workspace, remove_orphaned_workspaces
from .supervisor import Supervisor

if TYPE_CHECKING:
    from .openai.server import OpenAIServer

__all__ = ["ServerRun", "resolve_options"]

logger = logging.getLogger(__name__)

# Longest wait for tritonserver to start and load the models bound before run().
_START_TIMEOUT_S = 120


class ServerRun:
    """The server of one ``Triton`` while it runs.

    Args:
        config: the server options (environment variables applied).
        security: the access token and restricted API groups.
        bindings: the bound models and ensembles.
        workspace_path: the workspace folder (``None``: a temporary one).
        console: the lines ``serve()`` prints.
        on_unrecoverable: called from a relay server whose callable raised ``PyTritonUnrecoverableError``.
        on_given_up: called with what failed (a sentence) when the run's supervisor gives up (one
            of its children died once more than its restart policy allows).
    """

    def __init__(
        self,
        config: TritonConfig,
        security: TritonSecurityConfig,
        bindings: Bindings,
        workspace_path: Union[str, pathlib.Path, None],
        console: Console,
        on_unrecoverable: Callable[[BaseException], None],
        on_given_up: Callable[[str], None],
    ):
        self._config = config
        self._security = security
        self._bindings = bindings
        self._workspace_path = workspace_path
        self._on_unrecoverable = on_unrecoverable
        self.lines = ServerLines(console, config)
        self._on_given_up = on_given_up
        self.supervisor = Supervisor(config.restart_policy(), name="the run", on_given_up=self._given_up)
        self.workspace: Optional[Workspace] = None
        self.nested_calls: Optional[NestedCalls] = None
        self.host: Optional[ModelHost] = None
        self.models: Optional[ServerModels] = None  # None without the HTTP endpoint
        self._bundle: Optional[TritonBundle] = None
        self._repositories: List[pathlib.Path] = []
        self._server: Optional[TritonServerChild] = None
        self._startup_models: List[str] = []  # what the first start loads; restarts load what is loaded then
        self._expected: List[Ready] = []  # checked ready after the first start
        self._poller: Optional[RepositoryPoller] = None
        self._openai: Optional["OpenAIServer"] = None
        self.ready: List[Ready] = []  # for serve()'s lines

    def start(self, load_polled: Callable[[str], None], unload_polled: Callable[[str], None]) -> None:
        """Start tritonserver with every bound model; returns once they are ready.

        Args:
            load_polled, unload_polled: what the poll mode does with a model of the user's
                repository that appeared, changed or went.
        """
        config, repository = self._config, self._bindings.repository
        repository_models = self._bindings.startup_repository_models(config.model_control_mode, config.load_model)
        # what the poll mode compares with later; taken before the start so changes during it count
        known = repository.snapshot() if repository is not None and config.model_control_mode == "poll" else {}
        bindings = self._bindings
        self._startup_models = bindings.models.names() + repository_models + list(bindings.ensembles)
        self._expected = [("model", model.name, model.version) for model in bindings.models]
        self._expected += [("model", name, None) for name in repository_models]
        self._expected += [("ensemble", name, ensemble.model_version) for name, ensemble in bindings.ensembles.items()]
        self._prepare()
        self._set_up_models()
        self._start_server()
        if config.model_control_mode == "poll":
            poll_secs = config.repository_poll_secs or DEFAULT_POLL_SECS
            self._poller = RepositoryPoller(repository, poll_secs, load=load_polled, unload=unload_polled, known=known)
            self._poller.start()
        if config.openai_endpoint_port() is not None:
            self._start_openai()
        self.ready, self._expected = self._expected, []  # a restart checks the models loaded then
        self.say_started()
        if config.log_verbose:
            # PyTriton's words (its tests and users' log alerts look for them)
            logger.warning(
                "Triton Inference Server is running with enabled verbose logs (log_verbose_level=%d). "
                "It may affect inference performance.",
                config.log_verbose,
            )

    def _prepare(self) -> None:
        """Remove what dead processes left, check the ports, make the workspace and the models' host."""
        config = self._config
        unlink_orphaned_segments()
        remove_orphaned_workspaces()
        self._bundle = find_install(config.triton_home)
        ports = dict(config.ports)
        if config.openai_endpoint_port() is not None:
            ports["OpenAI"] = config.openai_endpoint_port()
        check_ports_free(ports, config.http_address or "0.0.0.0")
        self.workspace = Workspace(self._bundle, self._workspace_path)
        self.nested_calls = NestedCalls.of_run(config, self._security, self.workspace.calls_socket)
        self._repositories = [self.workspace.model_repository]
        if self._bindings.repository is not None:
            self._repositories.append(self._bindings.repository.path)
        self._server = TritonServerChild(
            command=self._server_argv,
            env=self._server_environment(),
            log_file=pathlib.Path(config.log_file) if config.log_file else self.workspace.log_file,
            endpoints=list(config.ports),
            models_ready=self._check_models_ready,
            start_timeout_s=_START_TIMEOUT_S,
            on_back=self._server_back,
            memory_growth_bytes=config.server_memory_growth(),
        )
        if config.allow_http is not False:
            control = ServerControl(
                connect_host(config.http_address), config.ports["HTTP"], access_token=self._security.access_token
            )
            self.models = ServerModels(
                control, self._server, loaded=self._startup_models, idle=self._bindings.models.idle
            )
        hosting = Hosting(
            repository=self.workspace.model_repository,
            sockets=self.workspace.sockets,
            supervisor=self.supervisor,
            on_unrecoverable=self._on_unrecoverable,
            shm_limit=config.shm_limit_bytes,
            spin_us=config.relay_spin(),
            in_flight=config.relay_batches_in_flight(),
            nested_calls=self.nested_calls,
        )
        self.host = ModelHost(self._bindings.models, hosting, self.models)

    def _set_up_models(self) -> None:
        """Start the bound models' relay servers and write the repository entries."""
        bindings, repository = self._bindings, self.workspace.model_repository
        for model in bindings.models:
            self.host.setup(model)
        for name in bindings.models.names():
            bindings.models.write_config(repository, name)
        configs = bindings.known_configs()
        for ensemble in bindings.ensembles.values():
            validate_ensemble(ensemble, configs)  # again: models bound after it are known now
            write_ensemble_entry(repository, ensemble)

    def _server_environment(self) -> Dict[str, str]:
        env = self._bundle.server_environment(os.environ)
        if restriction_value(self._security) is not None:
            env = hide_token_environment(env)  # the token out of /proc/<pid>/cmdline (docs/security.md)
        return env

    def _start_server(self) -> None:
        """Have the supervisor start tritonserver; returns once it and its models are ready."""
        config = self._config
        self._security.warn_if_open()
        if self._security.access_token:
            # before the server starts: a client of this host that sees a model ready (with the
            # native relay, a fraction of a second after the start) must find the token already
            for endpoint in ("HTTP", "gRPC"):
                if endpoint in config.ports:
                    write_token(config.ports[endpoint], self._security.access_token)
        try:
            self.supervisor.launch(self._server).result()
        except PyTritonServerError as exc:
            raise name_remote_repository(exc, self._bindings.repository) from None

    @property
    def server(self) -> Optional[ServerProcess]:
        """The tritonserver process of now (another one after each restart)."""
        return self._server.process if self._server is not None else None

    def serving(self) -> bool:
        """Whether every child of the run serves (tritonserver, the endpoint, each pool of worker
        processes) and every bound model's relay servers do."""
        return self.supervisor.serving() and all(model.is_alive() for model in self._bindings.models)

    def _server_argv(self, restarts: int) -> List[str]:
        """tritonserver's command line for its ``restarts``-th restart (0: the first start), with the
        models to load: at the first start those bound and chosen, then those loaded at the time."""
        config = self._config
        startup_models = self._startup_models
        if restarts and self.models is not None:
            startup_models = self.models.loaded
        argv = server_argv(
            config,
            binary=self._bundle.binary,
            model_repositories=self._repositories,
            backend_directory=self.workspace.backends,
            cache_directory=self._bundle.caches,
            startup_models=startup_models,
            restriction=restriction_value(self._security),
            restarts=restarts,
            calls_socket=self.workspace.calls_socket,
            calls_token=self.nested_calls.settings.calls_token,
        )
        logger.debug("starting %s", " ".join(argv).replace(self._security.access_token or "\0", "<access token>"))
        return argv

    def _check_models_ready(self) -> None:
        """Raise PyTritonServerError unless every model the server was started with is ready."""
        if self.models is None:
            return  # no HTTP endpoint: nothing to ask it with
        expected = self._expected or [("model", name, None) for name in self.models.loaded]
        for what, name, version in expected:
            if not self.models.model_ready(name, version):
                raise PyTritonServerError(f"{what} {name!r} is not ready after start", log_tail=self.server.log_tail())

    def _given_up(self, cause: str) -> None:
        """The run's supervisor gave up: a load waiting for tritonserver waits no more; ``Triton`` stops."""
        if self._server is not None:
            self._server.abandon()
        self._on_given_up(cause)

    def _server_back(self) -> None:
        """A restarted tritonserver serves: its models are ready, the relay servers reached again."""
        self.lines.console.say("tritonserver serves again (restart %d)", self.supervisor.restarts(self._server))

    def _start_openai(self) -> None:
        """Start the OpenAI endpoint (docs/openai.md), a child of the run's supervisor."""
        from .openai.server import OpenAIServer  # noqa: PLC0415 - only when used

        openai = OpenAIServer.for_config(
            self._config,
            access_token=self._security.access_token,
            models=self.openai_models,
            on_cancel=self._bindings.models.cancel,
        )
        self.supervisor.launch(openai).result()
        self._openai = openai

    def openai_models(self) -> Dict[str, OpenAIModel]:
        """The bound models the OpenAI endpoint serves, by name."""
        return catalog(model.config for model in self._bindings.models)

    def load(self, model: Model) -> None:
        """Start a model version's relay servers and have the server (re)load its model; undone if it
        fails. Asked while tritonserver is being started again, it waits for it."""
        self.host.load(model)
        self.ready.append(("model", model.name, model.version))
        if self._openai is not None:
            self._openai.update(self.openai_models())
        self.lines.ready("model", model.name, model.version)

    def load_ensemble(self, config: EnsembleConfig) -> None:
        """Write an ensemble's entry and have the server load it; undone if it fails."""
        if self.models is None:
            raise no_control(f"bind ensemble {config.model_name!r} after run()")
        repository = self.workspace.model_repository
        write_ensemble_entry(repository, config)
        try:
            self.models.load(config.model_name, f"load ensemble {config.model_name!r}")
        except PyTritonServerError:
            self._bindings.ensembles.pop(config.model_name, None)
            remove_model_entry(repository, config.model_name)
            raise
        self.ready.append(("ensemble", config.model_name, config.model_version))
        self.lines.ready("ensemble", config.model_name, config.model_version)

    def stop(self) -> None:
        """Stop the poller, unload the models, stop the server and the relay servers, remove the workspace."""
        self.supervisor.pause()  # a process stopped on purpose is not started again
        if self._server is not None:
            self._server.end_watch()  # its thread ends: nothing restarts the server being stopped
        if self._openai is not None:
            self._openai.close()  # first: no new request reaches the models being unloaded
            self._openai = None
        if self._poller is not None:
            self._poller.stop()
        if self.host is not None:
            self.host.stop_availability()
        if self.server is not None:
            stop_server(
                self.server,
                self.models.control if self.models is not None else None,
                self._bindings.names(),
                busy=self._bindings.models.busy,
                idle=self._bindings.models.idle,
                exit_timeout_s=self._config.exit_timeout_secs or DEFAULT_EXIT_TIMEOUT_S,
                # Now, with no callable running: open HTTP connections would hold up the server's
                # stop, and the asyncio clients close in the worker processes' loops, which stop below.
                unloaded_hook=self.nested_calls.close if self.nested_calls is not None else lambda: None,
            )
        if self.host is not None:
            self.host.teardown()
        if self.workspace is not None:
            self.workspace.close()
        self.supervisor.close()  # last: the parent-death signal of tritonserver and the worker processes is tied to its thread

    def say_started(self, logged: bool = True) -> None:
        """The endpoints' lines, then one per model loaded so far (see :class:`ServerLines`)."""
        openai = (self._openai.host, self._openai.port) if self._openai is not None else None
        self.lines.started(self.ready, openai, logged=logged)


def resolve_options(
    config: Optional[TritonConfig],
    triton_lifecycle_policy: Optional[TritonLifecyclePolicy],
    security_config: Optional[TritonSecurityConfig],
    model_repository: Union[str, pathlib.Path, None],
) -> Tuple[TritonLifecyclePolicy, TritonConfig, TritonSecurityConfig]:
    """``Triton()``'s arguments checked and completed: the policy, the config (environment variables and
    ``model_repository`` applied) and the security config."""
    if triton_lifecycle_policy is None:
        vertex_ai = config is not None and config.allow_vertex_ai
        triton_lifecycle_policy = VertextAILifecyclePolicy if vertex_ai else DefaultTritonLifecyclePolicy
    if not isinstance(triton_lifecycle_policy, TritonLifecyclePolicy):
        raise PyTritonValidationError(
            f"triton_lifecycle_policy must be a TritonLifecyclePolicy, got {type(triton_lifecycle_policy).__name__}"
        )
    config = (config or TritonConfig()).with_env()
    security = security_config if security_config is not None else TritonSecurityConfig()
    if not isinstance(security, TritonSecurityConfig):
        raise PyTritonValidationError(
            f"security_config must be a TritonSecurityConfig, got {type(security_config).__name__}"
        )
    check_restriction_overlap(config, security)
    if model_repository is not None:
        config = dataclasses.replace(config, model_repository=repository_location(model_repository))
    return triton_lifecycle_policy, config, security

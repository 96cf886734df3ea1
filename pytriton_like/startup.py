"""One run of tritonserver for a ``Triton``: what ``run()`` starts and ``stop()`` ends.

:class:`ServerRun` holds what a run creates (the supervisor, the workspace, the nested calls' clients,
the server process, its control calls, the repository poller), each set as soon as it exists, so
that :meth:`ServerRun.stop` ends whatever a failed start got to. The order of the start is
docs/architecture.md's "Start-up". Every process of the run — tritonserver, the OpenAI endpoint's
process, worker processes — is a child of the run's :class:`~pytriton_like.supervisor.Supervisor`:
one that dies is started again (docs/reliability.md).
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
from .models.nested_calls import NestedCalls
from .models.availability import Availability
from .models.model import Model
from .models.poller import RepositoryPoller
from .models.repository import remove_model_entry, write_ensemble_entry
from .models.s3_repository import name_remote_repository
from .models.user_repository import repository_location
from .openai.contract import OpenAIModel, catalog
from .relay.shm import unlink_orphaned_segments
from .server.bundle import find_install
from .server.child import TritonServerChild
from .server.command_line import connect_host, endpoint_urls, local_url, server_argv
from .server.config import DEFAULT_POLL_SECS, TritonConfig
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

Ready = Tuple[str, str, Optional[int]]  # (what, name, version) of a model or ensemble loaded


class ServerRun:
    """The server of one ``Triton`` while it runs.

    Args:
        config: the server options (environment variables applied).
        security: the access token and restricted API groups.
        bindings: the bound models and ensembles.
        workspace_path: the workspace folder (``None``: a temporary one).
        console: the lines ``serve()`` prints.
        on_unrecoverable: called from a worker whose callable raised ``PyTritonUnrecoverableError``.
        on_given_up: called with what failed (a sentence) when tritonserver or the OpenAI endpoint
            died once more than their restart policy allows.
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
        self._console = console
        self._on_unrecoverable = on_unrecoverable
        self._on_given_up = on_given_up
        self.supervisor = Supervisor()
        self.workspace: Optional[Workspace] = None
        self.loopback: Optional[NestedCalls] = None
        self._availability: Dict[str, Availability] = {}
        self._server: Optional[TritonServerChild] = None
        self._startup_models: List[str] = []  # what the first start loads; restarts load what is loaded then
        self._expected: List[Ready] = []
        self.models: Optional[ServerModels] = None  # None without the HTTP endpoint
        self._poller: Optional[RepositoryPoller] = None
        self._openai: Optional["OpenAIServer"] = None
        self.ready: List[Ready] = []  # for serve()'s lines

    def start(self, load_polled: Callable[[str], None], unload_polled: Callable[[str], None]) -> None:
        """Start tritonserver with every bound model; returns once they are ready.

        Args:
            load_polled, unload_polled: what the poll mode does with a model of the user's
                repository that appeared, changed or went.
        """
        config, bindings = self._config, self._bindings
        repository = bindings.repository
        repository_models = bindings.startup_repository_models(config.model_control_mode, config.load_model)
        # what the poll mode compares with later; taken before the start so changes during it count
        poll = repository is not None and config.model_control_mode == "poll"
        known = repository.snapshot() if poll else {}
        unlink_orphaned_segments()
        remove_orphaned_workspaces()
        bundle = find_install(config.triton_home)
        ports = dict(config.ports)
        if config.openai_endpoint_port() is not None:
            ports["OpenAI"] = config.openai_endpoint_port()
        check_ports_free(ports, config.http_address or "0.0.0.0")
        self.workspace = Workspace(bundle, self._workspace_path)
        self.loopback = NestedCalls.of_run(config, self._security, self.workspace.calls_socket)
        for model in bindings.models:
            self.setup(model)
        for name in bindings.models.names():
            bindings.models.write_config(self.workspace.model_repository, name)
        configs = bindings.known_configs()
        for ensemble in bindings.ensembles.values():
            validate_ensemble(ensemble, configs)  # again: models bound after it are known now
            write_ensemble_entry(self.workspace.model_repository, ensemble)
        repositories = [self.workspace.model_repository]
        if repository is not None:
            repositories.append(repository.path)
        self._startup_models = bindings.models.names() + repository_models + list(bindings.ensembles)
        self._repositories = repositories
        self._bundle = bundle
        self._security.warn_if_open()
        env = bundle.server_environment(os.environ)
        if restriction_value(self._security) is not None:
            env = hide_token_environment(env)  # the token out of /proc/<pid>/cmdline (docs/security.md)
        log_file = pathlib.Path(config.log_file) if config.log_file else self.workspace.log_file
        if self._security.access_token:
            # before the server starts: a client of this host that sees a model ready (with the
            # native relay, a fraction of a second after the start) must find the token already
            for endpoint in ("HTTP", "gRPC"):
                if endpoint in config.ports:
                    write_token(config.ports[endpoint], self._security.access_token)
        self._expected = [("model", model.name, model.version) for model in bindings.models]
        self._expected += [("model", name, None) for name in repository_models]
        self._expected += [("ensemble", name, ensemble.model_version) for name, ensemble in bindings.ensembles.items()]
        self._server = TritonServerChild(
            command=self._server_argv,
            env=env,
            log_file=log_file,
            endpoints=list(config.ports),
            models_ready=self._check_models_ready,
            policy=config.restart_policy(),
            start_timeout_s=_START_TIMEOUT_S,
            on_given_up=lambda cause: self._on_given_up(f"tritonserver exited unexpectedly ({cause})"),
            on_back=self._server_back,
        )
        if config.allow_http is not False:
            control = ServerControl(
                connect_host(config.http_address), config.ports["HTTP"], access_token=self._security.access_token
            )
            self.models = ServerModels(control, self._server, loaded=self._startup_models)
        try:
            self.supervisor.launch(self._server).result()
        except PyTritonServerError as exc:
            raise name_remote_repository(exc, repository) from None
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

    @property
    def server(self) -> Optional[ServerProcess]:
        """The tritonserver process of now (another one after each restart)."""
        return self._server.process if self._server is not None else None

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
            restriction=restriction_value(self._security), restarts=restarts,
            calls_socket=self.workspace.calls_socket, calls_token=self.loopback.settings.calls_token,
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

    def _server_back(self) -> None:
        """A restarted tritonserver serves: its models are ready, the relay servers reached again."""
        self._console.say("tritonserver serves again (restart %d)", self.supervisor.restarts(self._server))

    def _start_openai(self) -> None:
        """Start the OpenAI endpoint (docs/openai.md), a child of the run's supervisor."""
        from .openai.server import OpenAIServer  # noqa: PLC0415 - only when used

        openai = OpenAIServer.for_config(
            self._config,
            access_token=self._security.access_token,
            models=self.openai_models,
            on_given_up=lambda cause: self._on_given_up(f"the OpenAI endpoint exited unexpectedly ({cause})"),
            on_cancel=self._cancel_stream,
        )
        self.supervisor.launch(openai).result()
        self._openai = openai

    def _cancel_stream(self, model_name: str, key: str) -> None:
        """The OpenAI endpoint gave up on a streamed request of ``model_name`` (its client went
        away): every bound version's relay servers are told its cancel key (one has it)."""
        for model in self._bindings.models.versions(model_name):
            model.cancel(key)

    def openai_models(self) -> Dict[str, OpenAIModel]:
        """The bound models the OpenAI endpoint serves, by name."""
        return catalog(model.config for model in self._bindings.models)

    def setup(self, model: Model) -> None:
        """Start a model version's workers (each binds its socket) and write its repository entry."""
        config = self._config
        availability = None
        if model.processes:  # not ready while none of its workers lives (models/availability.py)
            availability = self._availability.get(model.name)
            if availability is None:
                name = model.name
                availability = self._availability[name] = Availability(
                    name, load=lambda: self._control().load(name), unload=lambda: self._control().unload(name)
                )
        model.setup(
            self.workspace.model_repository,
            self.workspace.sockets,
            self._on_unrecoverable,
            config.shm_limit_bytes,
            config.relay_spin(),
            config.relay_batches_in_flight(),
            loopback=self.loopback,
            on_availability=availability.set if availability is not None else None,
            supervisor=self.supervisor,
        )

    def load(self, model: Model) -> None:
        """Start a model version's workers and have the server (re)load its model; undone if it fails.

        Triton reloads the model's other versions too; their workers accept the new backend instances.
        """
        try:
            if self.models is None:
                raise no_control(f"bind model {model.name!r} after run()")
            self.setup(model)
            self._bindings.models.write_config(self.workspace.model_repository, model.name)
            self.models.load(model.name, f"load model {model.name!r} version {model.version}")
        except BaseException:
            self._forget(model)
            raise
        self.ready.append(("model", model.name, model.version))
        if self._openai is not None:
            self._openai.update(self.openai_models())
        self.say_ready("model", model.name, model.version)

    def _forget(self, model: Model) -> None:
        """Undo the binding of a model version that failed to load."""
        self._bindings.models.remove(model)
        model.teardown(self.workspace.model_repository)
        self._bindings.models.write_config(self.workspace.model_repository, model.name)

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
        self.say_ready("ensemble", config.model_name, config.model_version)

    def _control(self) -> ServerModels:
        if self.models is None:
            raise no_control("load or unload a model")
        return self.models

    def stop(self) -> None:
        """Stop the poller, unload the models, stop the server and the workers, remove the workspace."""
        self.supervisor.pause()  # a process stopped on purpose is not started again
        if self._openai is not None:
            self._openai.close()  # first: no new request reaches the models being unloaded
            self._openai = None
        if self._poller is not None:
            self._poller.stop()
        for availability in self._availability.values():
            availability.close()
        if self.server is not None:
            exit_timeout = self._config.exit_timeout_secs or DEFAULT_EXIT_TIMEOUT_S
            models = self._bindings.models
            stop_server(
                self.server,
                self.models.control if self.models is not None else None,
                self._bindings.names(),
                busy=lambda: any(model.busy() for model in models),
                exit_timeout_s=exit_timeout,
                # Now, with no callable running: open HTTP connections would hold up the server's
                # stop, and the asyncio clients close in the workers' loops, which stop below.
                unloaded_hook=self.loopback.close if self.loopback is not None else lambda: None,
            )
        if self.workspace is not None:
            for model in self._bindings.models:
                model.teardown(self.workspace.model_repository)
            self.workspace.close()
        self.supervisor.close()  # last: a worker process's parent-death signal is tied to its thread

    def say_started(self, logged: bool = True) -> None:
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
        if self._openai is not None:
            everywhere = connect_host(self._openai.host) != self._openai.host
            suffix = " (listening on all interfaces)" if everywhere else ""
            url = f"http://{connect_host(self._openai.host)}:{self._openai.port}/v1"
            self._console.say("OpenAI on %s%s", url, suffix, logged=logged)
        for what, name, version in self.ready:
            self.say_ready(what, name, version, logged=logged)

    def say_ready(self, what: str, name: str, version: Optional[int], logged: bool = True) -> None:
        """The line of a model that is ready, with the url its inference requests go to over HTTP."""
        numbered = f" version {version}" if version is not None else ""
        if "HTTP" in self._config.ports:
            url = f"{local_url(self._config, 'HTTP')}/v2/models/{name}/infer"
            self._console.say("%s %s%s ready: %s", what, name, numbered, url, logged=logged)
        else:
            self._console.say("%s %s%s ready", what, name, numbered, logged=logged)


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

"""A bound model: its resolved config, its callables and the relay servers that serve them."""

import dataclasses
import logging
import os
import pathlib
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence

from ..triton_context import TritonContext, attach_triton_context
from ..model_config.triton_model_config import TritonModelConfig
from ..relay.settings import RelaySettings
from ..relay.transport import UNIX_SCHEME
from .worker_options import WorkerInfo, WorkerOptions
from ..relay_server.strategy import RelayServer, start_model_instance
from ..supervisor import Supervisor
from .repository import remove_version_entry, write_version_entry
from .warmup import warm_up
from .worker_pool import WorkerPool
from .worker_process import WorkerSpec, portable

if TYPE_CHECKING:
    from .nested_calls import NestedCalls

__all__ = ["Hosting", "Model"]

logger = logging.getLogger(__name__)

# How long a starting backend instance waits for its relay server to answer HELLO.
_HANDSHAKE_TIMEOUT_S = 60


@dataclasses.dataclass(frozen=True)
class Hosting:
    """Where and how the relay servers of a model run: what ``Triton``'s run or a ``RemoteTriton``
    gives each model it sets up.

    Attributes:
        repository: the model repository its entry is written to.
        sockets: the folder of the relay servers' sockets.
        supervisor: the run's supervisor, which its pool of worker processes is a child of.
        on_unrecoverable: called when a callable raised ``PyTritonUnrecoverableError``.
        shm_limit: the largest shared-memory arena of the relay, per instance and direction.
        spin_us: how long the relay's backend polls for the answer before it sleeps
            (TritonConfig.relay_spin_us); only used while the model's instances leave CPUs idle
            (:func:`usable_spin_us`).
        in_flight: batches in flight per instance (TritonConfig.relay_in_flight).
        nested_calls: the clients of nested calls, handed to the callables in their ``TritonContext``.
    """

    repository: pathlib.Path
    sockets: pathlib.Path
    supervisor: Supervisor
    on_unrecoverable: Callable[[BaseException], None]
    shm_limit: Optional[int] = None
    spin_us: int = 0
    in_flight: int = 1
    nested_calls: Optional["NestedCalls"] = None


class Model:
    """One bound model version: ``len(infer_funcs)`` instances, each relayed to its own relay
    server: with ``workers=1`` a thread of your process each (one per callable, "in your
    process"), with ``workers`` > 1 a worker process each, the pool of them one relay server to
    this class (:class:`~.worker_pool.WorkerPool`).

    Args:
        tag: short unique name of this binding, used for socket and shared-memory names.
        workers: 1: the instances are threads of this process (one per callable); N > 1: N worker
            processes run the one callable.
        worker_options: how the worker processes start and restart (``workers`` > 1).
        trace_config: what ``tracer`` was built from, for worker processes to build their own.
    """

    def __init__(
        self,
        config: TritonModelConfig,
        infer_funcs: Sequence[Callable],
        strict: bool,
        tag: str,
        tracer: Optional[Any] = None,
        *,
        workers: int = 1,
        worker_options: Optional[WorkerOptions] = None,
        trace_config: Optional[List[str]] = None,
    ):
        self.config = config
        self.strict = strict
        self._tracer = tracer  # OpenTelemetry spans around each call (tracing.py), or None
        self._trace_config = trace_config
        self._infer_funcs = list(infer_funcs)
        self._tag = tag
        self.processes = workers > 1  # the instances are worker processes (else threads of this process)
        self.worker_options = worker_options or WorkerOptions()
        self._servers: List[RelayServer] = []  # threads' relay servers, or one pool of worker processes

    @property
    def name(self) -> str:
        return self.config.model_name

    @property
    def version(self) -> int:
        return self.config.model_version

    def setup(self, hosting: Hosting, on_availability: Optional[Callable[[bool], None]] = None) -> None:
        """Start the relay servers (their sockets bound) and write the version's folder in the repository.

        The model's config.pbtxt, shared by its versions, is written by :class:`BoundModels`.

        Args:
            hosting: where they run.
            on_availability: told False when none of the model's worker processes serves any more,
                True when one is back (:class:`~.availability.Availability`).
        """
        instances = self.config.instance_count
        paths = [str(hosting.sockets / f"{self._tag}-{index}") for index in range(instances)]
        if self.processes:
            self._servers = [self._start_pool(paths, hosting, on_availability)]
        else:
            self._servers = [
                start_model_instance(
                    config=self.config,
                    infer_func=infer_func,
                    strict=self.strict,
                    address=f"{UNIX_SCHEME}{path}",
                    on_unrecoverable=hosting.on_unrecoverable,
                    shm_limit=hosting.shm_limit,
                    nested_calls=hosting.nested_calls,
                    tracer=self._tracer,
                )
                for infer_func, path in zip(self._infer_funcs, paths)
            ]
        grace_s = self.worker_options.restart_policy().grace_s
        settings = RelaySettings(
            owner_pid=os.getpid(),
            sockets=tuple(paths),
            decoupled=self.config.decoupled,
            sequence=self.config.sequence_batcher is not None,
            batching=self.config.batching and self.config.max_batch_size > 0,
            shm_limit=hosting.shm_limit or 0,
            spin_us=usable_spin_us(hosting.spin_us, instances),
            in_flight=hosting.in_flight,
            outputs=len(self.config.outputs),
            handshake_timeout_ms=_HANDSHAKE_TIMEOUT_S * 1000,
            worker_processes=self.processes,
            restart_wait_ms=int(grace_s * 1000) if self.processes else 0,
        )
        write_version_entry(hosting.repository, self.config, settings)
        if self.config.model_warmup and not self.processes:  # before Triton loads it, as PyTriton
            warm_up(self.name, self._infer_funcs, self.config.model_warmup)

    def _start_pool(
        self, paths: List[str], hosting: Hosting, on_availability: Optional[Callable[[bool], None]]
    ) -> WorkerPool:
        """Start the worker processes (one per instance) and wait until each listens."""
        options = self.worker_options
        infer_func = self._infer_funcs[0] if options.start_method == "fork" else portable(self._infer_funcs[0])
        specs = [
            WorkerSpec(
                info=WorkerInfo(self.name, index, len(paths), options.device_of(index)),
                infer_func=infer_func,
                config=self.config,
                strict=self.strict,
                address=f"{UNIX_SCHEME}{path}",
                parent_pid=os.getpid(),
                shm_limit=hosting.shm_limit,
                nested_calls=hosting.nested_calls.settings if hosting.nested_calls is not None else None,
                trace_config=self._trace_config,
            )
            for index, path in enumerate(paths)
        ]
        pool = WorkerPool(specs, options, hosting.supervisor, hosting.on_unrecoverable, on_availability)
        pool.open()
        return pool

    def is_alive(self) -> bool:
        """Whether its relay servers are set up and serve (a pool: one of its worker processes serves)."""
        return bool(self._servers) and all(server.serving() for server in self._servers)

    def cancel(self, key: str) -> None:
        """Cancel the streamed request tagged with ``key`` (relay_server/cancel_keys.py), whichever
        instance has it: each relay server is told."""
        if not self.config.decoupled:
            return
        for server in list(self._servers):
            server.cancel(key)

    def busy(self) -> bool:
        """Whether any of its relay servers is handling a batch."""
        return any(server.busy() for server in self._servers)

    def teardown(self, repository: pathlib.Path) -> None:
        """Stop the relay servers and remove the version's folder; the server must have unloaded the model."""
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        remove_version_entry(repository, self.name, self.version)


def usable_spin_us(spin_us: int, instances: int) -> int:
    """The spin time a model's relay uses: ``spin_us`` while each instance's backend thread and relay server can
    have a CPU of their own, else 0. Spinning pays only when a CPU would otherwise be idle; two
    instances on two cores were slower with it (bench/README.md)."""
    return spin_us if 2 * instances <= len(os.sched_getaffinity(0)) else 0


def _inject_triton_context(triton_context: TritonContext, model_callable: Callable) -> Callable:
    """Attach ``triton_context`` to ``model_callable``, under the name PyTriton's tests use.

    Users call :func:`pytriton_like.decorators.attach_triton_context`; this keeps PyTriton's
    private helper working for code that unit-tests callables with it.
    """
    attach_triton_context(model_callable, triton_context)
    return model_callable

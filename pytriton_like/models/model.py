"""A bound model: its resolved config, its callables and the workers that serve them."""

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
from ..supervisor import RESTART_GRACE_S, Supervisor
from .repository import remove_version_entry, write_version_entry
from .warmup import warm_up
from .worker_pool import WorkerPool
from .worker_process import WorkerSpec, portable

if TYPE_CHECKING:
    from .nested_calls import NestedCalls

__all__ = ["Model"]

logger = logging.getLogger(__name__)

# How long a starting backend instance waits for its worker to answer HELLO.
_HANDSHAKE_TIMEOUT_S = 60


class Model:
    """One bound model version: ``len(infer_funcs)`` instances, each relayed to its own worker:
    a thread of this process each, or with ``workers`` > 1 a process each.

    Args:
        tag: short unique name of this binding, used for socket and shared-memory names.
        workers: 1: the instances are threads of this process (one per callable); N > 1: N worker
            processes run the one callable.
        worker_options: how the worker processes start (``workers`` > 1).
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
        self._worker_options = worker_options or WorkerOptions()
        self._servers: List[RelayServer] = []  # the relay servers of the instances, when threads of this process
        self._pool: Optional[WorkerPool] = None

    @property
    def name(self) -> str:
        return self.config.model_name

    def setup(
        self,
        repository: pathlib.Path,
        sockets: pathlib.Path,
        on_unrecoverable: Callable,
        shm_limit: Optional[int] = None,
        spin_us: int = 0,
        in_flight: int = 1,
        loopback: Optional["NestedCalls"] = None,
        on_availability: Optional[Callable[[bool], None]] = None,
        supervisor: Optional[Supervisor] = None,
    ) -> None:
        """Start the relay servers or worker processes (their sockets bound) and write the version's
        folder in the repository.

        The model's config.pbtxt, shared by its versions, is written by :class:`BoundModels`.

        Args:
            shm_limit: the largest shared-memory arena of the relay, per instance and direction.
            spin_us: how long the relay's backend polls for the worker's answer before it sleeps
                (TritonConfig.relay_spin_us); only used while the model's instances leave CPUs idle
                (:func:`usable_spin_us`).
            in_flight: batches in flight per instance (TritonConfig.relay_in_flight).
            loopback: the server's clients, handed to the callables in their ``TritonContext``.
            on_availability: told False when none of the model's worker processes lives any more,
                True when one is back (:class:`~.availability.Availability`).
            supervisor: starts, watches and restarts the worker processes (needed with ``workers`` > 1).
        """
        instances = self.config.instance_count
        spin_us = usable_spin_us(spin_us, instances)
        paths = [str(sockets / f"{self._tag}-{index}") for index in range(instances)]
        if self.processes:
            self._start_processes(paths, on_unrecoverable, shm_limit, loopback, on_availability, supervisor)
        else:
            for infer_func, path in zip(self._infer_funcs, paths):
                self._servers.append(
                    start_model_instance(
                        config=self.config,
                        infer_func=infer_func,
                        strict=self.strict,
                        address=f"{UNIX_SCHEME}{path}",
                        on_unrecoverable=on_unrecoverable,
                        shm_limit=shm_limit,
                        loopback=loopback,
                        tracer=self._tracer,
                    )
                )
        settings = RelaySettings(
            owner_pid=os.getpid(),
            sockets=tuple(paths),
            decoupled=self.config.decoupled,
            sequence=self.config.sequence_batcher is not None,
            batching=self.config.batching and self.config.max_batch_size > 0,
            shm_limit=shm_limit or 0,
            spin_us=spin_us,
            in_flight=in_flight,
            outputs=len(self.config.outputs),
            handshake_timeout_ms=_HANDSHAKE_TIMEOUT_S * 1000,
            worker_processes=self.processes,
            restart_wait_ms=int(RESTART_GRACE_S * 1000) if self.processes else 0,
        )
        write_version_entry(repository, self.config, settings)
        if self.config.model_warmup and not self.processes:  # before Triton loads it, as PyTriton
            warm_up(self.name, self._infer_funcs, self.config.model_warmup)

    def _start_processes(
        self,
        paths: List[str],
        on_unrecoverable: Callable,
        shm_limit: Optional[int],
        loopback: Optional["NestedCalls"],
        on_availability: Optional[Callable[[bool], None]],
        supervisor: Optional[Supervisor],
    ) -> None:
        """Start the worker processes (one per instance) and wait until each listens."""
        if supervisor is None:
            raise ValueError(f"model {self.name!r}: worker processes need a supervisor")
        options = self._worker_options
        infer_func = self._infer_funcs[0] if options.start_method == "fork" else portable(self._infer_funcs[0])
        specs = [
            WorkerSpec(
                info=WorkerInfo(self.name, index, len(paths), options.device_of(index)),
                infer_func=infer_func,
                config=self.config,
                strict=self.strict,
                address=f"{UNIX_SCHEME}{path}",
                parent_pid=os.getpid(),
                shm_limit=shm_limit,
                nested_calls=loopback.settings if loopback is not None else None,
                trace_config=self._trace_config,
            )
            for index, path in enumerate(paths)
        ]
        self._pool = WorkerPool(specs, options, supervisor, on_unrecoverable, on_availability)
        self._pool.start()

    @property
    def version(self) -> int:
        return self.config.model_version

    def is_alive(self) -> bool:
        """Whether its relay servers (or its worker processes' pool) are set up and not torn down."""
        return bool(self._servers) or self._pool is not None

    def cancel(self, key: str) -> None:
        """Cancel the streamed request tagged with ``key`` (relay_server/cancel_keys.py), whichever
        instance has it: each relay server is told (a worker process's through its pipe)."""
        if not self.config.decoupled:
            return
        for server in list(self._servers):
            server.cancel(key)
        pool = self._pool
        if pool is not None:
            pool.cancel(key)

    def busy(self) -> bool:
        """Whether any of its workers is handling a batch."""
        return any(server.busy() for server in self._servers) or (self._pool is not None and self._pool.busy())

    def teardown(self, repository: pathlib.Path) -> None:
        """Stop the workers and remove the version's folder; the server must have unloaded the model."""
        for server in self._servers:
            server.close()
        self._servers = []
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        remove_version_entry(repository, self.name, self.version)


def usable_spin_us(spin_us: int, instances: int) -> int:
    """The spin time a model's relay uses: ``spin_us`` while each instance's stub and worker can
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

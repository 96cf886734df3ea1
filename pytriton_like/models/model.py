"""A bound model: its resolved config, its callables and the workers that serve them."""

import logging
import os
import pathlib
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence

from ..triton_context import TritonContext, attach_triton_context
from ..model_config.triton_model_config import TritonModelConfig
from ..relay.settings import RelaySettings
from ..relay.transport import UNIX_SCHEME
from ..tracing import traced
from ..worker.handling import BatchHandler
from ..worker.outputs import OutputChecker
from ..worker.strategy import Worker, start_worker
from .repository import remove_version_entry, write_version_entry
from .warmup import warm_up

if TYPE_CHECKING:
    from .loopback import LoopbackClients

__all__ = ["Model"]

logger = logging.getLogger(__name__)

# How long a starting backend instance waits for its worker to answer HELLO.
_HANDSHAKE_TIMEOUT_S = 60


class Model:
    """One bound model version: ``len(infer_funcs)`` instances, each relayed to its own worker.

    Args:
        tag: short unique name of this binding, used for socket and shared-memory names.
    """

    def __init__(
        self,
        config: TritonModelConfig,
        infer_funcs: Sequence[Callable],
        strict: bool,
        tag: str,
        tracer: Optional[Any] = None,
    ):
        self.config = config
        self.strict = strict
        self._tracer = tracer  # OpenTelemetry spans around each call (tracing.py), or None
        self._infer_funcs = list(infer_funcs)
        self._tag = tag
        self._workers: List[Worker] = []

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
        loopback: Optional["LoopbackClients"] = None,
    ) -> None:
        """Start the workers (their sockets bound) and write the version's folder in the repository.

        The model's config.pbtxt, shared by its versions, is written by :class:`BoundModels`.

        Args:
            shm_limit: the largest shared-memory arena of the relay, per instance and direction.
            spin_us: how long the relay's backend polls for the worker's answer before it sleeps
                (TritonConfig.relay_spin_us); only used while the model's instances leave CPUs idle
                (:func:`usable_spin_us`).
            in_flight: batches in flight per instance (TritonConfig.relay_in_flight).
            loopback: the server's clients, handed to the callables in their ``TritonContext``.
        """
        spin_us = usable_spin_us(spin_us, len(self._infer_funcs))
        checker = OutputChecker(
            self.config.outputs, self.config.batching, self.strict, model_name=self.name, partial=self.config.decoupled
        )
        handler = BatchHandler(self.name, checker, on_unrecoverable)
        paths = [str(sockets / f"{self._tag}-{index}") for index in range(len(self._infer_funcs))]
        for infer_func, path in zip(self._infer_funcs, paths):
            context = TritonContext(model_config=self.config, loopback=loopback)
            context.model_configs[infer_func] = self.config
            attach_triton_context(infer_func, context)
            if self._tracer is not None:
                infer_func = traced(infer_func, self._tracer, self.name, self.version)
            self._workers.append(
                start_worker(
                    infer_func=infer_func,
                    decoupled=self.config.decoupled,
                    handler=handler,
                    address=f"{UNIX_SCHEME}{path}",
                    shm_limit=shm_limit,
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
        )
        write_version_entry(repository, self.config, settings)
        if self.config.model_warmup:  # before Triton loads it, as PyTriton
            warm_up(self.name, self._infer_funcs, self.config.model_warmup)

    @property
    def version(self) -> int:
        return self.config.model_version

    def is_alive(self) -> bool:
        """Whether its workers run (set up and not torn down)."""
        return bool(self._workers)

    def busy(self) -> bool:
        """Whether any of its workers is handling a batch."""
        return any(worker.busy for worker in self._workers)

    def teardown(self, repository: pathlib.Path) -> None:
        """Stop the workers and remove the version's folder; the server must have unloaded the model."""
        for worker in self._workers:
            worker.close()
        self._workers = []
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

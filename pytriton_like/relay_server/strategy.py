"""The one place that picks how a model instance is served, from what the model config says."""

from typing import Any, Callable, Optional, Protocol

from ..model_config.triton_model_config import TritonModelConfig
from ..tracing import traced
from ..triton_context import ModelCalls, TritonContext, attach_triton_context
from .batch import BatchServer
from .calling import BatchCall, ResponseStream
from .handling import BatchHandler
from .outputs import OutputChecker
from .stream import StreamServer

__all__ = ["RelayServer", "start_model_instance", "start_relay_server"]


class RelayServer(Protocol):
    """The user-process end of one model instance's relay, whichever kind serves it (a model's
    pool of worker processes answers the same, for all its instances: models/worker_pool.py)."""

    def busy(self) -> bool:
        """Whether a batch is being handled (a callable runs, or a stream goes on)."""

    def serving(self) -> bool:
        """Whether it takes batches now."""

    def cancel(self, key: str) -> None:
        """Cancel the streamed request tagged with ``key`` (:mod:`.cancel_keys`); from any thread.
        A model that does not stream has nothing to cancel."""

    def close(self) -> None:
        """Stop serving; what runs is waited for only a while."""


def start_relay_server(
    *,
    infer_func: Callable,
    decoupled: bool,
    handler: BatchHandler,
    address: str,
    shm_limit: Optional[int] = None,
    busy_flag: Optional[Any] = None,
) -> RelayServer:
    """A running relay server for one instance, its socket bound at ``address``.

    Decoupled models stream: any callable (function, coroutine, generator, async generator)
    becomes an async generator of responses, and batches run concurrently on an event loop.
    Other models answer each batch once, on a thread that calls the callable directly (the
    cheapest path).

    Args:
        busy_flag: where the server says whether it handles a batch (an object with ``value``,
            e.g. a ``multiprocessing.RawValue`` that a worker process's parent reads); by default
            a flag of its own.
    """
    if decoupled:
        return StreamServer(handler=handler, stream=ResponseStream(infer_func), address=address, busy_flag=busy_flag)
    return BatchServer(
        handler=handler, call=BatchCall(infer_func), address=address, shm_limit=shm_limit, busy_flag=busy_flag
    )


def start_model_instance(
    *,
    config: TritonModelConfig,
    infer_func: Callable,
    strict: bool,
    address: str,
    on_unrecoverable: Callable[[BaseException], None],
    shm_limit: Optional[int] = None,
    nested_calls: Optional[ModelCalls] = None,
    tracer: Optional[Any] = None,
    busy_flag: Optional[Any] = None,
) -> RelayServer:
    """The relay server of one instance of a bound model, in this process (the user's process, or
    a worker process): the callable gets its ``TritonContext`` and, with a tracer, its spans."""
    context = TritonContext(model_config=config, loopback=nested_calls)
    context.model_configs[infer_func] = config
    attach_triton_context(infer_func, context)
    if tracer is not None:
        infer_func = traced(infer_func, tracer, config.model_name, config.model_version)
    checker = OutputChecker(config.outputs, config.batching, strict, model_name=config.model_name, partial=config.decoupled)
    return start_relay_server(
        infer_func=infer_func,
        decoupled=config.decoupled,
        handler=BatchHandler(config.model_name, checker, on_unrecoverable),
        address=address,
        shm_limit=shm_limit,
        busy_flag=busy_flag,
    )

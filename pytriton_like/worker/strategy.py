"""The one place that picks how a model instance is served, from what the model config says."""

from typing import Any, Callable, Optional, Union

from ..model_config.triton_model_config import TritonModelConfig
from ..tracing import traced
from ..triton_context import ModelCalls, TritonContext, attach_triton_context
from .calling import BatchCall, ResponseStream
from .handling import BatchHandler
from .instance import InstanceWorker
from .outputs import OutputChecker
from .stream import StreamWorker

__all__ = ["start_instance", "start_worker", "Worker"]

Worker = Union[InstanceWorker, StreamWorker]


def start_worker(
    *,
    infer_func: Callable,
    decoupled: bool,
    handler: BatchHandler,
    address: str,
    shm_limit: Optional[int] = None,
    busy_flag: Optional[Any] = None,
) -> Worker:
    """A running worker for one instance, its socket bound at ``address``.

    Decoupled models stream: any callable (function, coroutine, generator, async generator)
    becomes an async generator of responses, and batches run concurrently on an event loop.
    Other models answer each batch once, on a thread that calls the callable directly (the
    cheapest path).
    """
    if decoupled:
        return StreamWorker(handler=handler, stream=ResponseStream(infer_func), address=address)
    return InstanceWorker(
        handler=handler, call=BatchCall(infer_func), address=address, shm_limit=shm_limit, busy_flag=busy_flag
    )


def start_instance(
    *,
    config: TritonModelConfig,
    infer_func: Callable,
    strict: bool,
    address: str,
    on_unrecoverable: Callable[[BaseException], None],
    shm_limit: Optional[int] = None,
    loopback: Optional[ModelCalls] = None,
    tracer: Optional[Any] = None,
    busy_flag: Optional[Any] = None,
) -> Worker:
    """The worker of one instance of a bound model, in this process (a thread of the user's
    process, or a worker process): the callable gets its ``TritonContext`` and, with a tracer,
    its spans. ``busy_flag``: where a non-decoupled worker says whether it handles a batch."""
    context = TritonContext(model_config=config, loopback=loopback)
    context.model_configs[infer_func] = config
    attach_triton_context(infer_func, context)
    if tracer is not None:
        infer_func = traced(infer_func, tracer, config.model_name, config.model_version)
    checker = OutputChecker(config.outputs, config.batching, strict, model_name=config.model_name, partial=config.decoupled)
    return start_worker(
        infer_func=infer_func,
        decoupled=config.decoupled,
        handler=BatchHandler(config.model_name, checker, on_unrecoverable),
        address=address,
        shm_limit=shm_limit,
        busy_flag=busy_flag,
    )


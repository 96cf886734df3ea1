"""The one place that picks how a model instance is served, from what the model config says."""

from typing import Callable, Optional, Union

from .calling import BatchCall, ResponseStream
from .handling import BatchHandler
from .instance import InstanceWorker
from .stream import StreamWorker

__all__ = ["start_worker", "Worker"]

Worker = Union[InstanceWorker, StreamWorker]


def start_worker(
    *,
    infer_func: Callable,
    decoupled: bool,
    handler: BatchHandler,
    address: str,
    shm_limit: Optional[int] = None,
) -> Worker:
    """A running worker for one instance, its socket bound at ``address``.

    Decoupled models stream: any callable (function, coroutine, generator, async generator)
    becomes an async generator of responses, and batches run concurrently on an event loop.
    Other models answer each batch once, on a thread that calls the callable directly (the
    cheapest path).
    """
    if decoupled:
        return StreamWorker(handler=handler, stream=ResponseStream(infer_func), address=address)
    return InstanceWorker(handler=handler, call=BatchCall(infer_func), address=address, shm_limit=shm_limit)

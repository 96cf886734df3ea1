"""Turn a user's inference callable into the shapes the relay servers call.

- :class:`BatchCall` — ``requests -> responses``, for non-decoupled models (one answer per batch).
- :class:`ResponseStream` — ``requests -> async iterator of responses``, for decoupled models:
  plain functions, coroutines, generators and async generators all become one async generator.
"""

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import logging
from typing import AsyncIterator, Callable, Coroutine, List, Optional

from .. import nested_trace
from ..proxy.types import Request
from .hints import call_hint

__all__ = ["BatchCall", "ResponseStream"]

logger = logging.getLogger(__name__)

_DONE = object()


class BatchCall:
    """``requests -> responses`` for any inference callable; :meth:`close` when done.

    A coroutine function runs on an event loop of its own, driven by the thread that calls.
    """

    def __init__(self, infer_func: Callable):
        self._func = infer_func
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._call = infer_func  # requests -> responses: the callable itself, or it run on the loop
        if _is_coroutine_function(infer_func):
            self._loop = asyncio.new_event_loop()
            self._call = self._run_on_loop

    def __call__(self, requests: List[Request]):
        try:
            if len(requests) == 1 and requests[0]._triton_trace:  # nested_trace.of_batch, inlined: the hot path
                with nested_trace.continuing(requests[0]._triton_trace):
                    return self._call(requests)
            return self._call(requests)
        except TypeError as exc:
            hint = call_hint(self._func, exc, requests)
            if hint is None:
                raise
            raise TypeError(f"{exc}; {hint}") from exc

    def _run_on_loop(self, requests: List[Request]):
        return self._loop.run_until_complete(self._func(requests))

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


class ResponseStream:
    """``requests -> async iterator of responses`` on the caller's event loop.

    Sync code (a plain function, each step of a generator) runs in a thread pool so that the
    event loop goes on serving other batches meanwhile. A stream that ends early (closed, or its
    task cancelled) closes the callable's generator, so that its ``finally`` runs and no further
    piece is asked of it; a sync step still running is waited for first.
    """

    def __init__(self, infer_func: Callable, max_threads: int = 32):
        self._func = infer_func
        self._async = _is_async(infer_func)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_threads, thread_name_prefix="pytriton_like-call")

    async def __call__(self, requests: List[Request]) -> AsyncIterator:
        """The batch's responses; called in a task of the batch's own (StreamServer), whose context
        holds the Triton trace its nested calls continue (:mod:`..nested_trace`)."""
        loop = asyncio.get_running_loop()
        trace = nested_trace.of_batch(requests)
        if trace:
            nested_trace.enter(trace)
        # the batch's sync code runs in the pool's threads, one step at a time, all of it in one copy of
        # this context: a ``with request.traced_span()`` around a yield ends in the context it began in
        context = contextvars.copy_context()
        try:
            if self._async:
                result = self._func(requests)
            else:
                result = await loop.run_in_executor(self._pool, context.run, self._func, requests)
        except TypeError as exc:
            hint = call_hint(self._func, exc, requests)
            if hint is None:
                raise
            raise TypeError(f"{exc}; {hint}") from exc
        if inspect.isasyncgen(result):
            try:
                async for responses in result:
                    yield responses
            finally:
                if result.ag_frame is not None:  # not run to its end
                    await _uninterrupted(_close_async(result))
        elif inspect.isgenerator(result):
            step: Optional[concurrent.futures.Future] = None
            try:
                while True:
                    step = self._pool.submit(context.run, next, result, _DONE)
                    responses = await asyncio.wrap_future(step)
                    if responses is _DONE:
                        return
                    yield responses
            finally:
                if inspect.getgeneratorstate(result) != inspect.GEN_CLOSED:  # not run to its end
                    await _uninterrupted(self._close(result, step, context))
        elif inspect.isawaitable(result):
            yield await result
        else:
            yield result

    async def _close(self, generator, step: Optional[concurrent.futures.Future], context: contextvars.Context) -> None:
        """Close a sync generator: after its step still running (if any), in the pool (its
        ``finally`` may block), in the context its steps ran in."""
        if step is not None and not step.cancel() and not step.done():
            with contextlib.suppress(Exception):  # the step's own error is not ours to raise now
                await asyncio.wrap_future(step)
        try:
            closing = self._pool.submit(context.run, generator.close)
        except RuntimeError:  # the pool was shut down: close it here
            closing = None
        try:
            if closing is None:
                context.run(generator.close)
            else:
                await asyncio.wrap_future(closing)
        except Exception:  # noqa: BLE001 - a finally that raises: the stream ended anyway
            logger.exception("closing the inference callable's generator failed")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


async def _close_async(generator) -> None:
    try:
        await generator.aclose()
    except Exception:  # noqa: BLE001 - as for a sync generator's close
        logger.exception("closing the inference callable's async generator failed")


async def _uninterrupted(cleanup: Coroutine) -> None:
    """Run ``cleanup`` to its end even if the task awaiting it is cancelled meanwhile (then
    raise CancelledError after it): a generator left half-closed would never run its ``finally``."""
    task = asyncio.ensure_future(cleanup)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    task.result()


def _is_coroutine_function(func: Callable) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


def _is_async(func: Callable) -> bool:
    """A coroutine or async generator function: calling it starts nothing, so the loop may call it."""
    call = getattr(func, "__call__", None)
    return _is_coroutine_function(func) or inspect.isasyncgenfunction(func) or inspect.isasyncgenfunction(call)

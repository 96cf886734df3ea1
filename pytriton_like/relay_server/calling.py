"""Turn a user's inference callable into the shapes the workers call.

- :class:`BatchCall` — ``requests -> responses``, for non-decoupled models (one answer per batch).
- :class:`ResponseStream` — ``requests -> async iterator of responses``, for decoupled models:
  plain functions, coroutines, generators and async generators all become one async generator.
"""

import asyncio
import concurrent.futures
import inspect
from typing import AsyncIterator, Callable, List, Optional

from ..proxy.types import Request
from .hints import call_hint

__all__ = ["BatchCall", "ResponseStream"]

_DONE = object()


class BatchCall:
    """``requests -> responses`` for any inference callable; :meth:`close` when done.

    A coroutine function runs on an event loop of its own, driven by the thread that calls.
    """

    def __init__(self, infer_func: Callable):
        self._func = infer_func
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        if _is_coroutine_function(infer_func):
            self._loop = asyncio.new_event_loop()

    def __call__(self, requests: List[Request]):
        try:
            if self._loop is not None:
                return self._loop.run_until_complete(self._func(requests))
            return self._func(requests)
        except TypeError as exc:
            hint = call_hint(self._func, exc, requests)
            if hint is None:
                raise
            raise TypeError(f"{exc}; {hint}") from exc

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


class ResponseStream:
    """``requests -> async iterator of responses`` on the caller's event loop.

    Sync code (a plain function, each step of a generator) runs in a thread pool so that the
    event loop goes on serving other batches meanwhile.
    """

    def __init__(self, infer_func: Callable, max_threads: int = 32):
        self._func = infer_func
        self._async = _is_async(infer_func)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_threads, thread_name_prefix="pytriton_like-call")

    async def __call__(self, requests: List[Request]) -> AsyncIterator:
        loop = asyncio.get_running_loop()
        try:
            if self._async:
                result = self._func(requests)
            else:
                result = await loop.run_in_executor(self._pool, self._func, requests)
        except TypeError as exc:
            hint = call_hint(self._func, exc, requests)
            if hint is None:
                raise
            raise TypeError(f"{exc}; {hint}") from exc
        if inspect.isasyncgen(result):
            async for responses in result:
                yield responses
        elif inspect.isgenerator(result):
            while True:
                responses = await loop.run_in_executor(self._pool, next, result, _DONE)
                if responses is _DONE:
                    return
                yield responses
        elif inspect.isawaitable(result):
            yield await result
        else:
            yield result

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _is_coroutine_function(func: Callable) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


def _is_async(func: Callable) -> bool:
    """A coroutine or async generator function: calling it starts nothing, so the loop may call it."""
    call = getattr(func, "__call__", None)
    return _is_coroutine_function(func) or inspect.isasyncgenfunction(func) or inspect.isasyncgenfunction(call)

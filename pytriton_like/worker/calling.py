"""Turn a user's inference callable into the one internal shape the worker calls."""

import asyncio
import inspect
from typing import Callable, List, Optional

from ..proxy.types import Request

__all__ = ["BatchCall"]


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
        if self._loop is not None:
            return self._loop.run_until_complete(self._func(requests))
        return self._func(requests)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def _is_coroutine_function(func: Callable) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))

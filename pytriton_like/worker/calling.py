"""Turn a user's inference callable into the one internal shape the worker calls."""

import asyncio
import inspect
from typing import Callable, List

from ..proxy.types import Request

__all__ = ["make_call"]


def make_call(infer_func: Callable) -> Callable[[List[Request]], list]:
    """A plain function ``requests -> responses`` for ``infer_func``.

    A coroutine function runs on an event loop owned by the calling worker thread.
    """
    if inspect.iscoroutinefunction(infer_func) or inspect.iscoroutinefunction(getattr(infer_func, "__call__", None)):
        loop = asyncio.new_event_loop()

        def call_async(requests):
            return loop.run_until_complete(infer_func(requests))

        return call_async
    return infer_func

"""What to tell the author of an inference callable whose signature does not fit how it is called.

A callable bound as it is receives one argument, the list of requests. A function written for
its inputs (``def add_sub(a, b)``) fails with Python's bare ``missing 1 required positional
argument: 'b'``; the hint says to decorate it with ``@batch`` or ``@sample``. A decorated one
receives its inputs as keyword arguments named after them; the hint names the request's inputs.
"""

import functools
import inspect
import re
from typing import Any, Callable, List, Optional

from .._decorator_utils import unwrap_target

__all__ = ["signature_warning", "call_hint", "is_decorated"]

# Python's own messages when the arguments of a call do not fit the signature.
_ARGUMENTS_DO_NOT_FIT = re.compile(
    r"missing \d+ required (positional|keyword-only) argument"
    r"|takes (\d+|no) (positional )?arguments?"
    r"|positional arguments? but \d+ (was|were) given"
    r"|got an unexpected keyword argument"
    r"|got multiple values for argument"
)
_MAX_DEPTH = 100
_DECORATE = (
    "an inference callable is called with one argument, the list of requests (each a dict of input"
    " arrays); to receive the inputs as keyword arguments instead, decorate it with @batch (whole batches,"
    " batch axis first) or @sample (one request at a time) from pytriton_like.decorators"
)


def signature_warning(infer_func: Callable) -> Optional[str]:
    """Why a callable bound without decorators cannot take the list of requests; ``None`` if it can
    (or cannot be told: decorated, or without a signature)."""
    if is_decorated(infer_func):
        return None  # a decorator's wrapper takes the requests; what it calls is its business
    try:
        signature = inspect.signature(infer_func)
    except (TypeError, ValueError):  # no signature to read (some builtins)
        return None
    try:
        signature.bind([])
    except TypeError as exc:
        name = getattr(infer_func, "__qualname__", type(infer_func).__name__)
        return f"{name}{signature} cannot take the list of requests ({exc}); {_DECORATE}"
    return None


def call_hint(infer_func: Callable, error: TypeError, requests: List[Any]) -> Optional[str]:
    """What to do about ``error``, raised by calling ``infer_func`` with ``requests``; ``None`` unless
    the arguments of the call did not fit the callable's signature (an error inside the callable
    is its own business)."""
    if not _ARGUMENTS_DO_NOT_FIT.search(str(error)) or _raised_inside(infer_func, error):
        return None
    if not is_decorated(infer_func):
        return _DECORATE
    names = ", ".join(map(str, requests[0])) if requests else "none"
    hint = f"@batch and @sample pass each input as a keyword argument named after it; this request's inputs: {names}"
    if "missing" in str(error):
        hint += (
            " (an optional input a request leaves out is not passed: give its parameter a default"
            " or use @fill_optionals)"
        )
    return hint


def is_decorated(infer_func: Callable) -> bool:
    """Whether a decorator (``@batch``, ``@sample``... anything with ``__wrapped__``) stands
    between the caller and the function: on the callable itself, on the function of a
    ``functools.partial`` or a bound method, or on the ``__call__`` of an object."""
    obj: Any = infer_func
    for _ in range(_MAX_DEPTH):
        if getattr(obj, "__wrapped__", None) is not None:
            return True
        if isinstance(obj, functools.partial):
            obj = obj.func
        elif inspect.ismethod(obj):
            obj = obj.__func__
        elif callable(obj) and not inspect.isroutine(obj) and not isinstance(obj, type):
            obj = type(obj).__call__
        else:
            return False
    return False


def _raised_inside(infer_func: Callable, error: BaseException) -> bool:
    """Whether ``error`` came from inside the callable's own code, not from calling it."""
    target, _ = unwrap_target(infer_func)
    code = getattr(target, "__code__", None)
    if code is None:
        return False
    traceback = error.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code is code:
            return True
        traceback = traceback.tb_next
    return False

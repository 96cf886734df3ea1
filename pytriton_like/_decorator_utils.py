"""Machinery behind :mod:`pytriton_like.decorators` (private; no public API here).

Three pieces:

* **Where a callable's Triton context lives.** ``attach_triton_context`` registers the context
  under the *innermost* callable of a decorator stack (followed through ``__wrapped__``, bound
  methods and ``functools.partial``) and the instance it is bound to. A decorator anywhere in
  the stack resolves the same pair from the ``wrapped``/``instance`` wrapt hands it, so every
  layer finds the context without knowing which layer is outermost.
* **One decorator body for sync and async callables.** A decorator's logic is a generator of
  calls (*steps*): it yields ``(args, kwargs)`` for each call of the wrapped callable and receives
  the result. :func:`drive` runs the steps, and when the callable turns out to be async it
  continues them in a coroutine, so the decorated callable stays awaitable.
* **Numpy helpers**: batch sizes; the per-row work (grouping, merging, padding) is in :mod:`._decorator_rows`.
"""

import copy
import functools
import inspect
import threading
import types
from collections.abc import Mapping
from typing import Any, Callable, Dict, Generator, List, Optional, Tuple, Union

import numpy as np

from .exceptions import PyTritonValidationError
from .proxy.types import Request

__all__: List[str] = []

TRITON_CONTEXT_FIELD = "triton_context"
"""Keyword under which ``@triton_context`` passes the context; never treated as a model input."""
TRITON_CONTEXT_ATTRIBUTE = "__triton_context__"
"""Attribute of a callable (or its instance) that holds its context, as PyTriton sets it."""
SPECIAL_KEYS = frozenset({TRITON_CONTEXT_FIELD, TRITON_CONTEXT_ATTRIBUTE})

# PyTriton's names of what the decorators pass around (pytriton_like.decorators exports them)
InputNames = List[str]
"""Names of a model's inputs (PyTriton's type name)."""
InferenceRequest = Dict[str, np.ndarray]
"""One request as the decorators see it: input names to arrays (PyTriton's type name)."""
InferenceRequests = Union[List[InferenceRequest], Tuple[InferenceRequest, ...]]
"""The requests of one call of an inference callable (PyTriton's type name)."""
InferenceResult = Dict[str, np.ndarray]
"""One response: output names to arrays (PyTriton's type name)."""
InferenceResults = Union[List[InferenceResult], Tuple[InferenceResult, ...]]
"""The responses of one call, one per request, in the requests' order (PyTriton's type name)."""

Call = Tuple[tuple, Dict[str, Any]]
Steps = Generator[Call, Any, Any]

_MAX_UNWRAP_DEPTH = 100


# --------------------------------------------------------------------------- context registry


def unwrap_target(obj: Any, instance: Any = None) -> Tuple[Any, Any]:
    """Returns ``(innermost callable, bound instance)`` of a possibly decorated, possibly bound callable."""
    for _ in range(_MAX_UNWRAP_DEPTH):
        if isinstance(obj, functools.partial):
            obj = obj.func
        elif inspect.ismethod(obj):  # also true for wrapt's bound wrappers: they proxy __class__
            if instance is None:
                instance = obj.__self__
            obj = obj.__func__
        elif getattr(obj, "__wrapped__", None) is not None:
            obj = obj.__wrapped__
        else:
            break
    if instance is None and callable(obj) and not inspect.isroutine(obj) and not isinstance(obj, type):
        # An instance of a class with __call__: its (maybe decorated) __call__ is the stack.
        return unwrap_target(type(obj).__call__, obj)
    return obj, instance


class ContextRegistry:
    """Contexts attached to callables, keyed by (innermost function, bound instance).

    Holds strong references: a bound model lives as long as the process serves it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # id(function) -> (function, {id(instance): (instance, context)})
        self._by_function: Dict[int, Tuple[Any, Dict[int, Tuple[Any, Any]]]] = {}

    def attach(self, infer_func: Callable, context: Any) -> None:
        function, instance = unwrap_target(infer_func)
        with self._lock:
            _, bindings = self._by_function.setdefault(id(function), (function, {}))
            bindings[id(instance)] = (instance, context)

    def find(self, wrapped: Callable, instance: Any = None) -> Optional[Any]:
        function, instance = unwrap_target(wrapped, instance)
        entry = self._by_function.get(id(function))
        if entry is None:
            return None
        bindings = entry[1]
        found = bindings.get(id(instance))
        if found is None and instance is None and len(bindings) == 1:
            # A wrapper without __wrapped__ dropped the instance on the way: the only binding is the one meant.
            found = next(iter(bindings.values()))
        return None if found is None else found[1]


# --------------------------------------------------------------------------- sync/async driver


class _Done:
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


def _advance(steps: Steps, sent: Any = None, first: bool = False) -> Any:
    try:
        return next(steps) if first else steps.send(sent)
    except StopIteration as stop:
        return _Done(stop.value)


def is_coroutine_callable(obj: Any) -> bool:
    """Whether calling ``obj`` returns a coroutine (async functions, methods, ``async def __call__``)."""
    if type(obj) is types.FunctionType:  # the common case, checked once per call: keep it cheap
        return bool(obj.__code__.co_flags & inspect.CO_COROUTINE)
    while isinstance(obj, functools.partial):
        obj = obj.func
    if inspect.iscoroutinefunction(obj):
        return True
    if callable(obj) and not inspect.isroutine(obj) and not isinstance(obj, type):
        return inspect.iscoroutinefunction(getattr(obj, "__call__", None))
    return False


def drive(wrapped: Callable, steps: Steps) -> Any:
    """Runs ``steps`` calling ``wrapped``; returns the steps' value, or a coroutine of it for async callables."""
    if is_coroutine_callable(wrapped):
        return _drive_async(wrapped, steps)
    step = _advance(steps, first=True)
    while not isinstance(step, _Done):
        args, kwargs = step
        result = wrapped(*args, **kwargs)
        if inspect.isawaitable(result):  # async without saying so (e.g. returns a coroutine)
            return _drive_async(wrapped, steps, result)
        step = _advance(steps, result)
    return step.value


async def _drive_async(wrapped: Callable, steps: Steps, awaiting: Any = None) -> Any:
    step = _advance(steps, first=True) if awaiting is None else _advance(steps, await awaiting)
    while not isinstance(step, _Done):
        args, kwargs = step
        result = wrapped(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        step = _advance(steps, result)
    return step.value


def map_result(result: Any, function: Callable[[Any], Any]) -> Any:
    """Applies ``function`` to a result, or to each item a (sync or async) generator result yields."""
    if inspect.isgenerator(result):
        return (function(item) for item in result)
    if inspect.isasyncgen(result):
        return _amap(function, result)
    return function(result)


async def _amap(function: Callable[[Any], Any], items: Any) -> Any:
    async for item in items:
        yield function(item)


# --------------------------------------------------------------------------- requests and arrays


def is_request_list(value: Any) -> bool:
    """Whether ``value`` looks like the list of requests an inference callable receives."""
    return isinstance(value, (list, tuple)) and all(type(item) is Request or isinstance(item, Mapping) for item in value)


def requests_arg(args: tuple, decorator: str) -> Tuple[List[Mapping], tuple]:
    """Splits ``(requests, *rest)``; raises when the first positional argument is not a list of requests."""
    if not args or not is_request_list(args[0]):
        got = "no positional argument" if not args else f"{type(args[0]).__name__}"
        raise PyTritonValidationError(
            f"@{decorator} expects the list of requests as its first positional argument, got {got}; "
            f"is it placed below a decorator that already turned requests into arrays (@batch, @sample)?"
        )
    return list(args[0]), args[1:]


def with_data(request: Mapping, data: Dict[str, Any]) -> Mapping:
    """A copy of ``request`` holding ``data`` (a ``Request`` keeps its parameters, requested outputs,
    sequence, span and traces: ``traced_span`` opens a child of its span, and nested calls made in it
    continue Triton's trace of it)."""
    if isinstance(request, Request):
        duplicate = copy.copy(request)  # every attribute, those set outside __init__ too
        duplicate.data = data
        return duplicate
    return dict(data)


def dict_of(request: Mapping) -> Mapping:
    """The plain dict behind a ``Request`` (faster to compare and iterate), or the mapping itself."""
    return request.data if isinstance(request, Request) else request


def input_kwargs(kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """The keyword arguments that are model inputs (not ``triton_context``)."""
    return {name: value for name, value in kwargs.items() if name not in SPECIAL_KEYS}


def leading_dim(value: Any, what: str) -> int:
    """The size of axis 0 of ``value``; raises naming ``what`` when it has no axis."""
    shape = np.shape(value)
    if not shape:
        raise PyTritonValidationError(f"{what} has no batch axis: got a 0-d value {short_repr(value)}")
    return shape[0]


def common_batch_size(arrays: Mapping[str, Any], where: str, index: Optional[int] = None) -> int:
    """The batch size shared by all ``arrays``; raises when they disagree or there are none.

    ``where`` (with ``index`` after it, if given) names them in the error.
    """
    try:  # fast path: arrays that agree
        found = {value.shape[0] for value in arrays.values()}
        if len(found) == 1:
            return found.pop()
    except (AttributeError, IndexError):
        pass
    if index is not None:
        where = f"{where} {index}"
    if not arrays:
        raise PyTritonValidationError(f"{where} has no inputs, so its batch size is unknown")
    sizes = {name: leading_dim(value, f"{where}: input {name!r}") for name, value in arrays.items()}
    if len(set(sizes.values())) > 1:
        raise PyTritonValidationError(f"{where}: inputs disagree on the batch size (axis 0): {sizes}")
    return next(iter(sizes.values()))


def short_repr(value: Any, limit: int = 200) -> str:
    """``repr`` on one line, cut to ``limit`` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_responses(result: Any, count: int, decorator: str) -> None:
    """Raises unless ``result`` is a list/tuple of ``count`` responses."""
    if not isinstance(result, (list, tuple)) or len(result) != count:
        got = f"{len(result)} responses" if isinstance(result, (list, tuple)) else f"a {type(result).__name__}"
        raise PyTritonValidationError(
            f"@{decorator}: the wrapped callable must return a list with one response per request "
            f"({count}), got {got}"
        )

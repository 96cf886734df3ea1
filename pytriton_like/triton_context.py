"""``TritonContext``: what a bound callable knows of its model, and how it calls other models.

PyTriton's import path is ``pytriton.decorators.TritonContext``: :mod:`pytriton_like.decorators`
re-exports everything here. The server attaches a context to each bound callable; a callable
decorated with ``@triton_context`` receives it, and custom decorators find it with
:func:`get_triton_context`.
"""

# The clients a context hands out come from a ModelCalls the server passes in (models/), so this
# module imports nothing above the client layer.

import dataclasses
import inspect
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple, Union

import numpy as np

from ._decorator_utils import TRITON_CONTEXT_ATTRIBUTE, ContextRegistry, leading_dim, short_repr
from .exceptions import PyTritonInvalidOperationError, PyTritonValidationError
from .model_config.triton_model_config import TritonModelConfig

if TYPE_CHECKING:  # the serving side hands clients in; this module does not need the client package
    from .client import AsyncioModelClient, ModelClient

__all__ = [
    "ModelCalls",
    "ModelConfigDict",
    "TritonContext",
    "attach_triton_context",
    "convert_output",
    "get_inference_request_batch_size",
    "get_model_config",
    "get_triton_context",
]


class ModelCalls(Protocol):
    """What a server hands a :class:`TritonContext` to call its models with (``TritonContext.loopback``).

    The serving side implements it; a test may pass a stand-in to ``TritonContext(loopback=...)``.
    """

    def client(
        self, caller: str, model_name: str, model_version: Union[int, str, None], inference_timeout_s: Optional[float]
    ) -> "ModelClient":
        """A ``ModelClient`` of ``model_name`` for the callable of model ``caller``; kept for later calls.

        Args:
            caller: the name of the model whose callable asks (named in timeout messages).
            model_name: the model to call.
            model_version: its version; ``None`` for the latest.
            inference_timeout_s: how long one call may take; ``None``: the server's default.
        """

    def async_client(
        self, caller: str, model_name: str, model_version: Union[int, str, None], inference_timeout_s: Optional[float]
    ) -> "AsyncioModelClient":
        """As :meth:`client`, an ``AsyncioModelClient`` of the running event loop."""


class ModelConfigDict(MutableMapping):
    """Model configs by inference callable, as PyTriton's ``TritonContext.model_configs`` holds them.

    A callable is keyed by ``str(callable)``: a function and the decorators wrapping it (which
    show the function's name) share one entry, and an object's ``__call__`` is keyed by the object.
    """

    def __init__(self):
        self._data: Dict[str, TritonModelConfig] = {}
        self._keys: Dict[str, Callable] = {}

    def __getitem__(self, infer_callable: Callable) -> TritonModelConfig:
        return self._data[self._get_model_config_key(infer_callable)]

    def __setitem__(self, infer_callable: Callable, item: TritonModelConfig) -> None:
        key = self._get_model_config_key(infer_callable)
        self._keys[key] = infer_callable
        self._data[key] = item

    def __delitem__(self, infer_callable: Callable) -> None:
        key = self._get_model_config_key(infer_callable)
        del self._data[key]
        del self._keys[key]

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self):
        return iter(list(self._keys.values()))

    @staticmethod
    def _get_model_config_key(infer_callable: Callable) -> str:
        if inspect.ismethod(infer_callable) and infer_callable.__name__ == "__call__":
            infer_callable = infer_callable.__self__
        return str(infer_callable)


@dataclasses.dataclass
class TritonContext:
    """What Triton tells a bound callable about the model it serves, and how to call other models.

    Built as PyTriton builds it (``TritonContext()``, then ``model_configs[infer_func] = config``)
    or with ``model_config=``; the server fills both for each bound callable.

    Attributes:
        model_configs: the model config of each bound callable (PyTriton's attribute).
        model_config: the resolved configuration of the model (inputs, outputs, batching...);
            without it, the only entry of ``model_configs``.
        loopback: the server's clients for nested calls, calls of its models (set by the server;
            ``None`` outside one).
    """

    model_configs: ModelConfigDict = dataclasses.field(default_factory=ModelConfigDict)
    model_config: Optional[TritonModelConfig] = None
    loopback: Optional[ModelCalls] = dataclasses.field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.model_config is None and len(self.model_configs) == 1:
            self.model_config = next(iter(self.model_configs.values()))

    def config_of(self, infer_callable: Optional[Callable] = None) -> Optional[TritonModelConfig]:
        """The config of ``infer_callable`` in ``model_configs``, else ``model_config`` (or the only entry).

        Args:
            infer_callable: the callable (or a decorator of its stack) whose config to find.

        Returns:
            The model config, or ``None`` when the context holds none that fits.
        """
        if infer_callable is not None and self.model_configs:
            try:
                return self.model_configs[infer_callable]
            except KeyError:
                pass
        if self.model_config is not None:
            return self.model_config
        if len(self.model_configs) == 1:
            return next(iter(self.model_configs.values()))
        return None

    def client(
        self, model_name: str, model_version: Union[int, str, None] = None, *, inference_timeout_s: Optional[float] = None
    ) -> "ModelClient":
        """A ``ModelClient`` of another model (or this one) of the server this callable runs in.

        The server makes it at first use, keeps it for later calls (asking again is cheap), and
        closes it at stop: do not close it yourself. Its calls are *nested calls*: they go through
        the relay into tritonserver, which runs them in Triton's core, tensors in shared memory
        (docs/pipelines.md). For a decoupled model, ``infer_batch`` and ``infer_sample`` return the
        iterator of its responses. A call that gets no answer within ``inference_timeout_s`` is
        withdrawn and fails with ``PyTritonClientTimeoutError`` saying that a cycle of calls may
        hold every instance: a callable must never wait for a model whose instances may all be
        waiting for it.

        Args:
            model_name: the model to call.
            model_version: its version; ``None`` for the latest.
            inference_timeout_s: how long one call may take (default 30 s); also bounds the
                wait for the model to be ready.

        Raises:
            PyTritonInvalidOperationError: no server (a context made by hand), the server is
                stopping, or called while this thread runs an event loop (an ``async def``
                callable must use :meth:`async_client`, which does not block the loop).

        Example:
            >>> @batch                                                      # doctest: +SKIP
            ... @triton_context
            ... def route(triton_context, x):
            ...     return triton_context.client("Small").infer_batch(x=x)
        """
        loopback = self._loopback()
        return loopback.client(self.model_config.model_name, model_name, model_version, inference_timeout_s)

    def async_client(
        self, model_name: str, model_version: Union[int, str, None] = None, *, inference_timeout_s: Optional[float] = None
    ) -> "AsyncioModelClient":
        """An ``AsyncioModelClient`` of another model of this server, for ``async def`` callables.

        As :meth:`client`, but its calls are awaited and never block the event loop (for a
        decoupled model, awaiting ``infer_batch`` gives an async iterator of its responses). It
        belongs to the running event loop (one per model instance), so the server keeps one per loop.

        Args:
            model_name: the model to call.
            model_version: its version; ``None`` for the latest.
            inference_timeout_s: how long one call may take (default 30 s); also bounds the
                wait for the model to be ready.

        Raises:
            PyTritonInvalidOperationError: no server, the server is stopping, or no running event loop.

        Example:
            >>> @batch                                                      # doctest: +SKIP
            ... @triton_context
            ... async def route(triton_context, x):
            ...     return await triton_context.async_client("Small").infer_batch(x=x)
        """
        loopback = self._loopback()
        return loopback.async_client(self.model_config.model_name, model_name, model_version, inference_timeout_s)

    def _loopback(self) -> ModelCalls:
        if self.loopback is None:
            model = f"model {self.model_config.model_name!r}: " if self.model_config is not None else ""
            raise PyTritonInvalidOperationError(
                f"{model}this TritonContext belongs to no running server,"
                " so it cannot call models; bind the callable and run the server"
            )
        return self.loopback


_CONTEXTS = ContextRegistry()


def attach_triton_context(infer_func: Callable, context: TritonContext) -> None:
    """Attaches ``context`` to a callable and every decorator in its stack.

    The serving side calls this once per bound callable, before the first call. Outside a server
    (in tests) call it yourself. The context is keyed by the innermost function of the stack
    (reached through ``__wrapped__``, so wrappers made with ``functools.wraps`` are fine) and the
    instance a method is bound to; binding one function object twice attaches the last context.

    Args:
        infer_func: the callable as bound: a function, a bound method, or an object with ``__call__``.
        context: the context to attach.

    Raises:
        PyTritonValidationError: ``infer_func`` is not callable or ``context`` not a ``TritonContext``.

    Example:
        >>> attach_triton_context(infer_fn, TritonContext(model_config=config))  # doctest: +SKIP
    """
    if not callable(infer_func):
        raise PyTritonValidationError(f"attach_triton_context expects a callable, got {short_repr(infer_func)}")
    if not isinstance(context, TritonContext):
        raise PyTritonValidationError(f"attach_triton_context expects a TritonContext, got {type(context).__name__}")
    _CONTEXTS.attach(infer_func, context)


def get_triton_context(wrapped: Callable, instance: Any = None) -> TritonContext:
    """Returns the context attached to the stack ``wrapped`` belongs to.

    For custom decorators: pass the ``wrapped`` and ``instance`` your wrapt wrapper receives.

    Args:
        wrapped: the callable (or a decorator of its stack) whose context to find.
        instance: the object ``wrapped`` is a method of, if any.

    Raises:
        PyTritonValidationError: no context is attached (the callable was never bound).
    """
    context = find_context(wrapped, instance)
    if context is None:
        name = getattr(wrapped, "__qualname__", None) or short_repr(wrapped)
        raise PyTritonValidationError(
            "Wrapped function or object must bound with triton to get  __triton_context__."
            f" No Triton context is attached to {name}: bind it to Triton first, or outside a server call "
            f"attach_triton_context(infer_func, TritonContext(model_config=...)) on the outermost callable"
        )
    return context


def get_model_config(wrapped: Callable, instance: Any = None) -> TritonModelConfig:
    """Returns the model config attached to the stack ``wrapped`` belongs to (see :func:`get_triton_context`).

    Args:
        wrapped: the callable (or a decorator of its stack) whose model config to find.
        instance: the object ``wrapped`` is a method of, if any.

    Raises:
        PyTritonValidationError: no context is attached, or it holds no config for ``wrapped``.
    """
    context = get_triton_context(wrapped, instance)
    config = context.config_of(wrapped) if isinstance(context, TritonContext) else None
    if config is None:
        raise PyTritonValidationError(
            f"The Triton context of {getattr(wrapped, '__qualname__', None) or short_repr(wrapped)} has no model"
            " config for it: set context.model_configs[infer_func] = config"
        )
    return config


def find_context(wrapped: Callable, instance: Any) -> Optional[TritonContext]:
    """The context attached by attach_triton_context, else a ``__triton_context__`` attribute (PyTriton's way)."""
    context = _CONTEXTS.find(wrapped, instance)
    if context is not None:
        return context
    for owner in (instance, wrapped):
        while owner is not None:
            found = getattr(owner, TRITON_CONTEXT_ATTRIBUTE, None) if not isinstance(owner, type) else None
            if found is not None:
                return found
            owner = getattr(owner, "__wrapped__", None)
    return None


def find_model_config(wrapped: Callable, instance: Any) -> Optional[TritonModelConfig]:
    context = find_context(wrapped, instance)
    return context.config_of(wrapped) if isinstance(context, TritonContext) else None


def convert_output(
    outputs: Union[Dict, List, Tuple],
    wrapped: Optional[Callable] = None,
    instance: Any = None,
    model_config: Optional[TritonModelConfig] = None,
) -> Dict[str, Any]:
    """Turns a callable's outputs into a dict of outputs.

    A dict is returned as is; a list or tuple is matched, in order, with the model's outputs
    (from ``model_config``, else from the context attached to ``wrapped``).

    Args:
        outputs: what the callable returned.
        wrapped: the callable, to find its model config when ``model_config`` is not given.
        instance: the object ``wrapped`` is a method of, if any.
        model_config: the model config whose outputs name a list's items.

    Raises:
        PyTritonValidationError: a list of the wrong length, or a type that is neither.
    """
    if isinstance(outputs, dict):
        return outputs
    if isinstance(outputs, (list, tuple)):
        if model_config is None:
            model_config = get_model_config(wrapped, instance)
        names = [spec.name for spec in model_config.outputs]
        if len(outputs) != len(names):
            raise PyTritonValidationError(
                f"The callable returned {len(outputs)} outputs, but model {model_config.model_name!r} "
                f"declares {len(names)}: {names}"
            )
        return dict(zip(names, outputs))
    raise PyTritonValidationError(
        f"Unsupported output type {type(outputs).__name__}: return a dict of output name to array, "
        f"or a list/tuple in the order of the model's outputs"
    )


def get_inference_request_batch_size(inference_request: Mapping[str, np.ndarray]) -> int:
    """Returns the batch size of a request: axis 0 of its first input.

    Args:
        inference_request: input names to arrays (a :class:`~pytriton_like.proxy.types.Request` or a dict).

    Raises:
        PyTritonValidationError: the request has no inputs or its first input no axis.
    """
    if not inference_request:
        raise PyTritonValidationError("The request has no inputs, so its batch size is unknown")
    name, value = next(iter(inference_request.items()))
    return leading_dim(value, f"input {name!r}")

"""Decorators that adapt simple functions to the inference-callable contract.

A callable bound to Triton is called with a list of requests (one :class:`~pytriton_like.proxy.types.Request`
per client request in the batch Triton formed) and returns a list of responses, one dict of output
arrays per request. These decorators, named and behaving as PyTriton's ``pytriton.decorators``, let
you write something simpler and adapt it. A usual stack, outermost first::

    @fill_optionals(temperature=np.array([0.7], dtype=np.float32))  # list of requests in, must be outermost
    @group_by_keys                   # calls once per set of input names
    @batch                           # list of requests -> one keyword array per input
    @group_by_values("temperature")  # sub-batches with equal temperature (also works above @batch)
    @first_value("temperature")      # the batch of temperatures -> one scalar
    @triton_context                  # adds triton_context=TritonContext(model_config=...)
    def infer(triton_context, prompt, temperature): ...

Every decorator works on functions and methods (through ``wrapt``); ``batch``, ``sample``,
``group_by_keys``, ``group_by_values`` and ``pad_batch`` also keep an ``async def`` callable
awaitable, and the others pass its coroutine through. See ``docs/decorators.md``.

The serving side calls :func:`attach_triton_context` on the callable it binds before the first
call; ``@triton_context``, ``@fill_optionals``, ``@first_value`` and ``@pad_batch`` find that
context from wherever they sit in the stack.
"""

import functools
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np
import wrapt

from ._decorator_rows import (
    batch_steps,
    check_defaults,
    common_dtype,
    fill_request,
    first_row,
    group_by_keys_steps,
    pad_steps,
    padded_batch_size,
    repeat_last_row,
    sample_steps,
    values_kwargs_steps,
)
from ._decorator_utils import (  # the Inference*/InputNames types: PyTriton's names, exported here
    InferenceRequest, InferenceRequests, InferenceResult, InferenceResults, InputNames,
    SPECIAL_KEYS,
    TRITON_CONTEXT_FIELD,
    common_batch_size,
    drive,
    input_kwargs,
    is_request_list,
    requests_arg,
    short_repr,
    with_data,
)
from .constants import TRITON_CONTEXT_FIELD_NAME
from .exceptions import (
    PyTritonBadParameterError,
    PyTritonRuntimeError,
    PyTritonValidationError,
)
from .model_config.triton_model_config import TritonModelConfig

from .triton_context import (  # PyTriton's path of TritonContext is this module
    ModelConfigDict,
    TritonContext,
    attach_triton_context,
    convert_output,
    find_model_config,
    get_inference_request_batch_size,
    get_model_config,
    get_triton_context,
)

__all__ = [
    "ConstantPadder",
    "InferenceRequest",
    "InferenceRequests",
    "InferenceResult",
    "InferenceResults",
    "InputNames",
    "ModelConfigDict",
    "TRITON_CONTEXT_FIELD_NAME",
    "TritonContext",
    "attach_triton_context",
    "batch",
    "convert_output",
    "fill_optionals",
    "first_value",
    "get_inference_request_batch_size",
    "get_model_config",
    "get_triton_context",
    "group_by_keys",
    "group_by_values",
    "pad_batch",
    "sample",
    "triton_context",
]


@wrapt.decorator
def batch(wrapped, instance, args, kwargs):
    """Calls the function once per batch with each input concatenated along axis 0 as a keyword array.

    Outputs (a dict, or a list/tuple in the model's output order) must have the batch's total size
    on axis 0; they are split back into one response per request by the requests' batch sizes.
    A generator function (streaming) yields outputs that are split the same way.

    Raises:
        PyTritonValidationError: requests with different input names or incompatible shapes (naming
            the input), or outputs whose axis 0 is not the total batch size (naming the output).

    Example:
        >>> @batch
        ... def infer(a, b):
        ...     return {"sum": a + b}
    """
    requests, rest = requests_arg(args, "batch")
    convert = functools.partial(convert_output, wrapped=wrapped, instance=instance)
    return drive(wrapped, batch_steps(requests, rest, kwargs, convert))


@wrapt.decorator
def sample(wrapped, instance, args, kwargs):
    """Calls the function once per request with the request's inputs as keyword arrays, as they came.

    Meant for models without batching. PyTriton's ``@sample`` serves only the first request of the
    list; this one serves each request in turn and returns their responses in order. A generator
    function (streaming) serves one request per call.

    Example:
        >>> @sample
        ... def infer(sequence):
        ...     return {"length": np.array([len(sequence)])}
    """
    requests, rest = requests_arg(args, "sample")
    convert = functools.partial(convert_output, wrapped=wrapped, instance=instance)
    return drive(wrapped, sample_steps(requests, rest, kwargs, convert))


# --------------------------------------------------------------------------- grouping


@wrapt.decorator
def group_by_keys(wrapped, instance, args, kwargs):
    """Calls the function once per group of requests with the same set of input names.

    Responses come back in the requests' order. Use it above ``@batch`` when some inputs are optional.

    Example:
        >>> @group_by_keys
        ... @batch
        ... def infer(mandatory_input, optional_input=None):
        ...     ...
    """
    requests, rest = requests_arg(args, "group_by_keys")
    return drive(wrapped, group_by_keys_steps(requests, rest, kwargs))


def group_by_values(*keys: str, pad_fn: Optional[Callable[[InferenceResults], InferenceResults]] = None):
    """Splits a batch into sub-batches whose rows have equal values of ``keys``; calls once per sub-batch.

    Rows (axis-0 items) are compared by content. It goes below ``@batch``, as in PyTriton: it
    takes the batched keyword arrays and merges the sub-batches' outputs back into the
    original row order.

    Args:
        *keys: names of the inputs to group by; an input missing from the call is a value of its own.
        pad_fn: called with the list of the sub-batches' outputs (dicts of arrays) before they are
            merged, to make their shapes agree, e.g. :class:`ConstantPadder`.

    Raises:
        PyTritonBadParameterError: a key is not a string or ``pad_fn`` not callable.
        PyTritonRuntimeError: at the call, it was placed above ``@batch`` (it got the list of requests).

    Example:
        >>> @batch
        ... @group_by_values("temperature", pad_fn=ConstantPadder(0))
        ... def infer(prompt, temperature):
        ...     ...
    """
    if not all(isinstance(key, str) for key in keys):
        raise PyTritonBadParameterError(f"@group_by_values takes input names, got {keys!r}")
    if pad_fn is not None and not callable(pad_fn):
        raise PyTritonBadParameterError(f"@group_by_values: pad_fn must be callable, got {short_repr(pad_fn)}")

    @wrapt.decorator
    def _group_by_values(wrapped, instance, args, kwargs):
        convert = functools.partial(convert_output, wrapped=wrapped, instance=instance)
        if args and is_request_list(args[0]):
            raise PyTritonRuntimeError(
                "The @group_by_values decorator must be used after the @batch decorator. "
                "Put it below @batch, where it gets the batched arrays, not the list of requests."
            )
        return drive(wrapped, values_kwargs_steps(keys, pad_fn, args, kwargs, convert))

    return _group_by_values


class ConstantPadder:
    """Pads arrays of the same name in several batches to one shape, so the batches can be concatenated.

    Axis 0 (the batch) is left alone; every other axis grows to the largest size among the batches,
    filled with ``pad_value`` (``b""``/``""`` for bytes, strings and objects). Byte/string arrays
    get the widest item size; other arrays of one name must share their dtype.

    Args:
        pad_value (int | float | bool | bytes | str): the value padded in (default 0).

    Example:
        >>> ConstantPadder(0)([{"y": np.ones((1, 2))}, {"y": np.ones((1, 3))}])[0]["y"]
        array([[1., 1., 0.]])
    """

    def __init__(self, pad_value=0):
        """Creates a padder filling with ``pad_value``."""
        self.pad_value = pad_value

    def __call__(self, batches_list: InferenceResults) -> InferenceResults:
        """Returns ``batches_list`` with each name's arrays padded to a common shape.

        Raises:
            PyTritonValidationError: arrays of one name differ in rank or in (non-string) dtype.
        """
        padded = [dict(batch) for batch in batches_list]
        names = list(dict.fromkeys(name for batch in batches_list for name in batch))
        for name in names:
            arrays = [(index, np.asarray(batch[name])) for index, batch in enumerate(batches_list) if name in batch]
            ranks = {array.ndim for _, array in arrays}
            if len(ranks) > 1 or 0 in ranks:
                raise PyTritonValidationError(
                    f"ConstantPadder: {name!r} arrays have shapes {[a.shape for _, a in arrays]}; "
                    f"they need one rank and a batch axis"
                )
            shape = tuple(int(max(sizes)) for sizes in zip(*(array.shape[1:] for _, array in arrays)))
            dtype = common_dtype(name, [array.dtype for _, array in arrays])
            fill = self.pad_value if dtype.kind not in "SUO" else ("" if dtype.kind == "U" else b"")
            for index, array in arrays:
                if array.shape[1:] == shape and array.dtype == dtype:
                    padded[index][name] = array
                    continue
                out = np.full((array.shape[0], *shape), fill, dtype=dtype)
                out[(slice(None), *(slice(0, size) for size in array.shape[1:]))] = array
                padded[index][name] = out
        return padded


# --------------------------------------------------------------------------- filling and reshaping inputs


def fill_optionals(**defaults: np.ndarray):
    """Fills inputs missing from a request with default values.

    Defaults are numpy arrays without the batch axis; for a batching model each is repeated to the
    request's batch size. Place it first (outermost): it takes the list of requests, and filling
    early lets ``@group_by_keys``/``@group_by_values`` form larger groups. When the model config is
    known (the callable is bound), the defaults are checked against the model's inputs once: the
    name must be an input, the dtype and shape (``-1`` matching any size) must agree.

    Args:
        **defaults: input name to default value.

    Raises:
        PyTritonBadParameterError: at the first call: a default is not a numpy array, or does not fit
            the model's inputs.
        PyTritonValidationError: the decorator is not given the list of requests (not outermost).

    Example:
        >>> @fill_optionals(temperature=np.array([0.7], dtype=np.float32))
        ... @batch
        ... def infer(prompt, temperature):
        ...     ...
    """
    not_arrays = [
        f"{name}={short_repr(value, 60)}" for name, value in defaults.items() if not isinstance(value, np.ndarray)
    ]
    checked: List[Optional[TritonModelConfig]] = [None]

    @wrapt.decorator
    def _fill_optionals(wrapped, instance, args, kwargs):
        if not_arrays:  # at the call, as PyTriton (a module defining such a callable still imports)
            raise PyTritonBadParameterError(
                f"Could not use {', '.join(not_arrays)} defaults as they are not NumPy arrays"
            )
        if not (args and is_request_list(args[0])):
            raise PyTritonValidationError(
                "@fill_optionals takes the list of requests: put it first (outermost) in the decorator stack"
            )
        config = find_model_config(wrapped, instance)
        if config is not None and checked[0] is not config:
            check_defaults(defaults, config)
            checked[0] = config
        batching = True if config is None else config.batching
        requests = [fill_request(request, defaults, batching) for request in args[0]]
        return wrapped(requests, *args[1:], **kwargs)

    return _fill_optionals


def first_value(*keys: str, squeeze_single_values: bool = True, strict: bool = True):
    """Replaces the batch of each of ``keys`` with its first row (e.g. one temperature for the batch).

    Works below ``@batch`` on keyword arrays, or on the list of requests (per request). Needs a
    batching model when the model config is known.

    Args:
        *keys: input names to replace; names absent from a call are left alone.
        squeeze_single_values: turn a first row of one element into a numpy scalar.
        strict: check that every row equals the first (raise otherwise).

    Raises:
        PyTritonBadParameterError: a key is not a string or is ``triton_context`` / ``__triton_context__``.
        PyTritonRuntimeError: rows differ in strict mode, or the model does not batch.
        PyTritonValidationError: an input has no batch axis or is empty.

    Example:
        >>> @batch
        ... @group_by_values("temperature")
        ... @first_value("temperature")
        ... def infer(prompt, temperature):  # temperature is a scalar
        ...     ...
    """
    if not all(isinstance(key, str) for key in keys):
        raise PyTritonBadParameterError(f"@first_value takes input names, got {keys!r}")
    reserved = sorted(SPECIAL_KEYS.intersection(keys))
    if reserved:
        raise PyTritonBadParameterError(
            f"The keys {', '.join(reserved)} are not allowed as keys for @first_value wrapper."
            " They are not model inputs."
        )

    def _replace(values: Mapping[str, Any]) -> Dict[str, Any]:
        replaced = dict(values)
        for key in keys:
            if key in replaced:
                replaced[key] = first_row(key, replaced[key], squeeze_single_values, strict)
        return replaced

    @wrapt.decorator
    def _first_value(wrapped, instance, args, kwargs):
        config = find_model_config(wrapped, instance)
        if config is not None and not config.batching:
            raise PyTritonRuntimeError(
                "The @first_value decorator can only be used with models that support batching."
                f" Model {config.model_name!r} has batching off."
            )
        if args and is_request_list(args[0]):
            requests = [with_data(request, _replace(request)) for request in args[0]]
            return wrapped(requests, *args[1:], **kwargs)
        return wrapped(*args, **_replace(kwargs))

    return _first_value


@wrapt.decorator
def pad_batch(wrapped, instance, args, kwargs):
    """Pads the batch to the nearest preferred batch size or ``max_batch_size`` by repeating its last row.

    The target is the smallest of the dynamic batcher's preferred batch sizes and the model's
    ``max_batch_size`` that holds the batch. It returns the callable's outputs for the padded
    batch, as PyTriton's; ``@batch`` above it keeps the first rows of the outputs of the padded
    size, one per real row, and splits those as usual. Place it below ``@batch``; it needs the
    model config (the callable must be bound or have a context attached).

    Raises:
        PyTritonValidationError: no context attached, a model without batching, or not below ``@batch``.

    Example:
        >>> @batch
        ... @pad_batch
        ... def infer(x):  # x always has a preferred or the maximum batch size
        ...     ...
    """
    if args and is_request_list(args[0]):
        raise PyTritonValidationError("@pad_batch works on batched keyword arrays: put it below @batch")
    config = get_model_config(wrapped, instance)
    if not config.batching:
        raise PyTritonValidationError(f"@pad_batch needs a model with batching; model {config.model_name!r} has none")
    inputs = input_kwargs(kwargs)
    size = common_batch_size(inputs, "@pad_batch")
    target = padded_batch_size(size, config)
    if target == size or size == 0:
        return wrapped(*args, **kwargs)
    padded = {name: repeat_last_row(value, target) for name, value in inputs.items()}
    return drive(wrapped, pad_steps(args, {**kwargs, **padded}, size, target, config))


@wrapt.decorator
def triton_context(wrapped, instance, args, kwargs):
    """Passes the attached :class:`TritonContext` as the keyword argument ``triton_context``.

    Example:
        >>> @triton_context
        ... def infer(requests, triton_context):
        ...     names = [spec.name for spec in triton_context.model_config.outputs]
        ...     ...
    """
    context = get_triton_context(wrapped, instance)
    return wrapped(*args, **{**kwargs, TRITON_CONTEXT_FIELD: context})

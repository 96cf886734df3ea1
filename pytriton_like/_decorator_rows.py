"""Row work behind :mod:`pytriton_like.decorators` (private; no public API here).

Per-row grouping keys, merging grouped outputs back into one batch, concatenating and splitting
requests, filling defaults and padding batches. The call machinery (steps, context registry) is
in :mod:`._decorator_utils`.
"""

import functools
import inspect
from collections.abc import Mapping
from typing import Any, Callable, Dict, Hashable, List, Sequence, Tuple

import numpy as np

from ._decorator_utils import (
    SPECIAL_KEYS,
    check_responses,
    common_batch_size,
    dict_of,
    input_kwargs,
    leading_dim,
    map_result,
    short_repr,
    with_data,
)
from .exceptions import PyTritonBadParameterError, PyTritonRuntimeError, PyTritonValidationError
from .model_config.triton_model_config import TritonModelConfig
from .triton_context import convert_output

__all__: List[str] = []


def _element_key(element: Any) -> Hashable:
    if isinstance(element, np.ndarray):
        return (element.dtype.str, element.shape, element.tobytes())
    try:
        hash(element)
    except TypeError:
        return repr(element)
    return element


def row_keys(value: Any) -> List[Hashable]:
    """One hashable key per row (axis-0 item) of ``value``, equal exactly when the rows' contents are equal."""
    array = np.asarray(value)
    count = array.shape[0]
    if count == 0:
        return []
    row_shape = array.shape[1:]
    if array.dtype.kind in "OSU":  # by content, so b"ab" as S2, S5 or object groups together
        rows = array.reshape(count, -1)  # a 1-D array's rows are its elements: made rows of one
        return [(row_shape, tuple(_element_key(item) for item in row)) for row in rows]
    flat = np.ascontiguousarray(array).reshape(count, -1)
    header = (array.dtype.str, row_shape)
    if count > 1 and np.array_equal(flat, np.broadcast_to(flat[:1], flat.shape)):
        key = (header, flat[0].tobytes())  # all rows equal: the common case, one vectorised test
        return [key] * count
    return [(header, row.tobytes()) for row in flat]


_MISSING = ("<missing>",)


def group_rows(arrays: Mapping[str, Any], keys: Sequence[str], size: int) -> Dict[Hashable, np.ndarray]:
    """Groups row indices ``0..size-1`` by the values of ``keys`` in ``arrays``.

    The groups come in the order of their values (as PyTriton calls them), or of their first
    appearance when the values do not compare (mixed types).
    """
    columns = [row_keys(arrays[key]) if key in arrays else [_MISSING] * size for key in keys]
    groups: Dict[Hashable, List[int]] = {}
    for row in range(size):
        groups.setdefault(tuple(column[row] for column in columns), []).append(row)

    def value_order(item):
        first = item[1][0]
        return tuple(np.asarray(np.asarray(arrays[key])[first]).ravel().tolist() if key in arrays else [] for key in keys)

    try:
        ordered = sorted(groups.items(), key=value_order)
    except TypeError:
        ordered = list(groups.items())
    return {key: np.asarray(rows, dtype=np.int64) for key, rows in ordered}


def merge_groups(results: Sequence[Mapping[str, Any]], indices: Sequence[np.ndarray], decorator: str) -> Dict[str, Any]:
    """Merges per-group outputs into one batch, putting row ``indices[g][j]`` back from ``results[g][name][j]``."""
    names = list(results[0])
    for result in results[1:]:
        if set(result) != set(names):
            raise PyTritonValidationError(
                f"@{decorator}: groups returned different outputs: {sorted(names)} and {sorted(result)}"
            )
    order = np.concatenate(indices)
    merged = {}
    for name in names:
        parts = [np.asarray(result[name]) for result in results]
        for part, rows in zip(parts, indices):
            if part.ndim == 0 or part.shape[0] != len(rows):
                raise PyTritonValidationError(
                    f"@{decorator}: output {name!r} of a group of {len(rows)} rows has shape {part.shape}; "
                    f"its axis 0 must be the group's batch size"
                )
        try:
            stacked = np.concatenate(parts)
        except ValueError as exc:
            raise PyTritonValidationError(
                f"@{decorator}: output {name!r} has shapes {[part.shape for part in parts]} in different groups, "
                f"which do not merge into one batch; pass pad_fn=ConstantPadder() to pad them"
            ) from exc
        out = np.empty_like(stacked)
        out[order] = stacked
        merged[name] = out
    return merged


# --------------------------------------------------------------------------- decorator bodies


def concatenate_requests(requests: Sequence[Mapping]) -> Tuple[Dict[str, np.ndarray], List[int]]:
    """@batch: the requests' inputs concatenated along axis 0, and each request's batch size."""
    first = dict_of(requests[0])
    sizes = []
    for index, request in enumerate(requests):
        data = dict_of(request)
        if index and data.keys() != first.keys():
            raise PyTritonValidationError(
                f"@batch needs every request in a batch to carry the same inputs: request 0 has {sorted(first)}, "
                f"request {index} has {sorted(data)}; put @group_by_keys (or @fill_optionals) above @batch"
            )
        sizes.append(common_batch_size(data, "@batch: request", index))
    if len(requests) == 1:
        return dict(first), sizes
    inputs = {}
    for name in first:
        parts = [np.asarray(dict_of(request)[name]) for request in requests]
        try:
            inputs[name] = np.concatenate(parts)
        except ValueError as exc:
            raise PyTritonValidationError(
                f"@batch cannot concatenate input {name!r} of {len(parts)} requests along the batch axis: "
                f"shapes {[part.shape for part in parts]} differ beyond axis 0"
            ) from exc
    return inputs, sizes


def split_outputs(result: Any, sizes: List[int], convert: Callable) -> List[Dict[str, Any]]:
    """@batch: one response per request, slicing axis 0 of the outputs by ``sizes``."""
    converted = convert(result)
    if isinstance(converted, PaddedOutputs):
        converted = converted.trimmed()
    outputs = {name: np.asarray(value) for name, value in converted.items()}
    total = sum(sizes)
    wrong = {name: value.shape for name, value in outputs.items() if value.shape[:1] != (total,)}
    if wrong:
        raise OutputBatchSizeError(
            "Received output tensors with different batch sizes: "
            f"{', '.join(f'{name}: {shape}' for name, shape in wrong.items())}. Expected batch size: {total}. "
            f"@batch: every output needs the batch size {total} (the sum of the requests' batch sizes "
            f"{sizes}) on axis 0, but {', '.join(f'{name!r} has shape {shape}' for name, shape in wrong.items())}"
        )
    if len(sizes) == 1:
        return [outputs]
    responses, start = [], 0
    for size in sizes:
        responses.append({name: value[start : start + size] for name, value in outputs.items()})
        start += size
    return responses


def values_kwargs_steps(keys, pad_fn, args, kwargs, convert):
    """@group_by_values below @batch: one call per sub-batch of rows with equal key values."""
    inputs = input_kwargs(kwargs)
    size = common_batch_size(inputs, "@group_by_values")
    groups = list(group_rows(inputs, keys, size).values())
    if len(groups) <= 1:
        return (yield args, kwargs)
    extras = {name: value for name, value in kwargs.items() if name in SPECIAL_KEYS}
    results = []
    for rows in groups:
        result = yield args, {**extras, **{name: value[rows] for name, value in inputs.items()}}
        results.append(convert(result))
    if pad_fn is not None:
        results = list(pad_fn(results))
    return merge_groups(results, groups, "group_by_values")


def common_dtype(name: str, dtypes: List[np.dtype]) -> np.dtype:
    """ConstantPadder: the dtype arrays of one name are padded into."""
    kinds = {dtype.kind for dtype in dtypes}
    if kinds in ({"S"}, {"U"}):
        return functools.reduce(np.promote_types, dtypes)
    if len(set(dtypes)) > 1:
        raise PyTritonValidationError(
            f"ConstantPadder: {name!r} arrays have different dtypes {sorted(map(str, set(dtypes)))}"
        )
    return dtypes[0]


def check_defaults(defaults: Dict[str, np.ndarray], config: TritonModelConfig) -> None:
    """@fill_optionals: raises unless every default fits an input of the model (PyTriton's wording first)."""
    specs = {spec.name: spec for spec in config.inputs}
    unknown = [name for name in defaults if name not in specs]
    if unknown:
        raise PyTritonBadParameterError(
            f"@fill_optionals defaults do not fit model {config.model_name!r}: {', '.join(map(repr, unknown))}"
            f" are not inputs (inputs: {sorted(specs)})"
        )
    dtypes, shapes = [], []
    for name, value in defaults.items():
        spec = specs[name]
        want = np.dtype(spec.dtype)
        fits = value.dtype.kind in "SUO" if want.kind in "SO" else value.dtype == want
        if not fits:
            dtypes.append(f"{name}: dtype={value.dtype} expected_dtype={want}")
        shape_fits = len(value.shape) == len(spec.shape) and all(w in (-1, h) for h, w in zip(value.shape, spec.shape))
        if not shape_fits:
            shapes.append(f"{name}: shape={value.shape} expected_shape={tuple(spec.shape)} (without the batch axis)")
    for problems, what in ((dtypes, "dtypes"), (shapes, "shapes")):
        if problems:
            raise PyTritonBadParameterError(
                f"Could not use {', '.join(problems)} defaults as they have different than input signature {what}"
                f" of model {config.model_name!r}"
            )


def fill_request(request: Mapping, defaults: Dict[str, np.ndarray], batching: bool) -> Mapping:
    """@fill_optionals: ``request`` with its missing inputs filled in (a copy; unchanged when none miss)."""
    missing = [name for name in defaults if name not in request]
    if not missing:
        return request
    data = dict(request.items())
    size = leading_dim(next(iter(request.values())), "@fill_optionals: an input") if request else 1
    for name in missing:
        value = defaults[name]
        data[name] = np.repeat(value[np.newaxis, ...], size, axis=0) if batching else value
    return with_data(request, data)


def first_row(name: str, values: Any, squeeze: bool, strict: bool) -> Any:
    """@first_value: the first row of ``values``, checked and squeezed as asked."""
    values = np.asarray(values)
    if leading_dim(values, f"@first_value: input {name!r}") == 0:
        raise PyTritonValidationError(f"@first_value: input {name!r} is empty (batch size 0)")
    first = values[0]
    if strict and len(values) > 1:
        same = np.broadcast_to(values[:1], values.shape)
        if not np.array_equal(values, same, equal_nan=values.dtype.kind in "fc"):
            raise PyTritonRuntimeError(
                f"The values on the {name!r} input are not equal: {short_repr(values)}. @first_value needs one"
                f" value for the batch: group the batch with @group_by_values({name!r}) first, or pass strict=False"
            )
    if squeeze and isinstance(first, np.ndarray) and first.size == 1:
        first = first.reshape(())[()]
    return first


def padded_batch_size(size: int, config: TritonModelConfig) -> int:
    """@pad_batch: the smallest preferred batch size or max_batch_size that holds ``size``."""
    preferred = (config.batcher.preferred_batch_size or ()) if config.batcher is not None else ()
    for candidate in sorted({*preferred, config.max_batch_size}):
        if candidate >= size:
            return candidate
    return size


def repeat_last_row(value: Any, target: int) -> np.ndarray:
    """@pad_batch: ``value`` grown to ``target`` rows by repeating its last row."""
    value = np.asarray(value)
    return np.concatenate([value, np.repeat(value[-1:], target - len(value), axis=0)])


class OutputBatchSizeError(PyTritonValidationError, ValueError):
    """@batch: outputs whose axis 0 is not the batch's size (a ValueError too, as PyTriton raises)."""


class PaddedOutputs(dict):
    """@pad_batch's outputs, as the callable returned them for the padded batch.

    Called alone, ``@pad_batch`` returns the padded rows (as PyTriton's); ``@batch`` above it
    sees this type and keeps the first ``batch_size`` rows of the outputs of the padded size.
    """

    def __init__(self, outputs: Mapping[str, Any], batch_size: int, padded_size: int):
        super().__init__(outputs)
        self.batch_size = batch_size
        self.padded_size = padded_size

    def trimmed(self) -> Dict[str, Any]:
        """The outputs cut back to ``batch_size`` rows (those of the padded size)."""
        trimmed = {}
        for name, value in self.items():
            value = np.asarray(value)
            trimmed[name] = value[: self.batch_size] if value.shape[:1] == (self.padded_size,) else value
        return trimmed


def batch_steps(requests, args, kwargs, convert):
    if not requests:
        return []
    inputs, sizes = concatenate_requests(requests)
    result = yield args, {**kwargs, **inputs}
    return map_result(result, functools.partial(split_outputs, sizes=sizes, convert=convert))


def sample_steps(requests, args, kwargs, convert):
    responses = []
    for request in requests:
        result = yield args, {**kwargs, **request}
        if len(requests) == 1:
            return map_result(result, lambda outputs: [convert(outputs)])
        if inspect.isgenerator(result) or inspect.isasyncgen(result):
            raise PyTritonValidationError(
                f"@sample: a streaming (generator) callable serves one request per call, got {len(requests)}"
            )
        responses.append(convert(result))
    return responses


def group_by_keys_steps(requests, args, kwargs):
    groups: Dict[frozenset, List[int]] = {}
    for index, request in enumerate(requests):
        groups.setdefault(frozenset(request), []).append(index)
    responses: List[Any] = [None] * len(requests)
    for indices in groups.values():
        group = requests if len(groups) == 1 else [requests[index] for index in indices]
        result = yield (group, *args), kwargs
        check_responses(result, len(group), "group_by_keys")
        for index, response in zip(indices, result):
            responses[index] = response
    return responses


def pad_steps(args, kwargs, size, target, config):
    result = yield args, kwargs
    return map_result(result, lambda outputs: PaddedOutputs(convert_output(outputs, model_config=config), size, target))

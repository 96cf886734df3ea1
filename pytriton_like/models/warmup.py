"""Model warm-up as PyTriton 0.7.0 does it: the callables get the warm-up requests in this
process, before the model is loaded into Triton (docs/warmup.md)."""

import asyncio
import inspect
import logging
from typing import Any, Callable, Dict, List, Sequence

import numpy as np

from ..model_config.common import ModelWarmup, WarmupInput
from ..proxy.types import Request

__all__ = ["warm_up", "warmup_data"]

logger = logging.getLogger(__name__)

_STRING_KINDS = "OSU"


def warmup_data(item: WarmupInput, batch_size: int) -> np.ndarray:
    """The batch of ``batch_size`` rows one warm-up input describes: zeros, random values, or a
    ``.npy`` file (repeated or cut to the batch size)."""
    shape = (batch_size, *tuple(int(dim) for dim in item.shape))
    dtype = np.dtype(object if item.dtype in (bytes, np.bytes_, object) else item.dtype)
    if item.input_data_file:
        data = np.load(item.input_data_file, allow_pickle=dtype.kind == "O")
        if data.shape != shape:
            if data.shape == shape[1:]:
                data = np.repeat(data[np.newaxis, ...], batch_size, axis=0)
            elif data.shape[1:] == shape[1:] and len(data):
                data = np.resize(data, shape)  # rows repeated, or cut to the batch size
            else:
                raise ValueError(f"input_data_file {item.input_data_file}: shape {data.shape}, expected {shape}")
        return data.astype(dtype)
    if not (item.zero_data or item.random_data):
        raise ValueError("one of zero_data, random_data or input_data_file must be given")
    rng = np.random.default_rng()
    if dtype.kind in _STRING_KINDS:
        if item.zero_data:
            return np.full(shape, b"", dtype=object)
        letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
        return np.array(
            [bytes(rng.choice(letters, size=int(rng.integers(8, 33)))) for _ in range(int(np.prod(shape)))], dtype=object
        ).reshape(shape)
    if item.zero_data:
        return np.zeros(shape, dtype=dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dtype)
    return rng.random(shape).astype(dtype)


def warm_up(model_name: str, infer_funcs: Sequence[Callable], warmups: List[ModelWarmup]) -> int:
    """Call every callable with every warm-up request (``count`` times each); returns the calls made.

    A failing request is logged at WARNING and the warm-up goes on: as in PyTriton, a warm-up
    never stops a model from loading.
    """
    requests: List[Dict[str, Any]] = []
    for warmup in warmups:
        try:
            data = {name: warmup_data(item, warmup.batch_size) for name, item in warmup.inputs.items()}
        except (ValueError, OSError, TypeError) as exc:
            logger.warning("model %s: warm-up %r cannot be made: %s", model_name, warmup.name, exc)
            continue
        requests += [data] * warmup.count
    calls = 0
    for index, func in enumerate(infer_funcs):
        for data in requests:
            try:
                _finish(func([Request(data={name: value.copy() for name, value in data.items()})]))
                calls += 1
            except Exception as exc:  # noqa: BLE001 - a warm-up failure is reported, not fatal (PyTriton's rule)
                logger.warning("model %s: warm-up request to instance %d failed: %s", model_name, index, exc)
    logger.info("model %s warmed up: %d calls", model_name, calls)
    return calls


def _finish(result: Any) -> None:
    """Run a result to its end: a coroutine awaited, a (async) generator exhausted."""
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    if inspect.isasyncgen(result):

        async def drain():
            async for _ in result:
                pass

        asyncio.run(drain())
    elif inspect.isgenerator(result):
        for _ in result:
            pass

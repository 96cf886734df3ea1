"""``pytriton_like serve module:callable``: serve one callable for a quick trial.

The model is described by options (``--input a:float32:-1``...) or by the callable itself: the
inputs by the parameters of a ``@batch``/``@sample`` callable (float32 and shape ``(-1,)`` unless
annotated ``numpy.typing.NDArray[<dtype>]``), the outputs by one call with a sample of ones.
"""

import argparse
import importlib
import inspect
import os
import sys
import typing
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from .._decorator_utils import TRITON_CONTEXT_FIELD, unwrap_target
from ..console import PREFIX
from ..exceptions import PyTritonError
from ..model_config import Tensor
from ..proxy.types import Request
from ..models.worker_options import WorkerInfo
from ..relay_server.calling import BatchCall
from ..relay_server.hints import is_decorated
from ..server.config import TritonConfig
from ..tune.settings import Settings, read_recommended
from .errors import CliError
from .flags import settings_from_arguments
from .probe import has_worker_setup, outputs_from_a_worker, probe_failure_hints

__all__ = ["serve_target", "load_target", "parse_tensor", "inputs_from_signature", "outputs_from_a_call", "CliError"]

_BYTES_NAMES = {"bytes": np.bytes_, "str": np.bytes_, "string": np.bytes_, "object": np.bytes_}


def serve_target(args: argparse.Namespace) -> int:
    """Serve ``args.target`` until CTRL+C; returns the exit code."""
    from ..triton import Triton  # noqa: PLC0415 - imported once the arguments are known good

    try:
        func = load_target(args.target)
        settings = settings_from_arguments(args, read_recommended(args.settings) if args.settings else None)
        batching = settings.batching
        model_config = settings.model_config()
        inputs = [parse_tensor(text, "--input") for text in args.inputs]
        inputs_from = "--input"
        if not inputs:
            inputs, inputs_from = inputs_from_signature(func), "its signature"
        name = args.model_name or _name_of(func)
        outputs = [parse_tensor(text, "--output") for text in args.outputs]
        outputs_from = "--output"
        if not outputs:
            outputs, outputs_from = _probe_outputs(args.target, func, name, inputs, batching, settings.workers)
        config = TritonConfig(http_port=args.http_port, grpc_port=args.grpc_port, metrics_port=args.metrics_port)
        batches = f"max_batch_size {model_config.max_batch_size}" if batching else "no batching"
        batcher = "".join(_batcher_words(settings))
        processes = f", {settings.workers} worker processes" if settings.workers > 1 else ""
        threads = f", {settings.instances} instances" if settings.instances > 1 else ""
        source = f" (settings from {args.settings})" if args.settings else ""
        _say(f"serving {args.target} as model {name} ({batches}{batcher}{processes}{threads}){source}")
        for kind, specs, origin in (("input", inputs, inputs_from), ("output", outputs, outputs_from)):
            for spec in specs:
                _say(f"  {kind} {spec.name}: {np.dtype(spec.dtype).name} {spec.shape} (from {origin})")
        with Triton(config=config) as triton:
            triton.bind(
                model_name=name,
                infer_func=[func] * settings.instances if settings.instances > 1 else func,
                inputs=inputs,
                outputs=outputs,
                config=model_config,
                strict=args.strict,
                workers=settings.workers,
            )
            triton.serve()
    except (CliError, PyTritonError) as exc:
        print(f"pytriton_like serve: error: {exc}", file=sys.stderr)
        return 1
    return 0


def load_target(target: str) -> Callable:
    """The callable named by ``module:attribute`` (the attribute may be dotted); the current folder is importable."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise CliError(f"expected MODULE:CALLABLE, e.g. my_models:add_sub; got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does; a console script's path lacks it
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise CliError(f"{module_name!r} has no {attribute!r}") from None
    if not callable(found) or isinstance(found, type):
        raise CliError(f"{target} is a {type(found).__name__}, not a function or a callable object")
    return found


def parse_tensor(text: str, option: str) -> Tensor:
    """A tensor from ``NAME:DTYPE:SHAPE``, e.g. ``image:uint8:224,224,3`` (DTYPE and SHAPE default to
    float32 and -1)."""
    name, _, rest = text.partition(":")
    dtype_name, _, shape_text = rest.partition(":")
    if not name:
        raise CliError(f"{option} {text!r}: expected NAME:DTYPE:SHAPE, e.g. a:float32:-1")
    try:
        dtype = _BYTES_NAMES.get(dtype_name) or np.dtype(dtype_name or "float32").type
        shape = tuple(int(dim) for dim in (shape_text or "-1").split(","))
    except (TypeError, ValueError):
        raise CliError(
            f"{option} {text!r}: expected NAME:DTYPE:SHAPE with a numpy dtype (float32, int64, bytes...) and"
            " comma-separated dimensions (-1: any size), e.g. a:float32:-1"
        ) from None
    return Tensor(name=name, dtype=dtype, shape=shape)


def inputs_from_signature(func: Callable) -> List[Tensor]:
    """The inputs a ``@batch``/``@sample`` callable takes: one per named parameter; a parameter with
    a default is an optional input."""
    if not is_decorated(func):
        raise CliError(
            f"{_name_of(func)} is not decorated: it receives the list of requests, so its parameters do not"
            " name the inputs; give them with --input NAME:DTYPE:SHAPE (or decorate it with @batch)"
        )
    target, instance = unwrap_target(func)
    parameters = list(inspect.signature(target).parameters.values())
    if instance is not None and parameters:
        parameters = parameters[1:]  # self
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # noqa: BLE001 - annotations that do not evaluate: dtype float32
        hints = {}
    inputs = [
        Tensor(
            name=parameter.name,
            dtype=_dtype_of(hints.get(parameter.name)),
            shape=(-1,),
            optional=parameter.default is not inspect.Parameter.empty,
        )
        for parameter in parameters
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
        and parameter.name != TRITON_CONTEXT_FIELD
    ]
    if not inputs:
        raise CliError(f"{_name_of(func)} names no inputs in its signature; give them with --input NAME:DTYPE:SHAPE")
    return inputs


def outputs_from_a_call(func: Callable, inputs: Sequence[Tensor], batching: bool, workers: int = 1) -> List[Tensor]:
    """The outputs of one call with one request of ones (one row, each dimension 1): names and
    dtypes as returned, every dimension variable (-1). ``workers``: how many worker processes
    will serve it (a failed call's message says what to give instead)."""
    data = {spec.name: _ones(spec, batching) for spec in inputs}
    call = BatchCall(func)
    try:
        responses = call([Request(data=data)])
    except Exception as exc:  # noqa: BLE001 - any failure means: say what to give instead
        hints = probe_failure_hints(func, _name_of(func), inputs, exc, workers)
        raise CliError(
            f"cannot tell the outputs: calling {_name_of(func)} with a sample of ones failed ({type(exc).__name__}:"
            f" {exc}); {'; or '.join(hints)}"
        ) from exc
    finally:
        call.close()
    if not isinstance(responses, (list, tuple)) or len(responses) != 1 or not isinstance(responses[0], dict):
        raise CliError(
            f"cannot tell the outputs: {_name_of(func)} returned {type(responses).__name__}, not one dict of"
            " outputs per request; give them with --output NAME:DTYPE:SHAPE"
        )
    outputs = []
    for name, value in responses[0].items():
        array = np.asarray(value)
        dtype = np.bytes_ if array.dtype.kind in "OSU" else array.dtype.type
        rank = array.ndim - 1 if batching else array.ndim
        outputs.append(Tensor(name=str(name), dtype=dtype, shape=(-1,) * max(rank, 1)))
    return outputs


def _probe_outputs(
    target: str, func: Callable, name: str, inputs: Sequence[Tensor], batching: bool, workers: int
) -> Tuple[List[Tensor], str]:
    """The outputs of one call with a sample of ones, and where they came from: in a process set up
    as a worker (its ``setup_worker`` run first) when the callable has one and is served by
    workers, else here."""
    if workers > 1 and has_worker_setup(func):
        worker = WorkerInfo(model_name=name, index=0, count=workers)
        outputs = outputs_from_a_worker(target, inputs, batching, worker, load=load_target, call=outputs_from_a_call)
        return outputs, "one call with a sample of ones, after setup_worker"
    return outputs_from_a_call(func, inputs, batching, workers), "one call with a sample of ones"


def _batcher_words(settings: Settings) -> List[str]:
    words = []
    if settings.max_queue_delay_microseconds:
        words.append(f", queue delay {settings.max_queue_delay_microseconds} µs")
    if settings.preferred_batch_sizes:
        words.append(f", preferred batch sizes {','.join(map(str, settings.preferred_batch_sizes))}")
    return words


def _ones(spec: Tensor, batching: bool) -> np.ndarray:
    shape: Tuple[int, ...] = tuple(1 if dim == -1 else dim for dim in spec.shape)
    if batching:
        shape = (1, *shape)
    if spec.dtype is np.bytes_ or spec.dtype is object:
        return np.full(shape, b"1", dtype=object)
    return np.ones(shape, dtype=spec.dtype)


def _dtype_of(annotation: Optional[Any]) -> Any:
    """The numpy scalar type an annotation names (``NDArray[np.int64]``, ``np.int64``), float32 otherwise."""
    candidates = [annotation, *typing.get_args(annotation)]
    for candidate in candidates:
        for inner in (candidate, *typing.get_args(candidate)):
            if isinstance(inner, type) and issubclass(inner, np.generic):
                return inner
    return np.float32


def _name_of(func: Callable) -> str:
    """A function's (or method's) name; an object's class name."""
    return getattr(func, "__name__", None) or type(func).__name__


def _say(line: str) -> None:
    print(f"{PREFIX}{line}", file=sys.stderr, flush=True)

"""From ``bind()``'s arguments to a checked model configuration (``Triton`` and ``RemoteTriton`` share it)."""

import copy
from typing import Callable, List, Optional, Sequence, Union

from ..exceptions import PyTritonValidationError
from ..model_config import ModelConfig, Tensor
from ..model_config.common import DeviceKind
from ..model_config.validation import validate_config
from ..model_config.names import check_model_name
from ..model_config.triton_model_config import ResponseCache, TritonModelConfig, resolve_tensors
from ..worker.options import check_workers

__all__ = ["bound_model_config"]


def bound_model_config(
    model_name: str,
    infer_func: Union[Callable, Sequence[Callable]],
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor],
    model_version: int,
    config: Optional[ModelConfig],
    workers: int = 1,
) -> "tuple[TritonModelConfig, List[Callable]]":
    """The checked configuration of a model bound with these arguments, and its callables (one per
    instance: with ``workers`` > 1 the one callable, once per worker process).

    Raises:
        PyTritonValidationError: a bad name, tensor spec, callable or configuration.
    """
    check_model_name(model_name)
    funcs = list(infer_func) if isinstance(infer_func, (list, tuple)) else [infer_func]
    if not funcs:
        raise PyTritonValidationError(f"model {model_name!r}: infer_func is an empty list")
    for func in funcs:
        if not callable(func):
            raise PyTritonValidationError(
                f"model {model_name!r}: infer_func must be callable, got {type(func).__name__}: {func!r}"
            )
    check_workers(model_name, workers, tuple(funcs))
    funcs = funcs * workers
    config = config or ModelConfig()
    try:
        model_config = TritonModelConfig(
            model_name=model_name,
            model_version=model_version,
            max_batch_size=config.max_batch_size if config.batching else 0,
            batching=config.batching,
            # a copy: DynamicBatcher is mutable (as PyTriton's), the bound model's must not change
            batcher=copy.deepcopy(config.batcher) if config.batching and config.sequence_batcher is None else None,
            instance_group={DeviceKind.KIND_CPU: len(funcs)},
            decoupled=config.decoupled,
            inputs=resolve_tensors(inputs, "INPUT"),
            outputs=resolve_tensors(outputs, "OUTPUT"),
            response_cache=ResponseCache(enable=True) if config.response_cache else None,
            sequence_batcher=config.sequence_batcher,
            model_warmup=copy.deepcopy(config.model_warmup) or None,
        )
    except TypeError as exc:
        raise PyTritonValidationError(f"model {model_name!r}: {exc}") from None
    validate_config(model_config)
    return model_config, funcs

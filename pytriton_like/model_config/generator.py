"""Render a :class:`TritonModelConfig` to Triton's config.pbtxt.

The file is Triton's own ``ModelConfig`` protobuf message (the ``model_config_pb2`` that
tritonclient ships) printed in protobuf's text format, so every name, escape and nesting is
the one tritonserver parses.
"""

import pathlib
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Union

from google.protobuf import text_format

from ..exceptions import PyTritonBadParameterError, PyTritonValidationError
from .common import DynamicBatcher, ModelWarmup, QueuePolicy, SequenceBatcher, SequenceStrategy
from .proto import model_config_pb2
from .triton_model_config import BOUND_MODEL_BACKEND, TensorSpec, TritonModelConfig, response_cache_enabled
from .validation import dtype_to_triton, scalar_type, triton_to_dtype, validate_config

if TYPE_CHECKING:  # only the type: ensemble.py imports nothing of this module
    from .ensemble import EnsembleConfig

__all__ = [
    "ModelConfigGenerator",
    "render_config",
    "render_ensemble_config",
    "BOUND_MODEL_BACKEND",
    "validate_config",
    "dtype_to_triton",
    "triton_to_dtype",
]


def render_config(config: TritonModelConfig, versions: Optional[Iterable[int]] = None) -> str:
    """config.pbtxt text for ``config``; validates it first.

    Args:
        versions: the version numbers to serve (a ``specific`` version policy, for every bound
            version); ``None`` leaves Triton's default policy (the latest version).
    """
    validate_config(config)
    message = model_config_pb2.ModelConfig(
        name=config.model_name,
        backend=BOUND_MODEL_BACKEND,
        max_batch_size=config.max_batch_size if config.batching else 0,
    )
    if versions is not None:
        numbers = sorted(set(versions))
        if not numbers or any(number < 1 for number in numbers):
            raise PyTritonValidationError(f"a version policy needs version numbers of 1 or more, got {numbers}")
        message.version_policy.specific.versions.extend(numbers)
    if config.batching and config.batcher is not None:
        _set_batcher(message.dynamic_batching, config.batcher)
    if config.sequence_batcher is not None:
        _set_sequence_batcher(message.sequence_batching, config.sequence_batcher)
    _add_tensors(message.input, config.inputs)
    _add_tensors(message.output, config.outputs)
    message.instance_group.add(kind=model_config_pb2.ModelInstanceGroup.KIND_CPU, count=config.instance_count)
    if config.decoupled:
        message.model_transaction_policy.decoupled = True
    if response_cache_enabled(config):
        message.response_cache.enable = True
    for key, value in config.backend_parameters.items():
        message.parameters[key].string_value = str(value)
    # model_warmup stays out: the callables are warmed up in the user's process (models/warmup.py), as PyTriton
    return _text(message)


def _text(message: Any) -> str:
    return text_format.MessageToString(message)


def _set_batcher(section: Any, batcher: DynamicBatcher) -> None:
    section.SetInParent()  # an empty dynamic_batching {} still turns the batcher on
    section.max_queue_delay_microseconds = batcher.max_queue_delay_microseconds
    section.preferred_batch_size.extend(batcher.preferred_batch_size or ())
    section.preserve_ordering = batcher.preserve_ordering
    section.priority_levels = batcher.priority_levels
    section.default_priority_level = batcher.default_priority_level
    if batcher.default_queue_policy is not None:
        _set_policy(section.default_queue_policy, batcher.default_queue_policy)
    for level, policy in (batcher.priority_queue_policy or {}).items():
        _set_policy(section.priority_queue_policy[level], policy)


def _set_sequence_batcher(section: Any, batcher: SequenceBatcher) -> None:
    section.max_sequence_idle_microseconds = batcher.max_sequence_idle_microseconds
    if batcher.strategy is SequenceStrategy.DIRECT:
        strategy = section.direct
        strategy.SetInParent()  # chooses the strategy even with every field at its default
        strategy.minimum_slot_utilization = batcher.minimum_slot_utilization
    else:
        strategy = section.oldest
        strategy.SetInParent()
        strategy.max_candidate_sequences = batcher.max_candidate_sequences
        strategy.preferred_batch_size.extend(batcher.preferred_batch_size or ())
        strategy.preserve_ordering = batcher.preserve_ordering
    strategy.max_queue_delay_microseconds = batcher.max_queue_delay_microseconds


def _set_policy(section: Any, policy: QueuePolicy) -> None:
    section.SetInParent()
    section.timeout_action = model_config_pb2.ModelQueuePolicy.TimeoutAction.Value(policy.timeout_action.value)
    section.default_timeout_microseconds = policy.default_timeout_microseconds
    section.allow_timeout_override = policy.allow_timeout_override
    section.max_queue_size = policy.max_queue_size


def _add_tensors(field: Any, specs: Iterable[TensorSpec]) -> None:
    for spec in specs:
        # Triton wants at least one dim; a scalar per sample is dims [1] reshaped to [].
        tensor = field.add(
            name=spec.name,
            data_type=model_config_pb2.DataType.Value("TYPE_" + dtype_to_triton(spec.dtype)),
            dims=spec.shape or (1,),
        )
        if not spec.shape:
            tensor.reshape.SetInParent()
        if spec.optional:
            tensor.optional = True


def render_ensemble_config(config: "EnsembleConfig") -> str:
    """config.pbtxt text of an ensemble (``platform: "ensemble"`` with its ``ensemble_scheduling``).

    Validate it first with :func:`~pytriton_like.model_config.ensemble.validate_ensemble`.
    """
    message = model_config_pb2.ModelConfig(
        name=config.model_name, platform="ensemble", max_batch_size=config.max_batch_size
    )
    _add_tensors(message.input, config.inputs)
    _add_tensors(message.output, config.outputs)
    scheduling = message.ensemble_scheduling
    scheduling.SetInParent()
    for step in config.steps:
        scheduling.step.add(
            model_name=step.model_name,
            model_version=step.model_version,
            input_map=step.input_map,
            output_map=step.output_map,
        )
    return _text(message)


class ModelConfigGenerator:
    """A model config in the JSON shape of Triton's model-config API (PyTriton's generator).

    Example:
        >>> ModelConfigGenerator(TritonModelConfig(model_name="m", batching=False)).get_config()
        {'name': 'm', 'backend': 'python', 'max_batch_size': 0}
    """

    def __init__(self, config: TritonModelConfig):
        self._config = config

    def get_config(self) -> Dict[str, Any]:
        """The configuration as a dict, as ``ModelClient.get_model_config()`` reads it back."""
        config = self._config
        out: Dict[str, Any] = {"name": config.model_name, "backend": config.backend}
        out["max_batch_size"] = config.max_batch_size if config.batching else 0
        if config.batching and config.max_batch_size < 1:
            raise PyTritonBadParameterError("The `max_batch_size` must be greater or equal to 1.")
        if config.batching and isinstance(config.batcher, DynamicBatcher):
            out["dynamic_batching"] = _batcher_dict(config.batcher)
        if config.inputs:
            out["input"] = [_tensor_dict(spec) for spec in config.inputs]
        if config.outputs:
            optional = [spec.name for spec in config.outputs if spec.optional]
            if optional:
                raise PyTritonBadParameterError(
                    f"Optional flag for outputs is not supported. Outputs marked as optional: {', '.join(optional)}."
                )
            out["output"] = [_tensor_dict(spec) for spec in config.outputs]
        if config.instance_group:
            out["instance_group"] = [{"count": count, "kind": kind.value} for kind, count in config.instance_group.items()]
        if config.decoupled:
            out["model_transaction_policy"] = {"decoupled": True}
        if config.backend_parameters:
            out["parameters"] = {key: {"string_value": str(value)} for key, value in config.backend_parameters.items()}
        if config.response_cache is not None:
            out["response_cache"] = {"enable": response_cache_enabled(config)}
        if config.model_warmup:
            out["model_warmup"] = [_warmup_dict(warmup) for warmup in config.model_warmup]
        return out

    def to_file(self, config_path: Union[str, pathlib.Path]) -> str:
        """Writes config.pbtxt to ``config_path`` (folders created); returns its text."""
        text = render_config(self._config)
        path = pathlib.Path(config_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return text


def _tensor_dict(spec: TensorSpec) -> Dict[str, Any]:
    item = {"name": spec.name, "dims": list(spec.shape), "data_type": f"TYPE_{dtype_to_triton(scalar_type(spec.dtype))}"}
    if spec.optional:
        item["optional"] = True
    return item


def _policy_dict(policy: QueuePolicy) -> Dict[str, Any]:
    return {
        "timeoutAction": policy.timeout_action.value,
        "defaultTimeoutMicroseconds": int(policy.default_timeout_microseconds),
        "allowTimeoutOverride": policy.allow_timeout_override,
        "maxQueueSize": int(policy.max_queue_size),
    }


def _batcher_dict(batcher: DynamicBatcher) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if batcher.max_queue_delay_microseconds > 0:
        out["maxQueueDelayMicroseconds"] = int(batcher.max_queue_delay_microseconds)
    if batcher.preferred_batch_size:
        out["preferredBatchSize"] = [int(size) for size in batcher.preferred_batch_size]
    if batcher.preserve_ordering:
        out["preserveOrdering"] = True
    if batcher.priority_levels:
        out["priorityLevels"] = batcher.priority_levels
    if batcher.default_priority_level:
        out["defaultPriorityLevel"] = batcher.default_priority_level
    if batcher.default_queue_policy:
        out["defaultQueuePolicy"] = _policy_dict(batcher.default_queue_policy)
    if batcher.priority_queue_policy:
        out["priorityQueuePolicy"] = {level: _policy_dict(p) for level, p in batcher.priority_queue_policy.items()}
    return out


def _warmup_dict(warmup: ModelWarmup) -> Dict[str, Any]:
    inputs = {}
    for name, item in warmup.inputs.items():
        entry: Dict[str, Any] = {"data_type": f"TYPE_{dtype_to_triton(scalar_type(item.dtype))}", "dims": list(item.shape)}
        if item.zero_data:
            entry["zero_data"] = True
        elif item.random_data:
            entry["random_data"] = True
        elif item.input_data_file:
            entry["input_data_file"] = item.input_data_file
        inputs[name] = entry
    return {"name": warmup.name, "batch_size": warmup.batch_size, "inputs": inputs, "count": warmup.count}

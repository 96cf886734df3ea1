"""Parsing of the model configuration the server returns as JSON (no I/O).

The clients hand it the configuration in the shape Triton's HTTP endpoint writes, on both
protocols (gRPC's message is converted by ``management.message_to_dict``). It also reads
protobuf's own JSON mapping (64-bit integers as strings, fields at their default value left
out), so a configuration from any Triton tool parses.
"""

import logging
import re
from typing import Any, Dict, Mapping, Optional

from ..exceptions import PyTritonError
from ..model_config.common import DeviceKind, DynamicBatcher, QueuePolicy, SequenceBatcher, SequenceStrategy, TimeoutAction
from ..model_config.validation import triton_to_dtype
from ..model_config.triton_model_config import ResponseCache, TensorSpec, TritonModelConfig
from .exceptions import PyTritonClientError

__all__ = ["parse_model_config"]

_LOGGER = logging.getLogger(__name__)


def parse_model_config(config: Mapping[str, Any], model_version: Optional[str] = None) -> TritonModelConfig:
    """Builds a :class:`TritonModelConfig` from the server's JSON model configuration.

    Args:
        config: the configuration as Triton's HTTP endpoint returns it (``ClientCore.raw_model_config``).
        model_version: the version the client asked for (``None``: the latest); the
            configuration itself does not carry one.

    Returns:
        The configuration, with tensor dtypes as numpy scalar types. A data type numpy
        cannot hold (e.g. ``TYPE_BF16``) is kept as its Triton name.

    Raises:
        PyTritonClientError: the configuration lacks a model name or holds values of the wrong type.
    """
    try:
        return _parse(config, model_version)
    except (KeyError, TypeError, ValueError) as exc:
        raise PyTritonClientError(f"cannot parse the model configuration returned by the server: {exc!r}") from exc


def _parse(config: Mapping[str, Any], model_version: Optional[str]) -> TritonModelConfig:
    max_batch_size = int(config.get("max_batch_size", 0))
    instance_group: Dict[DeviceKind, Optional[int]] = {}
    for group in config.get("instance_group") or []:
        kind = DeviceKind(group.get("kind", DeviceKind.KIND_AUTO.value))
        instance_group[kind] = instance_group.get(kind, 0) + int(group.get("count", 1))
    cache = config.get("response_cache")
    return TritonModelConfig(
        model_name=config["name"],
        model_version=int(model_version) if model_version and str(model_version).isdigit() else 1,
        max_batch_size=max_batch_size,
        batching=max_batch_size > 0,
        batcher=_batcher(config["dynamic_batching"]) if "dynamic_batching" in config else None,
        instance_group=instance_group,
        decoupled=bool((config.get("model_transaction_policy") or {}).get("decoupled", False)),
        inputs=[_tensor(spec) for spec in config.get("input") or []],
        outputs=[_tensor(spec) for spec in config.get("output") or []],
        response_cache=ResponseCache(enable=bool(cache.get("enable", False))) if cache is not None else None,
        backend_parameters={
            key: value.get("string_value", "") for key, value in (config.get("parameters") or {}).items()
        },
        sequence_batcher=_sequence_batcher(config["sequence_batching"]) if "sequence_batching" in config else None,
    )


def _tensor(spec: Mapping[str, Any]) -> TensorSpec:
    name = spec["name"]
    data_type = spec.get("data_type", "TYPE_INVALID")
    try:
        dtype: object = triton_to_dtype(data_type)
    except PyTritonError:
        _LOGGER.debug("tensor %r has data type %s, which numpy cannot hold; kept as its name", name, data_type)
        dtype = data_type
    return TensorSpec(
        name=name,
        shape=tuple(int(dim) for dim in spec.get("dims") or ()),
        dtype=dtype,
        optional=bool(spec.get("optional", False)),
    )


def _camel_keys_too(section: Mapping[str, Any]) -> Dict[str, Any]:
    """``section`` with protobuf's JSON names (``maxQueueDelayMicroseconds``) also under the field names."""
    out = dict(section)
    for key, value in section.items():
        snake = re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()
        out.setdefault(snake, value)
    return out


def _batcher(section: Mapping[str, Any]) -> DynamicBatcher:
    section = _camel_keys_too(section)
    preferred = section.get("preferred_batch_size") or None
    priority_policies = section.get("priority_queue_policy") or {}
    return DynamicBatcher(
        max_queue_delay_microseconds=int(section.get("max_queue_delay_microseconds", 0)),
        preferred_batch_size=[int(size) for size in preferred] if preferred else None,
        preserve_ordering=bool(section.get("preserve_ordering", False)),
        priority_levels=int(section.get("priority_levels", 0)),
        default_priority_level=int(section.get("default_priority_level", 0)),
        default_queue_policy=_queue_policy(section["default_queue_policy"])
        if "default_queue_policy" in section
        else None,
        priority_queue_policy={int(level): _queue_policy(policy) for level, policy in priority_policies.items()}
        or None,
    )


def _sequence_batcher(section: Mapping[str, Any]) -> SequenceBatcher:
    idle = int(section.get("max_sequence_idle_microseconds", 0))
    if "oldest" in section:
        oldest = section["oldest"] or {}
        preferred = oldest.get("preferred_batch_size") or None
        return SequenceBatcher(
            strategy=SequenceStrategy.OLDEST,
            max_sequence_idle_microseconds=idle,
            max_queue_delay_microseconds=int(oldest.get("max_queue_delay_microseconds", 0)),
            max_candidate_sequences=int(oldest.get("max_candidate_sequences", 0)),
            preferred_batch_size=tuple(int(size) for size in preferred) if preferred else None,
            preserve_ordering=bool(oldest.get("preserve_ordering", False)),
        )
    direct = section.get("direct") or {}
    return SequenceBatcher(
        max_sequence_idle_microseconds=idle,
        max_queue_delay_microseconds=int(direct.get("max_queue_delay_microseconds", 0)),
        minimum_slot_utilization=float(direct.get("minimum_slot_utilization", 0.0)),
    )


def _queue_policy(section: Mapping[str, Any]) -> QueuePolicy:
    section = _camel_keys_too(section)
    return QueuePolicy(
        timeout_action=TimeoutAction(section.get("timeout_action", TimeoutAction.REJECT.value)),
        default_timeout_microseconds=int(section.get("default_timeout_microseconds", 0)),
        allow_timeout_override=bool(section.get("allow_timeout_override", False)),
        max_queue_size=int(section.get("max_queue_size", 0)),
    )


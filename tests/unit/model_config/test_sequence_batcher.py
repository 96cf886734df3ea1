"""SequenceBatcher: its checks, and its rendering to config.pbtxt's sequence_batching (parsed back as protobuf)."""

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.model_config import DynamicBatcher, ModelConfig, SequenceBatcher, SequenceStrategy
from pytriton_like.model_config.generator import render_config, validate_config
from pytriton_like.model_config.triton_model_config import TensorSpec, TritonModelConfig


def config(**fields) -> TritonModelConfig:
    fields.setdefault("model_name", "Stateful")
    fields.setdefault("inputs", (TensorSpec("x", (1,), np.int64),))
    fields.setdefault("outputs", (TensorSpec("y", (1,), np.int64),))
    return TritonModelConfig(**fields)


def parsed(cfg: TritonModelConfig):
    return text_format.Parse(render_config(cfg), model_config_pb2.ModelConfig())


def test_default_is_direct_strategy():
    batcher = SequenceBatcher()
    assert batcher.strategy is SequenceStrategy.DIRECT
    message = parsed(config(sequence_batcher=batcher))
    assert message.sequence_batching.WhichOneof("strategy_choice") == "direct"
    assert message.sequence_batching.max_sequence_idle_microseconds == 0  # Triton's default (1 s) then
    assert not message.HasField("dynamic_batching")


def test_render_every_direct_field():
    batcher = SequenceBatcher(
        max_sequence_idle_microseconds=5_000_000, max_queue_delay_microseconds=100, minimum_slot_utilization=0.5
    )
    sequence = parsed(config(sequence_batcher=batcher)).sequence_batching
    assert sequence.max_sequence_idle_microseconds == 5_000_000
    assert sequence.direct.max_queue_delay_microseconds == 100
    assert sequence.direct.minimum_slot_utilization == 0.5


def test_render_every_oldest_field():
    batcher = SequenceBatcher(
        strategy="oldest",
        max_sequence_idle_microseconds=7,
        max_queue_delay_microseconds=100,
        max_candidate_sequences=6,
        preferred_batch_size=[2, 4],
        preserve_ordering=True,
    )
    assert batcher.strategy is SequenceStrategy.OLDEST and batcher.preferred_batch_size == (2, 4)
    sequence = parsed(config(sequence_batcher=batcher)).sequence_batching
    assert sequence.WhichOneof("strategy_choice") == "oldest"
    assert sequence.max_sequence_idle_microseconds == 7
    assert (sequence.oldest.max_candidate_sequences, list(sequence.oldest.preferred_batch_size)) == (6, [2, 4])
    assert (sequence.oldest.max_queue_delay_microseconds, sequence.oldest.preserve_ordering) == (100, True)


def test_non_batching_model_takes_a_sequence_batcher():
    message = parsed(config(batching=False, max_batch_size=0, sequence_batcher=SequenceBatcher()))
    assert message.max_batch_size == 0 and message.sequence_batching.HasField("direct")


def test_model_config_hands_the_sequence_batcher_on():
    batcher = SequenceBatcher(max_sequence_idle_microseconds=10)
    assert ModelConfig(sequence_batcher=batcher).sequence_batcher is batcher
    assert ModelConfig().sequence_batcher is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"strategy": "newest"}, "strategy must be one of 'direct', 'oldest'"),
        ({"max_candidate_sequences": 4}, "max_candidate_sequences apply to the 'oldest' strategy only"),
        ({"preferred_batch_size": [2]}, "preferred_batch_size apply to the 'oldest' strategy only"),
        ({"preserve_ordering": True}, "preserve_ordering apply to the 'oldest' strategy only"),
        ({"strategy": "oldest", "minimum_slot_utilization": 0.5}, "the 'direct' strategy only"),
        ({"max_sequence_idle_microseconds": -1}, "max_sequence_idle_microseconds must be 0 or more"),
        ({"minimum_slot_utilization": 1.5}, "within 0..1"),
    ],
)
def test_bad_sequence_batcher(kwargs, message):
    with pytest.raises(PyTritonValidationError, match=message):
        SequenceBatcher(**kwargs)


def test_one_scheduler_per_model():
    with pytest.raises(PyTritonValidationError, match="one scheduler"):
        ModelConfig(batcher=DynamicBatcher(max_queue_delay_microseconds=100), sequence_batcher=SequenceBatcher())
    with pytest.raises(PyTritonValidationError, match="one scheduler"):
        validate_config(config(batcher=DynamicBatcher(), sequence_batcher=SequenceBatcher()))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"decoupled": True}, "cannot serve a decoupled model"),
        ({"response_cache": True}, "cannot use the response cache"),
        ({"max_batch_size": 4}, "preferred_batch_size 8 is outside 1..max_batch_size"),
    ],
)
def test_sequence_batcher_refuses(fields, message):
    batcher = SequenceBatcher(strategy="oldest", preferred_batch_size=[8] if "max_batch_size" in fields else None)
    with pytest.raises(PyTritonValidationError, match=message):
        render_config(config(sequence_batcher=batcher, **fields))

"""Sequence arguments of a request to a stateful model, and a sequence batcher in the server's config (no server)."""

import numpy as np
import pytest

from pytriton_like.client.config_parser import parse_model_config
from pytriton_like.client.core import CallArgs, ClientCore
from pytriton_like.client.exceptions import PyTritonClientValueError
from pytriton_like.model_config import SequenceBatcher

from .conftest import make_config

X = np.zeros(1, np.float32)


@pytest.mark.parametrize("url", ["http://localhost", "grpc://localhost"])
@pytest.mark.parametrize("sequence_id", [7, "user-7", 2**64 - 1])
def test_sequence_arguments_reach_tritonclient(url, sequence_id):
    core = ClientCore(url, "M", model_config=make_config())
    call = CallArgs((X,), {}, None, None, sample=True, sequence_id=sequence_id, sequence_start=True)
    kwargs = core.prepare(call).infer_kwargs()
    assert (kwargs["sequence_id"], kwargs["sequence_start"], kwargs["sequence_end"]) == (sequence_id, True, False)
    assert core.stream_request(core.prepare(call))["sequence_id"] == sequence_id


def test_no_sequence_sends_no_sequence_arguments():
    # tritonclient's defaults (sequence_id 0: none); the call reads as PyTriton's
    core = ClientCore("localhost", "M", model_config=make_config())
    kwargs = core.prepare(CallArgs((X,), {}, None, None, sample=True)).infer_kwargs()
    assert not {"sequence_id", "sequence_start", "sequence_end"} & set(kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"sequence_id": 0}, r"within 1..2\*\*64-1"),
        ({"sequence_id": 2**64}, r"within 1..2\*\*64-1"),
        ({"sequence_id": -3}, r"within 1..2\*\*64-1"),
        ({"sequence_id": ""}, "empty string"),
        ({"sequence_id": True}, "must be an int or a str"),
        ({"sequence_id": 1.5}, "must be an int or a str"),
        ({"sequence_start": True}, "need a sequence_id"),
        ({"sequence_end": True}, "need a sequence_id"),
        ({"sequence_id": 1, "sequence_end": 1}, "sequence_end must be True or False, got 1"),
    ],
)
def test_bad_sequence_arguments(kwargs, message):
    with pytest.raises(PyTritonClientValueError, match=message):
        CallArgs((X,), {}, None, None, sample=True, **kwargs)


# As tritonserver 2.51 returns them (HTTP: JSON; gRPC: protobuf JSON mapping, 64-bit ints as strings).
@pytest.mark.parametrize(
    "section, expected",
    [
        (
            {"direct": {"max_queue_delay_microseconds": 100, "minimum_slot_utilization": 0.5},
             "max_sequence_idle_microseconds": 1000000, "control_input": [], "state": [], "iterative_sequence": False},
            SequenceBatcher(max_sequence_idle_microseconds=1000000, max_queue_delay_microseconds=100,
                            minimum_slot_utilization=0.5),
        ),
        ({"direct": {}, "max_sequence_idle_microseconds": "5000000"},
         SequenceBatcher(max_sequence_idle_microseconds=5000000)),
        (
            {"oldest": {"max_candidate_sequences": 4, "preferred_batch_size": [4],
                        "max_queue_delay_microseconds": "100", "preserve_ordering": True}},
            SequenceBatcher(strategy="oldest", max_candidate_sequences=4, preferred_batch_size=(4,),
                            max_queue_delay_microseconds=100, preserve_ordering=True),
        ),
    ],
    ids=["http-direct", "grpc-direct", "grpc-oldest"],
)
def test_sequence_batching_parsed(section, expected):
    config = parse_model_config({"name": "M", "max_batch_size": 4, "sequence_batching": section})
    assert config.sequence_batcher == expected and config.batcher is None


def test_no_sequence_batching():
    assert parse_model_config({"name": "M"}).sequence_batcher is None

"""The server's JSON model config (HTTP and gRPC forms) into TritonModelConfig."""

import numpy as np
import pytest

from pytriton_like.client.config_parser import parse_model_config
from pytriton_like.client.exceptions import PyTritonClientError
from pytriton_like.model_config.common import DynamicBatcher, QueuePolicy, TimeoutAction
from pytriton_like.model_config.triton_model_config import ResponseCache, TensorSpec

# As tritonserver 2.51 returns them for the same model (HTTP: JSON; gRPC: protobuf JSON mapping).
HTTP_CONFIG = {
    "name": "Str",
    "platform": "",
    "backend": "python",
    "version_policy": {"latest": {"num_versions": 1}},
    "max_batch_size": 8,
    "input": [
        {"name": "s", "data_type": "TYPE_STRING", "format": "FORMAT_NONE", "dims": [-1], "optional": False},
        {"name": "n", "data_type": "TYPE_INT32", "format": "FORMAT_NONE", "dims": [1], "optional": True},
    ],
    "output": [{"name": "u", "data_type": "TYPE_STRING", "dims": [-1]}],
    "instance_group": [{"name": "Str", "kind": "KIND_CPU", "count": 1, "gpus": []}],
    "dynamic_batching": {
        "preferred_batch_size": [4, 8],
        "max_queue_delay_microseconds": 100,
        "preserve_ordering": False,
        "priority_levels": 2,
        "default_priority_level": 1,
        "default_queue_policy": {
            "timeout_action": "DELAY",
            "default_timeout_microseconds": 5,
            "allow_timeout_override": True,
            "max_queue_size": 3,
        },
        "priority_queue_policy": {"2": {"timeout_action": "REJECT", "max_queue_size": 7}},
    },
    "parameters": {"shared_memory": {"string_value": "on"}},
    "response_cache": {"enable": True},
}
GRPC_CONFIG = {
    "name": "Str",
    "version_policy": {"latest": {"num_versions": 1}},
    "max_batch_size": 8,
    "input": [
        {"name": "s", "data_type": "TYPE_STRING", "dims": ["-1"]},
        {"name": "n", "data_type": "TYPE_INT32", "dims": ["1"], "optional": True},
    ],
    "output": [{"name": "u", "data_type": "TYPE_STRING", "dims": ["-1"]}],
    "instance_group": [{"name": "Str", "count": 1, "kind": "KIND_CPU"}],
    "dynamic_batching": {
        "preferred_batch_size": [4, 8],
        "max_queue_delay_microseconds": "100",
        "priority_levels": "2",
        "default_priority_level": "1",
        "default_queue_policy": {
            "timeout_action": "DELAY",
            "default_timeout_microseconds": "5",
            "allow_timeout_override": True,
            "max_queue_size": 3,
        },
        "priority_queue_policy": {"2": {"max_queue_size": 7}},
    },
    "parameters": {"shared_memory": {"string_value": "on"}},
    "response_cache": {"enable": True},
    "backend": "python",
}


@pytest.mark.parametrize("raw", [HTTP_CONFIG, GRPC_CONFIG], ids=["http", "grpc"])
def test_http_and_grpc_forms_parse_alike(raw):
    config = parse_model_config(raw)
    assert config.model_name == "Str"
    assert config.model_version == 1
    assert (config.max_batch_size, config.batching, config.decoupled) == (8, True, False)
    assert config.inputs == [
        TensorSpec("s", (-1,), np.bytes_, optional=False),
        TensorSpec("n", (1,), np.int32, optional=True),
    ]
    assert config.outputs == [TensorSpec("u", (-1,), np.bytes_)]
    assert config.instance_count == 1
    assert config.response_cache == ResponseCache(enable=True)
    assert config.backend_parameters == {"shared_memory": "on"}
    assert config.batcher == DynamicBatcher(
        max_queue_delay_microseconds=100,
        preferred_batch_size=[4, 8],
        preserve_ordering=False,
        priority_levels=2,
        default_priority_level=1,
        default_queue_policy=QueuePolicy(
            timeout_action=TimeoutAction.DELAY,
            default_timeout_microseconds=5,
            allow_timeout_override=True,
            max_queue_size=3,
        ),
        priority_queue_policy={2: QueuePolicy(max_queue_size=7)},
    )


def test_minimal_non_batching_config():
    config = parse_model_config({"name": "M", "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": ["3"]}]})
    assert (config.max_batch_size, config.batching, config.batcher) == (0, False, None)
    assert config.inputs == [TensorSpec("x", (3,), np.float32)]
    assert config.outputs == []
    assert config.instance_count == 1


def test_decoupled_and_instances():
    config = parse_model_config(
        {
            "name": "M",
            "model_transaction_policy": {"decoupled": True},
            "instance_group": [{"count": 2}, {"count": "3"}],
        }
    )
    assert config.decoupled and config.instance_count == 5


def test_requested_version_kept():
    assert parse_model_config({"name": "M"}, "3").model_version == 3


def test_dtype_numpy_cannot_hold_kept_by_name():
    config = parse_model_config({"name": "M", "input": [{"name": "x", "data_type": "TYPE_BF16", "dims": [2]}]})
    assert config.inputs[0].dtype == "TYPE_BF16"


@pytest.mark.parametrize("raw", [{}, {"name": "M", "max_batch_size": "many"}, {"name": "M", "input": [{}]}])
def test_malformed(raw):
    with pytest.raises(PyTritonClientError, match="cannot parse the model configuration"):
        parse_model_config(raw)

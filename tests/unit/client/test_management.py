"""Management answers of tritonclient.grpc (protobuf) come out in the shape of Triton's HTTP JSON."""

from tritonclient.grpc import model_config_pb2, service_pb2

from pytriton_like.client.management import index_entries, message_to_dict


def test_a_model_config_message_as_http_writes_it():
    config = model_config_pb2.ModelConfig(name="M", backend="python", max_batch_size=4)
    config.version_policy.specific.versions.extend([1, 2])
    config.input.add(name="x", data_type=model_config_pb2.TYPE_FP32, dims=[-1])
    config.parameters["k"].string_value = "v"
    as_dict = message_to_dict(config)
    assert as_dict["version_policy"] == {"specific": {"versions": [1, 2]}}  # only the oneof member set
    assert as_dict["input"][0]["dims"] == [-1]  # int64 as a number, not "-1"
    assert as_dict["input"][0]["data_type"] == "TYPE_FP32"
    assert as_dict["input"][0]["optional"] is False  # defaults written too
    assert as_dict["parameters"] == {"k": {"string_value": "v"}}
    assert as_dict["max_batch_size"] == 4
    assert "response_cache" not in as_dict and "dynamic_batching" not in as_dict  # unset sub-messages: left out


def test_statistics_counts_are_numbers():
    stats = service_pb2.ModelStatisticsResponse()
    model = stats.model_stats.add(name="M", version="1", inference_count=3)
    model.inference_stats.success.count = 3
    as_dict = message_to_dict(stats)
    assert as_dict["model_stats"][0]["inference_count"] == 3
    assert as_dict["model_stats"][0]["inference_stats"]["success"] == {"count": 3, "ns": 0}


def test_index_entries_leave_out_what_is_empty_as_http_does():
    index = service_pb2.RepositoryIndexResponse()
    index.models.add(name="loaded", version="1", state="READY")
    index.models.add(name="never_loaded")
    assert index_entries(index) == [{"name": "loaded", "version": "1", "state": "READY"}, {"name": "never_loaded"}]
    http = [{"name": "a"}]
    assert index_entries(http) is http

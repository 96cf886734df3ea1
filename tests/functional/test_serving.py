"""Bound callables served by the real tritonserver, called with tritonclient over HTTP and gRPC."""

import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from pytriton_like.model_config import DynamicBatcher, ModelConfig, QueuePolicy, Tensor, TimeoutAction
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config

PROTOCOLS = ["http", "grpc"]


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


def fail(requests):
    raise ValueError(f"cannot take {len(requests)} requests today")


def make_instance(number):
    def answer(requests):
        return [{"y": np.full_like(request["x"], number)} for request in requests]

    return answer


FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=16))
        triton.bind(model_name="Fail", infer_func=fail, inputs=FLOAT_IN, outputs=FLOAT_OUT)
        triton.bind(model_name="Three", infer_func=[make_instance(n) for n in (1, 2, 3)], inputs=FLOAT_IN,
                    outputs=FLOAT_OUT, config=ModelConfig(max_batch_size=1))
        triton.run()
        yield triton, config


def client_for(protocol, config):
    if protocol == "http":
        return httpclient, httpclient.InferenceServerClient(f"127.0.0.1:{config.http_port}", concurrency=1)
    return grpcclient, grpcclient.InferenceServerClient(f"127.0.0.1:{config.grpc_port}")


def infer(protocol, config, model, array, name="x"):
    module, client = client_for(protocol, config)
    try:
        tensor = module.InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        return client.infer(model, [tensor]).as_numpy("y")
    finally:
        client.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_small_and_large_tensors_round_trip(server, protocol):
    _, config = server
    small = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(infer(protocol, config, "Double", small), small * 2)
    # 8 MiB crosses the relay through shared memory.
    large = np.random.default_rng(0).random((2, 1 << 20), dtype=np.float32)
    np.testing.assert_array_equal(infer(protocol, config, "Double", large), large * 2)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_callable_error_reaches_client_and_server_keeps_serving(server, protocol):
    _, config = server
    with pytest.raises(InferenceServerException) as raised:
        infer(protocol, config, "Fail", np.ones((1, 2), np.float32))
    assert "ValueError" in str(raised.value)
    assert "cannot take 1 requests today" in str(raised.value)
    np.testing.assert_array_equal(infer(protocol, config, "Double", np.ones((1, 2), np.float32)), [[2, 2]])


def test_list_of_callables_serves_concurrent_requests_on_every_instance(server):
    _, config = server
    seen = set()
    lock = threading.Lock()

    def call_many():
        for _ in range(6):
            value = infer("grpc", config, "Three", np.zeros((1, 1), np.float32))[0, 0]
            with lock:
                seen.add(float(value))

    threads = [threading.Thread(target=call_many) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {1.0, 2.0, 3.0}


def test_bind_after_run_and_default_tensor_names(server):
    triton, config = server
    triton.bind(
        model_name="Late",
        infer_func=lambda requests: [{"OUTPUT_1": request["INPUT_1"] + 1} for request in requests],
        inputs=[Tensor(dtype=np.int64, shape=(2,))],
        outputs=[Tensor(dtype=np.int64, shape=(2,))],
    )
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{config.grpc_port}")
    tensor = grpcclient.InferInput("INPUT_1", [1, 2], "INT64")
    tensor.set_data_from_numpy(np.array([[5, 6]], dtype=np.int64))
    result = client.infer("Late", [tensor]).as_numpy("OUTPUT_1")
    client.close()
    np.testing.assert_array_equal(result, [[6, 7]])


def slow_double(requests):
    time.sleep(0.005)  # ten times the relay spin below
    return double(requests)


@pytest.mark.parametrize("spin_us, in_flight", [(None, None), (500, 1), (0, 2), (0, 4)])
def test_answers_are_the_same_whatever_the_relay_spin_and_batches_in_flight(spin_us, in_flight):
    config = free_config(relay_spin_us=spin_us, relay_in_flight=in_flight)
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=16))
        triton.bind(model_name="Slow", infer_func=slow_double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=16))
        triton.run()
        for step in range(20):
            array = np.full((1, 3), step, np.float32)
            for protocol in PROTOCOLS:
                for model in ("Double", "Slow"):
                    np.testing.assert_array_equal(infer(protocol, config, model, array), array * 2)


def test_every_dynamic_batcher_field_reaches_triton():
    batcher = DynamicBatcher(
        max_queue_delay_microseconds=250,
        preferred_batch_size=[2, 4],
        priority_levels=3,
        default_priority_level=2,
        default_queue_policy=QueuePolicy(
            timeout_action=TimeoutAction.DELAY, default_timeout_microseconds=1000, allow_timeout_override=True,
            max_queue_size=7,
        ),
        priority_queue_policy={1: QueuePolicy(max_queue_size=3, default_timeout_microseconds=10)},
    )
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind(model_name="Batched", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=8, batcher=batcher))
        # Triton allows preserve_ordering only with one priority level.
        triton.bind(model_name="Ordered", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=8, batcher=DynamicBatcher(preserve_ordering=True)))
        triton.run()
        client = httpclient.InferenceServerClient(f"127.0.0.1:{config.http_port}")
        loaded = client.get_model_config("Batched")
        ordered = client.get_model_config("Ordered")
        client.close()
    assert ordered["dynamic_batching"]["preserve_ordering"] is True
    assert loaded["max_batch_size"] == 8
    dynamic = loaded["dynamic_batching"]
    assert int(dynamic["max_queue_delay_microseconds"]) == 250
    assert [int(size) for size in dynamic["preferred_batch_size"]] == [2, 4]
    assert dynamic["preserve_ordering"] is False
    assert int(dynamic["priority_levels"]) == 3
    assert int(dynamic["default_priority_level"]) == 2
    policy = dynamic["default_queue_policy"]
    assert policy["timeout_action"] == "DELAY" and int(policy["default_timeout_microseconds"]) == 1000
    assert policy["allow_timeout_override"] is True and int(policy["max_queue_size"]) == 7
    level_one = dynamic["priority_queue_policy"]["1"]
    assert int(level_one["max_queue_size"]) == 3 and int(level_one["default_timeout_microseconds"]) == 10


def test_non_batching_model():
    config = free_config()
    with Triton(config=config) as triton:
        triton.bind(model_name="Flat", infer_func=double, inputs=[Tensor(name="x", dtype=np.float32, shape=(3,))],
                    outputs=FLOAT_OUT, config=ModelConfig(batching=False))
        triton.run()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{config.grpc_port}")
        tensor = grpcclient.InferInput("x", [3], "FP32")
        tensor.set_data_from_numpy(np.array([1, 2, 3], np.float32))
        result = client.infer("Flat", [tensor]).as_numpy("y")
        max_batch = client.get_model_config("Flat").config.max_batch_size
        client.close()
    np.testing.assert_array_equal(result, [2, 4, 6])
    assert max_batch == 0

"""Triton's response cache in front of a bound callable: a repeated request never reaches it."""

import threading

import numpy as np
import pytest

from pytriton_like.client import ModelClient
from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of

FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]


class CountingDouble:
    """y = 2x; counts the requests that reach it."""

    def __init__(self):
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, requests):
        with self._lock:
            self.calls += len(requests)
        return [{"y": request["x"] * 2} for request in requests]


@pytest.fixture(scope="module")
def server():
    counting = {"http": CountingDouble(), "grpc": CountingDouble()}
    config = free_config(cache_config=["local,size=1048576"])
    with checked_for_leaks(), Triton(config=config) as triton:
        for protocol, func in counting.items():
            triton.bind(model_name=f"Cached_{protocol}", infer_func=func, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                        config=ModelConfig(max_batch_size=8, response_cache=True))
        triton.run()
        yield config, counting


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_repeated_request_is_answered_from_the_cache(server, protocol):
    config, counting = server
    func = counting[protocol]
    url = url_of(config, protocol)
    with ModelClient(url, f"Cached_{protocol}", init_timeout_s=30) as client:
        first = client.infer_sample(np.array([1.0, 2.0], np.float32))
        assert func.calls == 1
        again = client.infer_sample(np.array([1.0, 2.0], np.float32))
        assert func.calls == 1  # the cache answered
        np.testing.assert_array_equal(again["y"], first["y"])
        other = client.infer_sample(np.array([3.0, 4.0], np.float32))
        assert func.calls == 2  # a different request reaches the callable
        np.testing.assert_array_equal(other["y"], [6.0, 8.0])


def test_response_cache_without_a_cache_configured_is_an_error():
    with Triton(config=free_config()) as triton:
        with pytest.raises(PyTritonValidationError, match=r"response_cache=True needs a cache in TritonConfig"):
            triton.bind(model_name="Cached", infer_func=CountingDouble(), inputs=FLOAT_IN, outputs=FLOAT_OUT,
                        config=ModelConfig(response_cache=True))


def test_response_cache_of_a_decoupled_model_is_an_error():
    with Triton(config=free_config(cache_config=["local,size=1048576"])) as triton:
        with pytest.raises(PyTritonValidationError, match=r"response cache does not support decoupled models"):
            triton.bind(model_name="Cached", infer_func=CountingDouble(), inputs=FLOAT_IN, outputs=FLOAT_OUT,
                        config=ModelConfig(response_cache=True, decoupled=True))

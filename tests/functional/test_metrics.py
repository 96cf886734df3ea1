"""Triton's metrics endpoint shows our models: Triton's own counters and the relay's."""

import time

import numpy as np
import pytest

from pytriton_like.client import ModelClient
from pytriton_like.client.exceptions import PyTritonClientInferenceServerError
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, scrape, url_of, value

FLOAT_IN = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
FLOAT_OUT = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
GOOD, FAILING = 5, 3
# Scrapes retry up to this long for the relay's counters to reach the requests sent.
_SCRAPE_DEADLINE_S = 20


def double_unless_negative(requests):
    if any(float(request["x"].reshape(-1)[0]) < 0 for request in requests):
        raise ValueError("negative input")
    return [{"y": request["x"] * 2} for request in requests]


@pytest.fixture(scope="module")
def server():
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        # two instances: each stub registers the same metrics, which must add up
        triton.bind(model_name="Metered", infer_func=[double_unless_negative] * 2, inputs=FLOAT_IN,
                    outputs=FLOAT_OUT, config=ModelConfig(max_batch_size=8))
        triton.run()
        with ModelClient(url_of(config, "http"), "Metered", init_timeout_s=30) as client:
            for index in range(GOOD):
                client.infer_sample(np.array([index], np.float32))
            for _ in range(FAILING):
                with pytest.raises(PyTritonClientInferenceServerError, match="negative input"):
                    client.infer_sample(np.array([-1.0], np.float32))
        yield config


def scrape_when_published(port: int) -> dict:
    """A scrape once the relay published every request (it publishes once a second)."""
    deadline = time.monotonic() + _SCRAPE_DEADLINE_S
    while True:
        samples = scrape(port)
        if value(samples, "pytriton_like_requests", model="Metered", version="1") == GOOD + FAILING:
            return samples
        assert time.monotonic() < deadline, "the relay's request count never reached the requests sent"
        time.sleep(0.2)


def test_triton_counts_our_model(server):
    samples = scrape(server.metrics_port)
    labels = {"model": "Metered", "version": "1"}
    # The relay reports each request the callable failed as failed (docs/metrics.md).
    assert value(samples, "nv_inference_request_success", **labels) == GOOD
    assert value(samples, "nv_inference_request_failure", reason="BACKEND", **labels) == FAILING
    assert value(samples, "nv_inference_count", **labels) == GOOD
    assert value(samples, "nv_inference_exec_count", **labels) == GOOD + FAILING


def test_relay_counts_requests_failures_and_time(server):
    samples = scrape_when_published(server.metrics_port)
    labels = {"model": "Metered", "version": "1"}
    assert value(samples, "pytriton_like_batches", **labels) == GOOD + FAILING  # sequential: one request each
    assert value(samples, "pytriton_like_request_failures", reason="callable", **labels) == FAILING
    assert value(samples, "pytriton_like_request_failures", reason="relay", **labels) == 0
    assert value(samples, "pytriton_like_callable_duration_us", **labels) > 0
    assert value(samples, "pytriton_like_relay_duration_us", **labels) > 0

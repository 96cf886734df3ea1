"""Readiness wait: repository index parsing, backoff, and the verdict when time is up."""

import pytest

from pytriton_like.client.error_mapping import ErrorContext
from pytriton_like.client.exceptions import PyTritonClientModelUnavailableError, PyTritonClientTimeoutError
from pytriton_like.client.readiness import ModelState, Readiness, ReadinessWaiter, model_state_from_index

HTTP_INDEX = [
    {"name": "A", "version": "1", "state": "READY"},
    {"name": "A", "version": "10", "state": "LOADING"},
    {"name": "A", "version": "2", "state": "READY"},
    {"name": "B", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
    {"name": "C"},  # listed without versions: not loaded
]


@pytest.mark.parametrize(
    "name, version, expected",
    [
        ("A", None, (ModelState.LOADING, None)),  # 10 is the latest, numerically
        ("A", "2", (ModelState.READY, None)),
        ("A", "3", (ModelState.UNAVAILABLE, None)),
        ("B", None, (ModelState.UNAVAILABLE, "unloaded")),
        ("C", None, (ModelState.UNAVAILABLE, None)),
        ("Z", None, (ModelState.UNAVAILABLE, None)),
    ],
)
def test_model_state_from_index(name, version, expected):
    assert model_state_from_index(HTTP_INDEX, name, version) == expected


def test_entry_without_state_is_loading():
    assert model_state_from_index([{"name": "A", "version": "1"}], "A", None) == (ModelState.LOADING, None)


def test_empty_index():
    assert model_state_from_index([], "A", None) == (ModelState.UNAVAILABLE, None)


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


CONTEXT = ErrorContext(operation="wait for readiness", model_name="M", model_version=None, url="http://h:8000")


def make_waiter(timeout_s=1.0):
    clock = FakeClock()
    return ReadinessWaiter(timeout_s, CONTEXT, clock=clock), clock


def test_backoff_doubles_up_to_half_a_second_and_never_past_the_deadline():
    waiter, clock = make_waiter(timeout_s=10.0)
    delays = [waiter.next_delay() for _ in range(8)]
    assert delays == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.5]
    clock.now += 9.9
    assert waiter.next_delay() == pytest.approx(0.1)


def test_deadline():
    waiter, clock = make_waiter(timeout_s=1.0)
    assert not waiter.expired() and waiter.remaining() == 1.0
    clock.now += 1.0
    assert waiter.expired() and waiter.remaining() == 0.0


def test_server_never_reachable_is_a_timeout_naming_the_last_error():
    waiter, _ = make_waiter()
    refused = PyTritonClientTimeoutError("connection refused")
    waiter.record_error(refused)
    assert not waiter.needs_model_state()
    error = waiter.failure()
    assert isinstance(error, PyTritonClientTimeoutError)
    assert error.message == (
        "Waiting for server to be ready timed out: server at http://h:8000 was not ready within 1 s; last error: connection refused"
    )
    assert error.timeout_s == 1.0 and error.model_name == "M"
    assert waiter.last_error is refused


def test_server_not_ready():
    waiter, _ = make_waiter()
    waiter.record(Readiness.SERVER_NOT_READY)
    assert waiter.failure().message == "Waiting for server to be ready timed out: server at http://h:8000 was not ready within 1 s"
    assert waiter.last_error is None


def test_model_missing_is_unavailable():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    assert waiter.needs_model_state()
    error = waiter.failure((ModelState.UNAVAILABLE, None))
    assert isinstance(error, PyTritonClientModelUnavailableError)
    assert "model 'M' (latest version) is not available at http://h:8000" in error.message


def test_model_failed_to_load_gives_the_reason():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    error = waiter.failure((ModelState.UNAVAILABLE, "load failed: bad config"))
    assert error.message.endswith(": load failed: bad config")


def test_model_still_loading_is_a_timeout():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    error = waiter.failure((ModelState.LOADING, None))
    assert isinstance(error, PyTritonClientTimeoutError)
    assert error.message.endswith("was not ready within 1 s (state LOADING)")


def test_model_not_ready_and_index_unknown_is_a_timeout():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    assert isinstance(waiter.failure(None), PyTritonClientTimeoutError)


def test_a_failed_probe_after_the_server_was_seen_up_keeps_the_model_verdict():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    cut_short = PyTritonClientTimeoutError("probe timed out")
    waiter.record_error(cut_short)  # e.g. the last probe, squeezed by the deadline
    assert waiter.needs_model_state()
    assert waiter.last_error is cut_short
    assert isinstance(waiter.failure((ModelState.UNAVAILABLE, None)), PyTritonClientModelUnavailableError)

"""Readiness wait: repository index parsing, backoff, and the verdict when time is up."""

import logging

import pytest

from pytriton_like.client.error_mapping import ErrorContext
from pytriton_like.client.exceptions import (
    PyTritonClientInferenceServerError,
    PyTritonClientModelUnavailableError,
    PyTritonClientModelUnavailableTimeoutError,
    PyTritonClientTimeoutError,
)
from pytriton_like.client.readiness import (
    LOAD_GRACE_S,
    REPORT_EVERY_S,
    IndexAnswer,
    ModelState,
    Readiness,
    ReadinessWaiter,
    model_state_from_index,
    why_unavailable,
)

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


def test_model_missing_is_unavailable_and_a_timeout_naming_the_models_the_server_has():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    assert waiter.needs_model_state()
    error = waiter.failure(IndexAnswer(entries=[{"name": "Double"}, {"name": "Mm"}]))
    # PyTriton raises a timeout when the wait ends; the index says the model is unavailable: both
    assert isinstance(error, PyTritonClientModelUnavailableTimeoutError)
    assert isinstance(error, PyTritonClientTimeoutError) and isinstance(error, PyTritonClientModelUnavailableError)
    assert error.message == (
        "Waiting for model M/<latest> to be ready timed out: model 'M' is not in the repository of the server at http://h:8000 (did you mean 'Mm'?);"
        " the server has: Double, Mm; waited 1 s for it"
    )
    assert error.timeout_s == 1.0 and error.model_name == "M"


def test_model_failed_to_load_gives_the_reason():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    entries = [{"name": "M", "version": "1", "state": "UNAVAILABLE", "reason": "load failed: bad config"}]
    error = waiter.failure(IndexAnswer(entries=entries))
    assert error.message == (
        "Waiting for model M/<latest> to be ready timed out: model 'M' (latest version) at http://h:8000 is not available: load failed: bad config; waited 1 s for it"
    )


def test_model_still_loading_is_a_timeout():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    error = waiter.failure(IndexAnswer(entries=[{"name": "M", "version": "1", "state": "LOADING"}]))
    assert type(error) is PyTritonClientTimeoutError
    assert error.message.endswith("was not ready within 1 s (state LOADING)")


def test_model_not_ready_and_index_unknown_is_a_timeout():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    assert type(waiter.failure(None)) is PyTritonClientTimeoutError


def test_index_refused_is_a_timeout_saying_what_the_token_would_tell():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    refused = PyTritonClientInferenceServerError(
        "repository index request of model 'M' (latest version) at http://h:8000 failed: "
        "This API is restricted, expecting header 'triton-access-token'"
    )
    error = waiter.failure(IndexAnswer(error=refused))
    assert type(error) is PyTritonClientTimeoutError
    assert error.message == (
        "Waiting for model M/<latest> to be ready timed out: model 'M' (latest version) at http://h:8000 was not ready within 1 s; the server did not show its"
        " repository index, which would tell whether it has the model (This API is restricted, expecting header"
        " 'triton-access-token'); pass access_token= to the client (see docs/security.md)"
    )


def test_a_failed_probe_after_the_server_was_seen_up_keeps_the_model_verdict():
    waiter, _ = make_waiter()
    waiter.record(Readiness.MODEL_NOT_READY)
    cut_short = PyTritonClientTimeoutError("probe timed out")
    waiter.record_error(cut_short)  # e.g. the last probe, squeezed by the deadline
    assert waiter.needs_model_state()
    assert waiter.last_error is cut_short
    assert isinstance(waiter.failure(IndexAnswer(entries=[])), PyTritonClientModelUnavailableError)


# -- why a model is unavailable, from the index ------------------------------------------------


@pytest.mark.parametrize(
    "name, version, expected",
    [
        ("A", None, None),  # loading: on its way
        ("A", "2", None),  # ready
        ("A", "3", "model 'A' has no version 3 at U; its versions: 1, 2, 10"),
        ("B", None, "model 'B' (latest version) at U is not available: unloaded"),
        ("C", None, "model 'C' is in the repository of the server at U but not loaded"),
        ("c", None, "model 'c' is not in the repository of the server at U (did you mean 'C'?); the server has: A, B"),
        ("Zebra", None, "model 'Zebra' is not in the repository of the server at U; the server has: A, B, C"),
    ],
)
def test_why_unavailable(name, version, expected):
    why = why_unavailable(HTTP_INDEX, name, version, "U")
    assert why == expected if expected is None else why.startswith(expected)


def test_why_unavailable_with_an_empty_server_and_with_many_models():
    nothing = why_unavailable([], "M", None, "U")
    assert nothing == "model 'M' is not in the repository of the server at U; the server has no models"
    many = [{"name": f"m{index:02}"} for index in range(25)]
    assert why_unavailable(many, "zzz", None, "U").endswith("the server has: m00, m01, m02, m03, m04, m05, m06, m07,"
                                                            " m08, m09, m10, m11, m12, m13, m14, m15, m16, m17, m18,"
                                                            " m19 and 5 more")


# -- warnings while waiting --------------------------------------------------------------------


def test_a_missing_model_is_reported_at_once_then_every_10_s(caplog):
    waiter, clock = make_waiter(timeout_s=30.0)
    assert not waiter.report_due()  # nothing known yet
    waiter.record(Readiness.MODEL_NOT_READY)
    assert waiter.report_due()
    with caplog.at_level(logging.WARNING, logger="pytriton_like.client.readiness"):
        waiter.report(IndexAnswer(entries=[{"name": "AddSub"}, {"name": "Double"}]))
        assert not waiter.report_due()
        clock.now += REPORT_EVERY_S - 0.1
        assert not waiter.report_due()
        clock.now += 0.1
        assert waiter.report_due()
        waiter.report(IndexAnswer(entries=[{"name": "AddSub"}, {"name": "Double"}]))
    assert [record.getMessage() for record in caplog.records] == [
        "model 'M' is not in the repository of the server at http://h:8000; the server has: AddSub, Double;"
        " waiting up to 30 s more for it (timeout 30 s, in case it is bound or loaded meanwhile)",
        "model 'M' is not in the repository of the server at http://h:8000; the server has: AddSub, Double;"
        " waiting up to 20 s more for it (timeout 30 s, in case it is bound or loaded meanwhile)",
    ]
    assert all(record.levelno == logging.WARNING for record in caplog.records)


def test_a_model_listed_but_not_loaded_is_reported_once_the_server_had_time_to_load_it(caplog):
    # a server that just opened its endpoints lists its models, then loads them (make demo's client saw it)
    waiter, clock = make_waiter(timeout_s=30.0)
    waiter.record(Readiness.SERVER_NOT_READY)
    clock.now += 5.0  # the grace counts from the server first seen up
    waiter.record(Readiness.MODEL_NOT_READY)
    never_loaded = IndexAnswer(entries=[{"name": "M"}, {"name": "Other", "version": "1", "state": "READY"}])
    with caplog.at_level(logging.WARNING, logger="pytriton_like.client.readiness"):
        waiter.report(never_loaded)
        assert caplog.records == []
        clock.now += LOAD_GRACE_S - 0.1
        assert not waiter.report_due()
        clock.now += 0.1
        assert waiter.report_due()
        waiter.report(never_loaded)
        clock.now += REPORT_EVERY_S - 0.1
        assert not waiter.report_due()  # then every 10 s, as for any other reason
    assert [record.getMessage() for record in caplog.records] == [
        "model 'M' is in the repository of the server at http://h:8000 but not loaded (load it with the client's"
        " or Triton's load_model()); waiting up to 23 s more for it (timeout 30 s, in case it is bound or loaded"
        " meanwhile)",
    ]


def test_a_loading_model_is_not_reported(caplog):
    waiter, _ = make_waiter(timeout_s=30.0)
    waiter.record(Readiness.MODEL_NOT_READY)
    with caplog.at_level(logging.WARNING, logger="pytriton_like.client.readiness"):
        waiter.report(IndexAnswer(entries=[{"name": "M", "version": "1", "state": "LOADING"}]))
    assert caplog.records == []
    assert not waiter.report_due()  # asked again in 10 s


def test_a_refused_index_is_reported_with_what_can_be_said(caplog):
    waiter, _ = make_waiter(timeout_s=5.0)
    waiter.record(Readiness.MODEL_NOT_READY)
    refused = PyTritonClientModelUnavailableError(
        "repository index request of model 'M' (latest version) at http://h:8000 failed: server unavailable: "
        "This API is restricted, expecting header 'triton-grpc-protocol-triton-access-token'"
    )
    with caplog.at_level(logging.WARNING, logger="pytriton_like.client.readiness"):
        waiter.report(IndexAnswer(error=refused))
    assert caplog.records[0].getMessage() == (
        "model 'M' (latest version) at http://h:8000 is not ready; the server did not show its repository index,"
        " which would tell whether it has the model (server unavailable: This API is restricted, expecting header"
        " 'triton-grpc-protocol-triton-access-token'); pass access_token= to the client (see docs/security.md);"
        " waiting up to 5 s more for it (timeout 5 s, in case it is bound or loaded meanwhile)"
    )


def test_a_server_not_up_is_not_reported():
    waiter, _ = make_waiter()
    waiter.record(Readiness.SERVER_NOT_READY)
    assert not waiter.report_due()

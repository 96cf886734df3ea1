"""The stop's wait for the models to unload: it gives up on a model Triton holds once nothing is
in flight, sooner where only bound models are left, and says which model it gave up on."""

import logging

import pytest

from pytriton_like.server import shutdown


class Holding:
    """A server's control whose models named in ``held`` stay loaded for good."""

    def __init__(self, held):
        self.held = list(held)

    def loaded(self, names):
        return sorted(set(names) & set(self.held))


@pytest.fixture(autouse=True)
def short_patience(monkeypatch):
    monkeypatch.setattr(shutdown, "_IDLE_BEFORE_GIVING_UP_BOUND_S", 0.05)
    monkeypatch.setattr(shutdown, "_IDLE_BEFORE_GIVING_UP_S", 0.2)


def test_models_that_unload_are_waited_for_and_nothing_is_said(caplog):
    assert shutdown._wait_unloaded(Holding([]), ["Count"], busy=lambda: False, idle=lambda name: True, timeout_s=5)
    assert caplog.text == ""


def test_a_bound_model_held_with_nothing_in_flight_is_given_up_on_naming_the_cause(caplog):
    with caplog.at_level(logging.WARNING, logger=shutdown.__name__):
        unloaded = shutdown._wait_unloaded(
            Holding(["Count"]), ["Double", "Count"], busy=lambda: False, idle=lambda name: True, timeout_s=5
        )
    assert unloaded is False
    assert caplog.messages == [
        "tritonserver has not finished unloading Count although no request is in flight for 0 s (a gRPC stream its"
        " client cancelled holds a decoupled model: docs/known_issues.md); stopping it"
    ]


def test_a_model_of_the_users_repository_is_given_the_longer_wait_and_no_cause(caplog):
    bound = {"Count"}
    with caplog.at_level(logging.WARNING, logger=shutdown.__name__):
        unloaded = shutdown._wait_unloaded(
            Holding(["Count", "onnx_model"]), ["Count", "onnx_model"], busy=lambda: False,
            idle=lambda name: name in bound, timeout_s=5,
        )
    assert unloaded is False
    (message,) = caplog.messages
    assert message.startswith("tritonserver has not finished unloading Count, onnx_model although")
    assert "gRPC stream" not in message


def test_the_wait_goes_on_while_a_batch_is_in_flight():
    answers = iter([True, True, True])  # busy for three questions, then idle
    asked = []

    def busy():
        asked.append(1)
        return next(answers, False)

    assert not shutdown._wait_unloaded(Holding(["Count"]), ["Count"], busy=busy, idle=lambda name: True, timeout_s=5)
    assert len(asked) > 3


def test_a_model_still_busy_at_the_timeout_is_said_to_be(caplog):
    with caplog.at_level(logging.WARNING, logger=shutdown.__name__):
        unloaded = shutdown._wait_unloaded(
            Holding(["Slow"]), ["Slow"], busy=lambda: True, idle=lambda name: False, timeout_s=0.1
        )
    assert unloaded is False
    assert caplog.messages == ["a model did not unload within 0 s (a callable still running?)"]

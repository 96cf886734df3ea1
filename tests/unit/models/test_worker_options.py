"""WorkerOptions: its checks, and the device each worker gets."""

import pytest

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.models.worker_options import WorkerOptions
from pytriton_like.supervisor import RestartPolicy


def test_defaults():
    options = WorkerOptions()
    assert (options.start_method, options.devices, options.max_restarts, options.restart_window_s) == ("spawn", (), None, None)
    assert options.restart_policy() == RestartPolicy()  # the policy's own defaults, said there only


def test_the_bound_is_mapped_onto_the_restart_policy():
    policy = WorkerOptions(max_restarts=3, restart_window_s=30).restart_policy()
    assert (policy.max_restarts, policy.window_s, policy.grace_s) == (3, 30.0, RestartPolicy().grace_s)


def test_devices_are_handed_out_in_turn():
    options = WorkerOptions(devices=[0, "1"])
    assert options.devices == ("0", "1")
    assert [options.device_of(index) for index in range(3)] == ["0", "1", "0"]
    assert WorkerOptions().device_of(0) is None


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"start_method": "forkserver"}, "start_method must be one of spawn, fork"),
        ({"devices": "0"}, "takes a list of device ids"),
        ({"setup_timeout_s": 0}, "setup_timeout_s must be > 0"),
        ({"max_restarts": -1}, "WorkerOptions.max_restarts must be a whole number >= 0, got -1"),
        ({"max_restarts": 2.5}, "WorkerOptions.max_restarts must be a whole number >= 0, got 2.5"),
        ({"max_restarts": True}, "WorkerOptions.max_restarts must be a whole number >= 0, got True"),
        ({"restart_window_s": 0}, "WorkerOptions.restart_window_s must be > 0"),
    ],
)
def test_bad_options_are_refused_naming_the_field(fields, message):
    with pytest.raises(PyTritonValidationError, match=message):
        WorkerOptions(**fields)

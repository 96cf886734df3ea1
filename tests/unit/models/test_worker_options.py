"""WorkerOptions: its checks, and the device each worker gets."""

import pytest

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.models.worker_options import WorkerOptions


def test_defaults():
    options = WorkerOptions()
    assert (options.start_method, options.devices, options.max_restarts, options.restart_window_s) == ("spawn", (), 5, 300.0)


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
        ({"max_restarts": -1}, "max_restarts must be a whole number >= 0, got -1"),
        ({"max_restarts": 2.5}, "max_restarts must be a whole number >= 0, got 2.5"),
        ({"max_restarts": True}, "max_restarts must be a whole number >= 0, got True"),
        ({"restart_window_s": 0}, "restart_window_s must be > 0"),
    ],
)
def test_bad_options_are_refused_naming_the_field(fields, message):
    with pytest.raises(PyTritonValidationError, match=message):
        WorkerOptions(**fields)

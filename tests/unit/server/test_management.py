"""ServerModels: a load or unload asked while tritonserver is being started again waits for it, and
one cut short by the server's death is made again once it serves."""

import threading

import pytest

from pytriton_like.exceptions import PyTritonServerError
from pytriton_like.server import management
from pytriton_like.server.control import ControlError
from pytriton_like.server.management import ServerModels


class FakeServer:
    def __init__(self, serving: bool):
        self.up = threading.Event()
        if serving:
            self.up.set()

    def serving(self) -> bool:
        return self.up.is_set()

    def wait_serving(self, timeout_s: float) -> bool:
        return self.up.wait(timeout_s)

    def log_tail(self) -> str:
        return "the log"

    def protect_stub_regions(self) -> None:
        pass

    def models_changed(self) -> None:
        self.changes = getattr(self, "changes", 0) + 1


class FakeControl:
    """Fails the first ``failures`` loads, as a server that died under them."""

    def __init__(self, server: FakeServer, failures: int = 0):
        self.server, self.failures, self.loads = server, failures, []

    def load(self, name, timeout_s, config=None, files=None):
        if self.failures:
            self.failures -= 1
            self.server.up.clear()  # it died: the supervisor starts it again
            threading.Timer(0.2, self.server.up.set).start()
            raise ControlError("cannot reach the server")
        self.loads.append(name)


def test_a_load_asked_while_the_server_restarts_waits_for_it():
    server = FakeServer(serving=False)
    control = FakeControl(server)
    models = ServerModels(control, server)
    threading.Timer(0.2, server.up.set).start()
    models.load("Late")
    assert control.loads == ["Late"] and models.loaded == ["Late"]


def test_a_load_cut_short_by_the_servers_death_is_made_again():
    server = FakeServer(serving=True)
    control = FakeControl(server, failures=1)
    ServerModels(control, server).load("Late")
    assert control.loads == ["Late"]


def test_a_refused_load_of_a_serving_server_fails_at_once():
    server = FakeServer(serving=True)

    class Refusing(FakeControl):
        def load(self, name, timeout_s, config=None, files=None):
            raise ControlError("bad config")

    with pytest.raises(PyTritonServerError, match="tritonserver failed to load model 'Late': bad config"):
        ServerModels(Refusing(server), server).load("Late")


def test_a_server_that_does_not_come_back_fails_the_load_in_time(monkeypatch):
    monkeypatch.setattr(management, "LOAD_TIMEOUT_S", 0.2)
    server = FakeServer(serving=False)
    with pytest.raises(PyTritonServerError, match="it died, and did not serve again within 0.2 s"):
        ServerModels(FakeControl(server), server).load("Late")

"""ServerModels: a load or unload asked while tritonserver is being started again waits for it, and
one cut short by the server's death is made again once it serves; an unload stuck with nothing in
flight restarts the server without the model."""

import threading
import time

import pytest

from pytriton_like.exceptions import PyTritonServerError
from pytriton_like.server import management
from pytriton_like.server.control import ControlError, ServerControl
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


class StuckControl(FakeControl):
    """A model that stays UNLOADING (tritonserver 2.51 after a cancelled gRPC stream)."""

    def __init__(self, server: FakeServer):
        super().__init__(server)
        self.unloads = []

    def unload(self, name, timeout_s):
        self.unloads.append(name)

    def wait_unloaded(self, name, timeout_s, give_up=lambda: False):
        return not poll_until(give_up, timeout_s)


def poll_until(condition, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


class RestartingServer(FakeServer):
    def restart(self, reason: str) -> None:
        self.reason = reason
        self.up.clear()
        threading.Timer(0.1, self.up.set).start()


def test_an_unload_stuck_with_nothing_in_flight_restarts_the_server_without_the_model(monkeypatch):
    monkeypatch.setattr(management, "STUCK_AFTER_S", 0.1)
    server = RestartingServer(serving=True)
    models = ServerModels(StuckControl(server), server, loaded=["Count", "Other"], idle=lambda name: True)
    models.unload("Count")
    assert "model 'Count' stayed UNLOADING" in server.reason and models.loaded == ["Other"] and server.serving()


def test_an_unload_stuck_while_the_model_still_works_waits_for_it(monkeypatch):
    monkeypatch.setattr(management, "STUCK_AFTER_S", 0.1)
    monkeypatch.setattr(management, "LOAD_TIMEOUT_S", 0.5)
    server = RestartingServer(serving=True)
    models = ServerModels(StuckControl(server), server, loaded=["Count"], idle=lambda name: False)
    models.unload("Count")  # the fake's wait ends at its timeout as unloaded: no restart was asked
    assert not hasattr(server, "reason")


def test_wait_unloaded_stops_waiting_when_told_to_give_up():
    class Unloading(ServerControl):
        def repository_index(self):
            return [{"name": "Count", "state": "UNLOADING"}]

    control = Unloading("127.0.0.1", 1)
    assert control.wait_unloaded("Count", 5, give_up=lambda: True) is False
    with pytest.raises(ControlError, match="still UNLOADING"):
        control.wait_unloaded("Count", 0.1)

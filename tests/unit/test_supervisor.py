"""The supervisor over real (tiny) processes: restarts, back-off, the bound, failed starts, forgetting."""

import os
import signal
import subprocess
import threading
import time
from typing import List, Optional

import pytest

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.supervisor import MAX_FAILED_STARTS, Child, RestartPolicy, Supervisor, describe_exit


class Sleeper(Child):
    """A ``sleep`` process; ``ready`` waits ``ready_s``, or fails while ``fail_ready`` is set."""

    def __init__(self, name: str, policy: RestartPolicy = RestartPolicy(), ready_s: float = 0.0):
        self.name = name
        self.policy = policy
        self.ready_s = ready_s
        self.fail_ready = False
        self.process: Optional[subprocess.Popen] = None
        self.pidfd = -1
        self.starts = 0
        self.events: List[str] = []
        self.changed = threading.Condition()

    def start(self) -> None:
        self._release()
        self.process = subprocess.Popen(["sleep", "60"])
        self.pidfd = os.pidfd_open(self.process.pid)
        self.starts += 1

    def ready(self) -> None:
        time.sleep(self.ready_s)
        if self.fail_ready:
            raise RuntimeError("cannot start")

    def sentinel(self) -> int:
        return self.pidfd

    def exit_cause(self) -> str:
        return describe_exit(self.process.wait())

    def stop(self) -> None:
        self._release()

    def _release(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1

    def _event(self, what: str) -> None:
        with self.changed:
            self.events.append(what)
            self.changed.notify_all()

    def lost(self) -> None:
        self._event("lost")

    def back(self) -> None:
        self._event("back")

    def given_up(self, cause: str) -> None:
        self._event(f"given up: {cause}")

    def wait_for(self, count: int, what: str, timeout_s: float = 20) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: sum(e.startswith(what) for e in self.events) >= count, timeout_s)

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)


@pytest.fixture
def supervisor():
    supervisor = Supervisor()
    children: List[Sleeper] = []
    yield supervisor, children
    supervisor.pause()
    for child in children:
        child.stop()
    supervisor.close()


def launched(supervisor, children, child: Sleeper) -> Sleeper:
    children.append(child)
    supervisor.launch(child).result(timeout=10)
    return child


def test_a_child_that_dies_is_started_again_at_once_and_told(supervisor, caplog):
    supervisor, children = supervisor
    child = launched(supervisor, children, Sleeper("sleeper"))
    first = child.process.pid
    child.kill()
    assert child.wait_for(1, "back")
    assert child.events == ["lost", "back"]
    assert child.process.pid != first and child.process.poll() is None
    assert supervisor.restarts(child) == 1
    assert "sleeper exited unexpectedly (killed by SIGKILL" in caplog.text
    assert "starting it again in 0.0 s (restart 1 of at most 5 within 300 s)" in caplog.text


def test_restarts_back_off_and_stop_at_the_bound(supervisor):
    supervisor, children = supervisor
    child = launched(supervisor, children, Sleeper("bounded", RestartPolicy(max_restarts=2, window_s=60)))
    started = time.monotonic()
    for count in (1, 2):
        child.kill()
        assert child.wait_for(count, "back")
    assert time.monotonic() - started >= RestartPolicy.backoff_s(1)  # the second waited its back-off
    child.kill()
    assert child.wait_for(1, "given up")
    time.sleep(0.5)
    assert child.starts == 3 and supervisor.restarts(child) == 2
    assert child.events[-1] == "given up: killed by SIGKILL (the kernel's out-of-memory killer, or kill -9)"


def test_backoff_doubles_up_to_its_cap():
    assert [RestartPolicy.backoff_s(n) for n in range(8)] == [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_restarts_that_fail_to_start_are_given_up_on_after_a_few(supervisor, caplog):
    supervisor, children = supervisor
    child = launched(supervisor, children, Sleeper("broken", RestartPolicy(max_restarts=100, window_s=60)))
    child.fail_ready = True
    child.kill()
    assert child.wait_for(1, "given up", timeout_s=30)
    assert child.starts == 1 + MAX_FAILED_STARTS
    assert f"its last {MAX_FAILED_STARTS} restarts in a row failed: giving up on it" in caplog.text


def test_a_slow_restart_does_not_keep_another_childs_death_unseen(supervisor):
    supervisor, children = supervisor
    slow = launched(supervisor, children, Sleeper("slow"))
    quick = launched(supervisor, children, Sleeper("quick"))
    slow.ready_s = 5.0
    slow.kill()
    assert slow.wait_for(1, "lost")
    quick.kill()
    assert quick.wait_for(1, "back", timeout_s=3)  # while slow's restart still waits for it to serve
    assert "back" not in slow.events
    assert slow.wait_for(1, "back", timeout_s=20)


def test_a_forgotten_child_is_not_started_again(supervisor):
    supervisor, children = supervisor
    child = launched(supervisor, children, Sleeper("forgotten"))
    supervisor.forget(child)
    child.kill()
    time.sleep(1)
    assert child.starts == 1 and child.events == []


def test_a_first_start_that_fails_is_the_callers_and_not_retried(supervisor):
    supervisor, children = supervisor
    child = Sleeper("first")
    child.fail_ready = True
    children.append(child)
    with pytest.raises(RuntimeError, match="cannot start"):
        supervisor.launch(child).result(timeout=10)
    time.sleep(0.5)
    assert child.starts == 1


def test_the_policy_is_checked():
    with pytest.raises(PyTritonValidationError, match="max_restarts must be a whole number >= 0"):
        RestartPolicy(max_restarts=-1)
    with pytest.raises(PyTritonValidationError, match="restart window must be > 0"):
        RestartPolicy(window_s=0)


def test_exits_in_words():
    assert describe_exit(None) == "runs"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-signal.SIGABRT) == "killed by SIGABRT"
    assert describe_exit(-signal.SIGKILL).startswith("killed by SIGKILL (the kernel's out-of-memory killer")

"""The supervision tree with fake children: the policy, each child's record and its transitions,
restarts at once or after a back-off, restart intensity per supervisor, giving up at each level,
and where spawns run."""

import os
import signal
import threading
import time
from typing import List, Optional

import pytest

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.supervisor import Child, ChildRecord, ChildState, RestartPolicy, Supervisor, describe_exit

QUICK = RestartPolicy(steady_s=0.2, first_backoff_s=0.2, max_backoff_s=0.4, grace_s=1.0)


class Fake(Child):
    """A child whose "process" is a pipe: :meth:`die` writes it, which its supervisor sees as an exit."""

    def __init__(self, name: str):
        self.name = name
        self.ready_s = 0.0
        self.fail_ready = False
        self.plan: List[str] = []  # what its next starts do: "fail", "die" (as it comes to serve), "serve"
        self.starts = 0
        self.stops = 0
        self.spawned_on: List[str] = []
        self.events: List[str] = []
        self.changed = threading.Condition()
        self._reader = self._writer = -1

    def start(self) -> None:
        self._release()
        self._reader, self._writer = os.pipe()
        self.starts += 1
        self.spawned_on.append(threading.current_thread().name)

    def ready(self) -> None:
        time.sleep(self.ready_s)
        step = self.plan.pop(0) if self.plan else "serve"
        if self.fail_ready or step == "fail":
            raise RuntimeError("cannot start")
        if step == "die":
            self.die()

    def sentinel(self) -> int:
        return self._reader

    def exit_cause(self) -> str:
        return "killed by the test"

    def stop(self) -> None:
        self.stops += 1

    def die(self) -> None:
        os.write(self._writer, b"x")

    def _release(self) -> None:
        for fd in (self._reader, self._writer):
            if fd >= 0:
                os.close(fd)
        self._reader = self._writer = -1

    def _event(self, what: str) -> None:
        with self.changed:
            self.events.append(what)
            self.changed.notify_all()

    def lost(self) -> None:
        self._event("lost")

    def back(self) -> None:
        self._event("back")

    def wait_for(self, count: int, what: str, timeout_s: float = 10) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.events.count(what) >= count, timeout_s)


class Owner:
    """What an owner of a supervisor is told when it gives up."""

    def __init__(self):
        self.causes: List[str] = []
        self.told = threading.Event()

    def given_up(self, cause: str) -> None:
        self.causes.append(cause)
        self.told.set()


@pytest.fixture
def tree():
    owner = Owner()
    made: List[Supervisor] = []

    def make(policy: RestartPolicy = QUICK) -> Supervisor:
        supervisor = Supervisor(policy, name="the run", on_given_up=owner.given_up)
        made.append(supervisor)
        return supervisor

    yield make, owner
    for supervisor in made:
        supervisor.close()


def launched(supervisor: Supervisor, *children: Fake) -> None:
    for child in children:
        supervisor.launch(child).result(timeout=10)


def wait_until(condition, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# -- the policy ----------------------------------------------------------------------------------


def test_the_policy_has_one_set_of_defaults_and_they_agree():
    policy = RestartPolicy()
    assert policy.max_backoff_s < policy.grace_s
    assert RestartPolicy.bounded() == policy
    assert RestartPolicy.bounded(3, None) == RestartPolicy(max_restarts=3)


def test_the_backoff_is_for_quick_exits_and_doubles_up_to_its_cap():
    policy = RestartPolicy(first_backoff_s=0.5, max_backoff_s=4.0, grace_s=5.0)
    assert [policy.backoff_s(n) for n in range(8)] == [0.0, 0.0, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"max_restarts": -1}, "max_restarts must be a whole number >= 0"),
        ({"max_restarts": 1.5}, "max_restarts must be a whole number >= 0"),
        ({"max_failed_starts": 0}, "max_failed_starts must be a whole number >= 1"),
        ({"window_s": 0}, "restart window must be > 0"),
        ({"steady_s": -1}, "steady_s must be 0 or more"),
        ({"first_backoff_s": 5, "max_backoff_s": 4}, "first back-off"),
        ({"max_backoff_s": 10, "grace_s": 5}, r"grace \(5 s\) must be longer than the longest back-off \(10 s\)"),
    ],
)
def test_an_inconsistent_policy_is_refused(fields, message):
    with pytest.raises(PyTritonValidationError, match=message):
        RestartPolicy(**fields)


# -- one child's record --------------------------------------------------------------------------


def test_a_record_moves_through_named_transitions_only():
    record = ChildRecord(Fake("a"))
    assert record.state is ChildState.STARTING
    assert not record.lost(0.0, QUICK)  # not serving yet: only a failed start loses a starting child
    assert not record.wait(1.0) and not record.give_up() and not record.starting()
    assert record.serving(10.0) and record.state is ChildState.SERVING
    assert not record.serving(10.0)
    assert record.lost(20.0, QUICK) and record.state is ChildState.LOST
    assert record.quick_exits == 0  # it had served steadily
    assert record.wait(21.0) and record.state is ChildState.WAITING and record.restarts == 1
    assert record.starting() and record.state is ChildState.STARTING and record.serving_since is None
    assert record.lost(21.5, QUICK, failed_start=True) and (record.failed_starts, record.quick_exits) == (1, 1)
    assert record.give_up() and record.state is ChildState.GIVEN_UP
    assert not record.wait(30.0)
    assert record.stop() is ChildState.GIVEN_UP and record.state is ChildState.STOPPED
    assert not record.serving(40.0)


def test_an_exit_soon_after_serving_is_quick_and_serving_resets_the_failed_starts():
    record = ChildRecord(Fake("a"))
    record.serving(0.0)
    record.lost(0.1, QUICK)  # 0.1 s < steady_s
    assert record.quick_exits == 1
    record.wait(0.1)
    record.starting()
    record.lost(0.2, QUICK, failed_start=True)
    assert (record.failed_starts, record.quick_exits) == (1, 2)
    record.wait(0.2)
    record.starting()
    record.serving(1.0)
    assert record.failed_starts == 0
    record.lost(5.0, QUICK)
    assert record.quick_exits == 0


# -- a supervisor ---------------------------------------------------------------------------------


def test_a_child_that_served_steadily_is_started_again_at_once_and_told(tree, caplog):
    make, _ = tree
    supervisor = make()
    child = Fake("steady")
    launched(supervisor, child)
    time.sleep(QUICK.steady_s + 0.05)
    child.die()
    assert child.wait_for(1, "back")
    assert child.events == ["lost", "back"] and child.starts == 2
    assert supervisor.restarts(child) == 1 and supervisor.state(child) is ChildState.SERVING
    assert "steady exited unexpectedly (killed by the test) after serving" in caplog.text
    assert "starting it again at once (restart 1 of at most 60 within 60 s)" in caplog.text
    assert "steady serves again (restart 1)" in caplog.text


def test_a_child_stopped_on_purpose_is_started_again_at_once_and_said_so(tree, caplog):
    make, _ = tree
    supervisor = make()
    child = Fake("big")
    child.ended_on_purpose = lambda: "its memory grew"
    launched(supervisor, child)
    time.sleep(QUICK.steady_s + 0.05)
    child.die()
    assert child.wait_for(1, "back")
    assert "big was stopped to be started again (its memory grew) after serving" in caplog.text
    assert "exited unexpectedly" not in caplog.text and supervisor.restarts(child) == 1


def test_quick_exits_back_off_and_a_steady_run_starts_the_curve_again(tree, caplog):
    make, _ = tree
    supervisor = make()
    child = Fake("quick")
    launched(supervisor, child)
    waits = []
    for count in (1, 2, 3):
        died = time.monotonic()
        child.die()
        assert child.wait_for(count, "back")
        waits.append(time.monotonic() - died)
    assert waits[0] < QUICK.first_backoff_s <= waits[1] and waits[2] >= QUICK.max_backoff_s
    assert "starting it again in 0.4 s" in caplog.text
    time.sleep(QUICK.steady_s + 0.05)
    died = time.monotonic()
    child.die()
    assert child.wait_for(4, "back")
    assert time.monotonic() - died < QUICK.first_backoff_s


def test_restarts_are_counted_per_supervisor_and_past_the_bound_it_gives_up(tree, caplog):
    make, owner = tree
    supervisor = make(RestartPolicy(max_restarts=2, window_s=60, steady_s=0))
    first, second = Fake("first"), Fake("second")
    launched(supervisor, first, second)
    first.die()
    assert first.wait_for(1, "back")
    second.die()
    assert second.wait_for(1, "back")
    first.die()  # the third restart of the supervisor's children: one too many
    assert owner.told.wait(10)
    (cause,) = owner.causes
    assert cause.startswith("first exited unexpectedly (killed by the test) after serving ")
    assert cause.endswith("; the run restarted its children 2 times within 60 s, the most it allows")
    assert supervisor.given_up == owner.causes[0] and not supervisor.serving()
    assert supervisor.state(first) is ChildState.GIVEN_UP and supervisor.state(second) is ChildState.STOPPED
    second.die()  # a child of a supervisor that gave up is no more restarted
    time.sleep(0.3)
    assert (first.starts, second.starts) == (2, 2)
    assert "the run gives up" in caplog.text


def test_restarts_that_fail_to_serve_are_given_up_on_after_a_few(tree, caplog):
    make, owner = tree
    supervisor = make(RestartPolicy(max_restarts=100, window_s=60, max_failed_starts=3, first_backoff_s=0.01,
                                    max_backoff_s=0.02, grace_s=1))
    child = Fake("broken")
    launched(supervisor, child)
    child.fail_ready = True
    child.die()
    assert owner.told.wait(10)
    assert child.starts == 1 + 3
    assert "its last 3 restarts in a row failed to serve" in owner.causes[0]
    assert owner.causes[0].startswith("broken could not be started again (cannot start)")


def test_a_child_that_dies_as_it_comes_to_serve_is_a_quick_exit_not_a_failed_start(tree):
    # The race 1bb52dc fixed: the exit of a restart that has just served must find the record
    # serving, with its failed starts reset, whichever thread runs first.
    make, owner = tree
    supervisor = make(RestartPolicy(max_restarts=100, max_failed_starts=2, steady_s=10, first_backoff_s=0.01,
                                    max_backoff_s=0.02, grace_s=1))
    child = Fake("flaky")
    launched(supervisor, child)
    child.plan = ["fail", "die"] * 3  # each time one failed start, then a restart that serves and dies at once
    child.die()
    assert child.wait_for(3 + 1, "back")  # served after each "die", and at the end
    assert wait_until(lambda: supervisor.state(child) is ChildState.SERVING and not child.plan)
    assert owner.causes == [] and child.starts == 1 + 6 + 1


def test_a_first_start_that_fails_is_the_launchers_and_not_retried(tree):
    make, _ = tree
    supervisor = make()
    child = Fake("first")
    child.fail_ready = True
    with pytest.raises(RuntimeError, match="cannot start"):
        supervisor.launch(child).result(timeout=10)
    time.sleep(0.3)
    assert child.starts == 1 and supervisor.state(child) is None


def test_a_forgotten_child_is_not_started_again_and_one_starting_then_is_stopped(tree):
    make, _ = tree
    supervisor = make()
    child = Fake("forgotten")
    launched(supervisor, child)
    supervisor.forget(child)
    child.die()
    time.sleep(0.3)
    assert child.starts == 1 and child.events == []
    slow = Fake("slow")
    slow.ready_s = 0.5
    future = supervisor.launch(slow)
    time.sleep(0.1)
    supervisor.forget(slow)
    with pytest.raises(RuntimeError, match="started while stopping"):
        future.result(timeout=10)
    assert slow.stops == 1


def test_a_paused_tree_ignores_exits(tree):
    make, _ = tree
    supervisor = make()
    child = Fake("paused")
    launched(supervisor, child)
    supervisor.pause()
    child.die()
    time.sleep(0.3)
    assert child.starts == 1 and child.events == []


def test_a_slow_restart_does_not_keep_another_childs_exit_unseen(tree):
    make, _ = tree
    supervisor = make(RestartPolicy(steady_s=0))
    slow, quick = Fake("slow"), Fake("quick")
    launched(supervisor, slow, quick)
    slow.ready_s = 3.0
    slow.die()
    assert slow.wait_for(1, "lost")
    quick.die()
    assert quick.wait_for(1, "back", timeout_s=2)  # while slow's restart still waits for it to serve
    assert "back" not in slow.events
    assert slow.wait_for(1, "back")


# -- a tree ---------------------------------------------------------------------------------------


class Pool(Fake):
    """A child that supervises children of its own (as a model's pool of worker processes)."""

    def __init__(self, parent: Supervisor, policy: RestartPolicy, size: int = 2):
        super().__init__("the pool")
        self.parent, self.policy = parent, policy
        self.workers = [Fake(f"worker {index}") for index in range(size)]
        self.supervisor: Optional[Supervisor] = None
        self.cause = ""

    def start(self) -> None:
        super().start()
        if self.supervisor is not None:
            self.supervisor.close()
        self.supervisor = self.parent.supervisor(self.policy, name="the pool", on_given_up=self.give_up)
        self.launched = [self.supervisor.launch(worker) for worker in self.workers]

    def ready(self) -> None:
        for future in self.launched:
            future.result(timeout=10)

    def exit_cause(self) -> str:
        return f"it gave up: {self.cause}"

    def give_up(self, cause: str) -> None:
        self.cause = cause
        self.die()


def test_a_pool_past_its_bound_gives_up_as_one_child_of_the_run_which_starts_it_again(tree, caplog):
    make, owner = tree
    run = make(RestartPolicy(max_restarts=5, steady_s=0))
    pool = Pool(run, RestartPolicy(max_restarts=2, steady_s=0))
    launched(run, pool)
    first = pool.workers[0]
    for count in (1, 2):  # within the pool's bound: the pool restarts its worker, the run sees nothing
        first.die()
        assert first.wait_for(count, "back")
    assert run.restarts(pool) == 0
    pool.workers[1].die()  # the pool's third restart: it gives up
    assert pool.wait_for(1, "back")
    assert run.restarts(pool) == 1 and owner.causes == []
    assert (first.starts, pool.workers[1].starts) == (4, 2)  # all its workers started anew
    assert all(pool.supervisor.state(worker) is ChildState.SERVING for worker in pool.workers)
    assert "the pool exited unexpectedly (it gave up: worker 1 exited unexpectedly (killed by the test) after serving" \
           in caplog.text
    assert "; the pool restarted its children 2 times within 60 s, the most it allows)" in caplog.text


def test_every_spawn_of_the_tree_runs_on_its_one_thread(tree):
    make, _ = tree
    run = make(RestartPolicy(steady_s=0))
    server, pool = Fake("server"), Pool(run, RestartPolicy(steady_s=0))
    launched(run, server, pool)
    server.die()
    pool.workers[0].die()
    assert server.wait_for(1, "back") and pool.workers[0].wait_for(1, "back")
    threads = {name for child in (server, pool, *pool.workers) for name in child.spawned_on}
    assert threads == {"pytriton_like-the-run"}


def test_exits_in_words():
    assert describe_exit(None) == "runs"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-signal.SIGABRT) == "killed by SIGABRT"
    assert describe_exit(-signal.SIGKILL).startswith("killed by SIGKILL (the kernel's out-of-memory killer")

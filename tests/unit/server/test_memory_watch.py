"""MemoryWatch: tritonserver restarted on purpose once its memory stayed past the bound, not for a
large request's memory that comes and goes."""

import os
import sys

from pytriton_like.server.memory_watch import MemoryWatch, resident_bytes
from pytriton_like.server.process import ServerProcess

MIB = 1 << 20


class Memory:
    """A stand-in process's memory, set by the test."""

    def __init__(self, value):
        self.value = value

    def __call__(self, pid):
        return self.value


def watched(memory, growth=100 * MIB, sustained_s=60.0):
    ends = []
    watch = MemoryWatch(growth, sustained_s, interval_s=3600, memory=memory)
    watch.watch(1234, ends.append)
    return watch, ends


def test_memory_past_the_bound_for_the_sustained_time_restarts_the_server_once():
    memory = Memory(500 * MIB)
    watch, ends = watched(memory)
    memory.value = 650 * MIB
    watch.check(0.0)
    watch.check(59.0)
    assert ends == []
    watch.check(61.0)
    watch.check(200.0)
    assert len(ends) == 1 and "150 MiB above what it held after its start for 61 s" in ends[0]
    watch.close()


def test_a_large_request_that_comes_and_goes_does_not_count():
    memory = Memory(500 * MIB)
    watch, ends = watched(memory)
    for now, value in ((0.0, 3000 * MIB), (30.0, 3000 * MIB), (40.0, 520 * MIB), (70.0, 3000 * MIB), (100.0, 510 * MIB)):
        memory.value = value
        watch.check(now)
    assert ends == []
    watch.close()


def test_a_model_loaded_moves_the_baseline():
    memory = Memory(500 * MIB)
    watch, ends = watched(memory)
    memory.value = 900 * MIB  # a model of the repository loaded
    watch.rebaseline()
    watch.check(0.0)
    watch.check(100.0)
    assert ends == []
    watch.close()


def test_the_real_reading_and_a_killed_server_says_why(tmp_path):
    assert resident_bytes(os.getpid()) > 10 * MIB and resident_bytes(2**22 + 7) is None
    server = ServerProcess([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), tmp_path / "log", [])
    server.spawn()
    try:
        server.end_on_purpose("its memory stayed 1,024 MiB above what it held")
        assert server.wait_exit(15)
        assert server.exit_cause() == "killed on purpose: its memory stayed 1,024 MiB above what it held"
        assert server.ended_because == "its memory stayed 1,024 MiB above what it held"
    finally:
        server.stop(timeout_s=1)

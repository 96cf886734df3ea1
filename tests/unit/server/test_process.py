"""ServerProcess with a stand-in for tritonserver: a server that announces a fatal signal and then
hangs in its crash handler (as tritonserver 2.51's exit() can) is killed, so that its end is seen;
one that announces SIGINT (a stop) is left to stop."""

import contextlib
import os
import sys
import time

from pytriton_like.server.process import ServerProcess
from pytriton_like.supervisor import describe_exit

HANGS_AFTER_A_CRASH = (
    "import time; print('Started HTTPService at 127.0.0.1:1', flush=True); "
    "print('Signal (11) received.', flush=True); time.sleep(60)"
)


@contextlib.contextmanager
def spawned(tmp_path, code):
    """A ServerProcess running ``code`` in place of tritonserver, stopped on the way out."""
    server = ServerProcess([sys.executable, "-c", code], dict(os.environ), tmp_path / "log", ["HTTP"])
    server.spawn()
    try:
        yield server
    finally:
        server.stop(timeout_s=1)


def test_a_server_that_hangs_after_a_fatal_signal_is_killed_and_its_end_says_why(tmp_path):
    started = time.monotonic()
    with spawned(tmp_path, HANGS_AFTER_A_CRASH) as server:
        assert server.wait_exit(15)
        assert time.monotonic() - started < 10
        assert server.exit_cause() == "killed by SIGSEGV (it hung after it and was killed)"


def test_a_server_that_ends_by_itself_after_the_signal_keeps_its_own_cause(tmp_path):
    code = "import os, signal; print('Signal (6) received.', flush=True); os.kill(os.getpid(), signal.SIGABRT)"
    with spawned(tmp_path, code) as server:
        assert server.wait_exit(15)
        assert server.exit_cause() == "killed by SIGABRT"


def test_a_server_stopping_slowly_after_sigint_is_not_taken_for_a_hung_one(tmp_path):
    # tritonserver says "Signal (2) received." when it is stopped too; its drain may take longer
    # than the grace a crashed one gets
    code = "import time; print('Signal (2) received.', flush=True); time.sleep(3)"
    with spawned(tmp_path, code) as server:
        assert server.wait_exit(15)
        assert server.returncode == 0
        assert server.exit_cause() == describe_exit(0)

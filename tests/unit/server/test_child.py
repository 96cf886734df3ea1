"""tritonserver as a child: what waits for it to serve again stops waiting once it is not started again."""

import pathlib
import threading
import time

from pytriton_like.server.child import TritonServerChild


def child() -> TritonServerChild:
    return TritonServerChild(
        command=lambda restarts: ["tritonserver"], env={}, log_file=pathlib.Path("/dev/null"), endpoints=[],
        models_ready=lambda: None, start_timeout_s=1, on_back=lambda: None,
    )


def test_a_wait_for_a_server_not_started_again_ends_at_once():
    server = child()
    threading.Timer(0.1, server.abandon).start()
    started = time.monotonic()
    assert not server.wait_serving(30)
    assert time.monotonic() - started < 5
    assert not server.serving()


def test_a_wait_for_a_server_that_never_started_times_out():
    assert not child().wait_serving(0.05)

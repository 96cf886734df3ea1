"""bench/servers.py: a benchmark ended by SIGTERM (``timeout``, ``kill``) stops the server it started."""

import pathlib
import signal
import sys
import textwrap
import time

import psutil

from .processes import Serving

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"

# A benchmark's shape: a server started with bench/servers.py in a with block, then a long measurement.
SCRIPT = textwrap.dedent(
    """
    import pathlib, sys, tempfile, time
    sys.path.insert(0, {bench!r})
    import servers
    with tempfile.TemporaryDirectory() as tmp:
        with servers.start_python_server("pytriton_like", "pytriton_like", pathlib.Path(tmp), instances=1,
                                         max_batch_size=8) as server:
            print("SERVER", server.tree.pid, flush=True)
            time.sleep(300)
    """
)


def _running(processes):
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            continue
    return alive


def test_sigterm_to_a_benchmark_stops_the_server_it_started():
    with Serving([sys.executable, "-c", SCRIPT.format(bench=str(BENCH))]) as script:
        leader = psutil.Process(int(script.wait_for("SERVER ").split()[1]))
        tree = [leader, *leader.children(recursive=True)]
        try:
            assert any(process.name() == "tritonserver" for process in tree), [p.name() for p in tree]

            assert script.stop(signal.SIGTERM) == 128 + signal.SIGTERM, script.output

            deadline = time.monotonic() + 10
            while _running(tree) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _running(tree) == []
        finally:  # what the script left, stopped as servers.py would
            if _running([leader]):
                leader.send_signal(signal.SIGINT)
                psutil.wait_procs([leader], timeout=30)
            for process in _running(tree):
                process.kill()

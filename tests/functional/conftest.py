"""Fixtures for tests against the real tritonserver; each checks that nothing is left behind."""

import contextlib
import os
import re
import socket
import time
import urllib.request

import psutil
import pytest

from pytriton_like.relay.shm import SEGMENT_PREFIX, SHM_DIR
from pytriton_like.server.process import free_ports  # noqa: F401 - the tests take it from here
from pytriton_like.triton import TritonConfig

_SERVER_NAMES = ("tritonserver", "triton_python_backend_stub")
_REAPER = "pytriton_like.server.reaper"
_OPENAI_SERVICE = "pytriton_like.openai.service"  # the OpenAI endpoint's process (a child of the serving one)
_TRITON_REGION = "triton_python_backend_shm_region_"
_GRACE_S = 10
_SAMPLE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_config(**fields) -> TritonConfig:
    """A TritonConfig on three free ports."""
    http, grpc, metrics = free_ports(3)
    return TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics, **fields)


_WORKSPACE_OWNER = re.compile(r"/pytriton_like-(\d+)-")


def url_of(config: TritonConfig, protocol: str) -> str:
    """The client URL of the server on ``config`` for ``protocol`` ("http" or "grpc")."""
    return f"http://127.0.0.1:{config.http_port}" if protocol == "http" else f"grpc://127.0.0.1:{config.grpc_port}"


def scrape(port: int) -> dict:
    """(metric name, frozenset of labels) -> value, from the Prometheus text of the metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            samples[match[1], frozenset(_LABEL.findall(match[2]))] = float(match[3])
    return samples


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())))


def wait_for(condition, timeout_s: float, interval_s: float = 0.1) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passed; whether it held."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)
    return True


def _ours() -> set:
    return {os.getpid()} | {child.pid for child in psutil.Process().children(recursive=True)}


def _counts(owner_pid: int, ours: set) -> bool:
    """Whether something owned by ``owner_pid`` is this test run's: ours, or of an owner that died."""
    return owner_pid in ours or not psutil.pid_exists(owner_pid)


def server_processes() -> set:
    """tritonserver, stub, reaper and OpenAI endpoint processes of this test run or of a dead owner.

    Servers of unrelated live processes (another test run, a benchmark) do not count.
    """
    ours = _ours()
    found = set()
    for process in psutil.process_iter(["pid", "cmdline", "ppid"]):
        args = process.info["cmdline"] or ()
        cmdline = " ".join(args)
        owner = _WORKSPACE_OWNER.search(cmdline)
        if owner and any(name in cmdline for name in _SERVER_NAMES) and _counts(int(owner[1]), ours):
            found.add(process.info["pid"])
        elif _OPENAI_SERVICE in args and process.info["ppid"] in ours:
            found.add(process.info["pid"])
        elif len(args) == 5 and _REAPER in args[2] and args[3].isdigit() and _counts(int(args[3]), ours):
            found.add(process.info["pid"])  # server/reaper.py: [python, -c, boot, owner pid, group]
    return found | worker_processes()


def worker_processes() -> set:
    """Worker processes (bind(..., workers=N)) of this test run: spawned ones run multiprocessing's
    spawn_main, forked ones have this process's command line."""
    mine = psutil.Process().cmdline()
    found = set()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            args = child.cmdline()
            if child.status() != psutil.STATUS_ZOMBIE and (any("spawn_main" in arg for arg in args) or args == mine):
                found.add(child.pid)
    return found


def shm_segments() -> set:
    """Our relay's segments and Triton's stub regions, but for those of unrelated live processes."""
    ours = _ours()
    foreign_regions = set()
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info["cmdline"] or ()
        owner = _WORKSPACE_OWNER.search(" ".join(cmdline))
        if process.info["pid"] not in ours and not (owner and _counts(int(owner[1]), ours)):
            foreign_regions.update(arg for arg in cmdline if arg.startswith(_TRITON_REGION))
    found = set()
    for name in os.listdir(SHM_DIR):
        if name.startswith(SEGMENT_PREFIX):
            owner = name[len(SEGMENT_PREFIX) :].split("-", 1)[0]
            if owner.isdigit() and _counts(int(owner), ours):
                found.add(name)
        elif name.startswith(_TRITON_REGION) and name not in foreign_regions:
            found.add(name)
    return found


def port_listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def leftovers(processes_before: set, segments_before: set, ports=()) -> dict:
    """What a test left: new server processes, new shared-memory segments, listening ports.

    Polls for a short grace period: a process that is exiting is not a leak.
    """
    deadline = time.monotonic() + _GRACE_S
    while True:
        left = {
            "processes": server_processes() - processes_before,
            "segments": shm_segments() - segments_before,
            "ports": {port for port in ports if port_listening(port)},
        }
        if not any(left.values()) or time.monotonic() > deadline:
            return {key: value for key, value in left.items() if value}
        time.sleep(0.2)


@pytest.fixture(autouse=True)
def no_leaks(request):
    """Every functional test leaves no server process and no shared-memory segment.

    Tests on a shared (module-scoped) server are checked when that server stops instead.
    """
    if any(name in request.fixturenames for name in SHARED_SERVER_FIXTURES):
        yield
        return
    processes, segments = server_processes(), shm_segments()
    yield
    assert leftovers(processes, segments) == {}


SHARED_SERVER_FIXTURES = {"server"}


@contextlib.contextmanager
def checked_for_leaks():
    """Wraps a server shared by several tests: on exit, nothing of it may remain."""
    processes, segments = server_processes(), shm_segments()
    yield
    assert leftovers(processes, segments) == {}

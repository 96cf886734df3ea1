"""`make smoke-pythons`: pytriton_like on every Python of requires-python, installed as a user would.

Builds the sdist and, from it, the wheel once (``python -m build``; the wheel serves every Python:
tag py3-none-manylinux_X_Y_<arch>). Then for each Python version given (pyenv's interpreters, or
``python3.X`` on PATH):

- from the wheel: a fresh venv, ``pip install --only-binary :all:`` of the wheel (no source build
  of any dependency) with no C compiler on PATH, and a smoke run in that venv, outside the
  checkout, with that PATH still (tools/smoke_model.py: a model served with ``Triton`` on free
  ports, called over HTTP and gRPC, stopped);
- from the sdist: a local wheelhouse of what it needs for that Python (its dependencies and its
  build requirements, ``pip download``), then a fresh venv, ``pip install --no-index --find-links
  <wheelhouse>`` of the sdist with ``PYTRITON_LIKE_TRITON_WHEEL`` naming NVIDIA's wheel there, and
  no network at all (``unshare -n``, where this user may); the same smoke run.

Then, on the first Python, the wheel installed into a venv that already has an older numpy 2:
numpy must stay as it was. Prints one line per Python and install and exits 1 if any failed.

    python tools/smoke_pythons.py 3.9 3.10 3.11 3.12 3.13
"""

import argparse
import functools
import glob
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMOKE = ROOT / "tools" / "smoke_model.py"  # a model served, called over HTTP and gRPC, stopped
sys.path.insert(0, str(ROOT))
from build_support import server  # noqa: E402  (which NVIDIA wheel the sdist's build is given)
PRESET_NUMPY = "numpy==2.0.2"  # an older numpy 2 with wheels for 3.9-3.12; 3.13 gets 2.1.3
PRESET_NUMPY_313 = "numpy==2.1.3"
# C and C++ compilers and preprocessors, as PATH names them (cc, gcc-12, x86_64-linux-gnu-gcc, clang++...)
COMPILER = re.compile(r"([\w.]+-)*(cc|gcc|g\+\+|c\+\+|cpp|clang|clang\+\+|tcc)(-[\d.]+)?")

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


def build(dist: pathlib.Path) -> tuple:
    """The sdist and, built from it, the wheel for this machine: (wheel, sdist)."""
    env = {**os.environ, "PYTRITON_LIKE_WERROR": "1"}  # the project's own build
    completed = run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], env=env)
    if completed.returncode != 0:
        raise SystemExit(f"building the sdist and the wheel failed:\n{completed.stdout[-3000:]}{completed.stderr[-3000:]}")
    (wheel,) = dist.glob("pytriton_like-*.whl")
    (sdist,) = dist.glob("pytriton_like-*.tar.gz")
    return wheel, sdist


def without_compilers(scratch: pathlib.Path) -> str:
    """PATH with every C/C++ compiler taken out: each folder of PATH that has one is replaced by a
    folder of links to everything else in it."""
    folders = []
    for number, folder in enumerate(filter(None, os.environ.get("PATH", "").split(os.pathsep))):
        entries = sorted(pathlib.Path(folder).iterdir()) if os.path.isdir(folder) else []
        if not any(COMPILER.fullmatch(entry.name) for entry in entries):
            folders.append(folder)
            continue
        mirror = scratch / "path-without-compilers" / str(number)
        mirror.mkdir(parents=True, exist_ok=True)
        for entry in entries:
            if not COMPILER.fullmatch(entry.name) and not (mirror / entry.name).exists():
                (mirror / entry.name).symlink_to(entry)
        folders.append(str(mirror))
    path = os.pathsep.join(folders)
    found = [name for name in ("cc", "gcc", "clang", "c++") if shutil.which(name, path=path)]
    if found:
        raise SystemExit(f"cannot take {found} off PATH")
    return path


def venv(python: str, folder: pathlib.Path) -> pathlib.Path:
    completed = run([python, "-m", "venv", str(folder)])
    if completed.returncode != 0:
        raise RuntimeError(f"venv: {completed.stderr}")
    return folder / "bin" / "python"


def pip_install(python: pathlib.Path, *requirements: str, path: str = None) -> float:
    """``pip install --only-binary :all:``; seconds taken. RuntimeError with pip's output when it fails."""
    started = time.monotonic()
    env = dict(os.environ, PATH=path or os.environ["PATH"])
    completed = run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                     "--only-binary", ":all:", *requirements], env=env)
    if completed.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(requirements)}: {completed.stderr[-2000:]}")
    return time.monotonic() - started


@functools.lru_cache(maxsize=None)
def offline() -> tuple:
    """The command prefix that cuts a process off every network (a namespace of its own), or [] if this user may not."""
    probe = run(["unshare", "--net", "true"]) if shutil.which("unshare") else None
    return ("unshare", "--net") if probe is not None and probe.returncode == 0 else ()


def wheelhouse(python: pathlib.Path, wheel: pathlib.Path, folder: pathlib.Path) -> None:
    """Wheels of all that the sdist needs on ``python``'s version: the package's dependencies (those of
    the wheel built from it) and its build requirements (pyproject.toml), and NVIDIA's wheel."""
    build_requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    nvidia = server.for_platform(platform.machine())
    for requirements in ([str(wheel)], build_requirements,
                         ["--no-deps", "--platform", nvidia.platform, f"{server.PROJECT}=={server.VERSION}"]):
        completed = run([str(python), "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                         "--only-binary", ":all:", "--dest", str(folder), *requirements])
        if completed.returncode != 0:
            raise RuntimeError(f"pip download {' '.join(requirements)}: {completed.stderr[-2000:]}")
    (folder / wheel.name).unlink(missing_ok=True)  # the package itself comes from the sdist


def install_sdist(python: pathlib.Path, sdist: pathlib.Path, folder: pathlib.Path, server_wheel: pathlib.Path) -> float:
    """The sdist built and installed with no index but ``folder`` (no network, where allowed); seconds taken."""
    started = time.monotonic()
    # no index, no configuration that names one (the machine's pip.conf, PIP_* variables)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PYTRITON_LIKE_TRITON_WHEEL=str(server_wheel))
    completed = run([*offline(), str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                     "--no-index", "--find-links", str(folder), str(sdist)], env=env)
    if completed.returncode != 0:
        raise RuntimeError(f"pip install {sdist.name} from {folder}: {completed.stderr[-3000:]}")
    return time.monotonic() - started


def smoke_run(python: pathlib.Path, scratch: pathlib.Path, path: str = None) -> dict:
    """tools/smoke_model.py's result with ``python`` (RuntimeError if it fails or imports another copy)."""
    env = dict(os.environ, PATH=path or os.environ["PATH"])
    # from outside the checkout: the installed copy is imported
    completed = run([str(python), str(SMOKE)], cwd=scratch, timeout=300, env=env)
    if completed.returncode != 0:
        raise RuntimeError(f"smoke run: {completed.stderr[-3000:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    if not result["package"].startswith(str(python.parents[1])):
        raise RuntimeError(f"imported {result['package']}, not the one installed in {python.parents[1]}")
    return result


def from_wheel(version: str, wheel: pathlib.Path, scratch: pathlib.Path, path: str) -> dict:
    python = venv(interpreter(version), scratch / f"venv-{version}-wheel")
    install_s = pip_install(python, str(wheel), path=path)
    return {**smoke_run(python, scratch, path=path), "install_s": round(install_s, 1)}


def from_sdist(version: str, wheel: pathlib.Path, sdist: pathlib.Path, scratch: pathlib.Path) -> dict:
    python = venv(interpreter(version), scratch / f"venv-{version}-sdist")
    house = scratch / f"wheelhouse-{version}"
    wheelhouse(python, wheel, house)
    server_wheel = house / server.for_platform(platform.machine()).filename
    install_s = install_sdist(python, sdist, house, server_wheel)
    return {**smoke_run(python, scratch), "install_s": round(install_s, 1)}


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


def report(version: str, how: str, attempt) -> int:
    """Run ``attempt`` and print its line; 1 if it failed."""
    try:
        result = attempt()
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"Python {version}, {how}: FAIL {exc}", flush=True)
        return 1
    status = "ok" if result["ok"] else "FAIL (wrong answers)"
    print(f"Python {result['python']}, {how}: {status}: installed in {result['install_s']} s, numpy {result['numpy']},"
          f" served and answered over HTTP and gRPC ({result['serve_s']} s from start to stop)", flush=True)
    return 0 if result["ok"] else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="+", help="Python versions, e.g. 3.9 3.13")
    args = parser.parse_args(argv)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="pytriton_like-smoke-") as folder:
        scratch = pathlib.Path(folder)
        started = time.monotonic()
        wheel, sdist = build(scratch / "dist")
        print(f"wheel: {wheel.name} ({wheel.stat().st_size / 2**20:.0f} MiB), sdist: {sdist.name}"
              f" ({sdist.stat().st_size / 2**10:.0f} KiB), built in {time.monotonic() - started:.0f} s", flush=True)
        path = without_compilers(scratch)
        network = "no network (unshare -n)" if offline() else "network not cut off (unshare -n not allowed)"
        for version in args.versions:
            failures += report(version, "wheel, --only-binary :all:, no compiler on PATH",
                               lambda: from_wheel(version, wheel, scratch, path))
            failures += report(version, f"sdist, no index but a local wheelhouse, {network}",
                               lambda: from_sdist(version, wheel, sdist, scratch))
        try:
            print(f"Python {args.versions[0]}, numpy 2 already installed: {keeps_numpy(args.versions[0], wheel, scratch)}")
        except RuntimeError as exc:
            failures += 1
            print(f"Python {args.versions[0]}, numpy 2 already installed: FAIL {exc}")
    print("all passed" if not failures else f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

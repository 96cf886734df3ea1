"""``pytriton_like check``: is this machine ready to serve? Each check says what it found.

The environment first (what tritonserver and its Python-backend stub need from this Python and
this machine), then a real start: a sample model served on free ports and called over HTTP and
gRPC. A failed check makes the exit code 1; a warning does not.
"""

import dataclasses
import enum
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from typing import Callable, List, TextIO

import numpy as np

from ..exceptions import PyTritonError
from ..server.bundle import HOME_VARIABLE, TritonBundle, find_install, libpython, shipped_stub_versions
from ..server.config import TritonConfig
from ..server.process import free_ports

__all__ = ["Status", "Finding", "environment_checks", "serving_check", "run_checks"]

_SHM_DIR = "/dev/shm"
# Below this, /dev/shm (Docker's default is 64 MiB) is too small for tensors of a few hundred MiB.
_SHM_WARN_BYTES = 256 * 1024**2


class Status(enum.Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "FAIL"


@dataclasses.dataclass(frozen=True)
class Finding:
    """What one check found."""

    status: Status
    what: str
    detail: str

    def line(self) -> str:
        return f"[{self.status.value:>4}] {self.what}: {self.detail}"


def environment_checks() -> List[Finding]:
    """Everything serving needs from this interpreter and machine, checked without starting a server."""
    checks: List[Callable[[], Finding]] = [
        _python,
        _libpython,
        _stub,
        _numpy,
        _glibc,
        _shared_memory,
        _ports,
    ]
    return [check() for check in checks]


def _python() -> Finding:
    return Finding(Status.OK, "Python", f"{platform.python_version()} ({sys.executable})")


def _libpython() -> Finding:
    """The stub runs on libpython3.X.so.1.0 of this interpreter; it must exist (Triton() preloads it
    into the shipped stub, and puts its folder first on the library path for a container's)."""
    name = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return Finding(
            Status.FAIL,
            "libpython",
            f"this Python is built without a shared libpython ({name} is a static library); tritonserver's"
            " Python-backend stub needs libpython3.X.so.1.0: use a Python built with --enable-shared"
            " (distribution packages are; pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared)",
        )
    path = libpython()
    if path is None:
        folder = sysconfig.get_config_var("LIBDIR") or ""
        return Finding(Status.FAIL, "libpython", f"{os.path.join(folder, name)} is missing (sysconfig LIBDIR/INSTSONAME)")
    return Finding(Status.OK, "libpython", f"{path} (Triton() gives it to the Python-backend stub)")


def _install() -> TritonBundle:
    """The Triton install Triton() would use here (TritonConfig.triton_home from the environment, or the shipped one).

    Only that variable is read: a bad value of another is the ports check's to report.
    """
    return find_install(os.environ.get(HOME_VARIABLE) or None)


def _stub() -> Finding:
    """The stub for this Python version is there, and every library it links resolves."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    what = f"stub for Python {version}"
    try:
        bundle = _install()
    except PyTritonError as exc:
        return Finding(Status.FAIL, what, str(exc))
    if bundle.stub is None:
        shipped = shipped_stub_versions(bundle)
        offer = f"it ships stubs for Python {', '.join(shipped)}" if shipped else "it has no stub for this Python"
        return Finding(
            Status.WARN,
            what,
            f"{bundle.source}: {offer}; bound models are served, hand-written Python-backend models are refused",
        )
    detail = f"{bundle.stub} ({bundle.source})"
    ldd = shutil.which("ldd")
    if ldd is None:
        return Finding(Status.OK, what, detail + "; ldd not found, links not checked")
    env = bundle.server_environment(os.environ)
    completed = subprocess.run([ldd, str(bundle.stub)], capture_output=True, text=True, env=env, check=False)
    missing = re.findall(r"^\s*(\S+) => not found", completed.stdout, re.MULTILINE)
    if missing:
        return Finding(Status.FAIL, what, f"{detail}: cannot find {', '.join(missing)}")
    found = re.search(r"^\s*(libpython\S+) => (\S+)", completed.stdout, re.MULTILINE)
    expected = os.path.realpath(os.path.join(sysconfig.get_config_var("LIBDIR") or "", found[1])) if found else None
    if found and os.path.realpath(found[2]) != expected:
        return Finding(Status.FAIL, what, f"{detail}: it would load {found[2]}, not this interpreter's {expected}")
    loads = found[2] if found else " ".join(bundle.preload())  # the shipped stub links none: it is preloaded
    return Finding(Status.OK, what, detail + (f"; loads {loads}" if loads else ""))


def _numpy() -> Finding:
    if int(np.__version__.split(".")[0]) >= 2:
        return Finding(
            Status.OK,
            "numpy",
            f"{np.__version__}; hand-written Python-backend models need numpy<2 (Triton's stub is built for"
            " numpy 1) and are refused here: bound models are not concerned (docs/troubleshooting.md)",
        )
    return Finding(Status.OK, "numpy", np.__version__)


def _glibc() -> Finding:
    """The shipped tritonserver is built for the glibc its wheel's tag names (manylinux_2_35: glibc 2.35 or newer)."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        found = ""
    try:
        bundle = _install()
    except PyTritonError:
        bundle = None  # the stub's check says why
    tags = re.findall(r"manylinux_(\d+)_(\d+)", bundle.source) if bundle is not None and bundle.bundled else []
    needed = min((int(major), int(minor)) for major, minor in tags) if tags else None
    match = re.match(r"glibc (\d+)\.(\d+)", found)
    if match is None:
        return Finding(Status.WARN, "glibc", f"cannot tell this system's C library ({found or 'not glibc'})")
    have = (int(match[1]), int(match[2]))
    if needed and have < needed:
        return Finding(
            Status.FAIL, "glibc", f"{have[0]}.{have[1]}; tritonserver needs {needed[0]}.{needed[1]} or newer"
        )
    wanted = f" (tritonserver needs {needed[0]}.{needed[1]} or newer)" if needed else ""
    return Finding(Status.OK, "glibc", f"{have[0]}.{have[1]}{wanted}")


def _shared_memory() -> Finding:
    try:
        usage = shutil.disk_usage(_SHM_DIR)
    except OSError as exc:
        return Finding(Status.FAIL, _SHM_DIR, f"not usable ({exc}); shared-memory clients and Triton's stubs need it")
    if not os.access(_SHM_DIR, os.W_OK):
        return Finding(Status.FAIL, _SHM_DIR, "not writable; shared-memory clients and Triton's stubs need it")
    free = f"{usage.free / 1024**3:.1f} GiB free of {usage.total / 1024**3:.1f} GiB"
    if usage.free < _SHM_WARN_BYTES:
        return Finding(
            Status.WARN,
            _SHM_DIR,
            f"{free}: shared-memory clients and Python-backend models with larger tensors fail"
            " (in Docker: --shm-size=1g or more)",
        )
    return Finding(Status.OK, _SHM_DIR, free)


def _ports() -> Finding:
    """The ports Triton() would use here (TritonConfig's defaults, or PYTRITON_TRITON_CONFIG_* variables)."""
    try:
        ports = TritonConfig().with_env().ports
    except PyTritonError as exc:
        return Finding(Status.FAIL, "ports", f"the PYTRITON_TRITON_CONFIG_* variables: {exc}")
    taken = [f"{endpoint} {port}" for endpoint, port in ports.items() if not _port_free(port)]
    listed = ", ".join(f"{endpoint} {port}" for endpoint, port in ports.items())
    if taken:
        return Finding(
            Status.WARN,
            "ports",
            f"in use: {', '.join(taken)}; Triton() needs other ports here (TritonConfig(http_port=...) or"
            " PYTRITON_TRITON_CONFIG_HTTP_PORT and friends)",
        )
    return Finding(Status.OK, "ports", f"free: {listed}")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def serving_check() -> Finding:
    """Start a server with a sample AddSub model on free ports, call it over HTTP and gRPC, stop it."""
    # Imported here: the environment checks must run even where these imports fail.
    from ..client import ModelClient  # noqa: PLC0415
    from ..decorators import batch  # noqa: PLC0415
    from ..model_config import ModelConfig, Tensor  # noqa: PLC0415
    from ..triton import Triton  # noqa: PLC0415

    @batch
    def add_sub(a, b):
        return {"add": a + b, "sub": a - b}

    http, grpc, metrics = free_ports(3)
    config = TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 3), np.float32)
    spec = [Tensor(name=name, dtype=np.float32, shape=(-1,)) for name in ("a", "b", "add", "sub")]
    timings = []
    try:
        started = time.monotonic()
        with Triton(config=config) as triton:
            triton.bind(
                model_name="AddSub",
                infer_func=add_sub,
                inputs=spec[:2],
                outputs=spec[2:],
                config=ModelConfig(max_batch_size=8),
                strict=True,
            )
            triton.run()
            timings.append(f"started in {time.monotonic() - started:.1f} s")
            for url in (f"http://127.0.0.1:{http}", f"grpc://127.0.0.1:{grpc}"):
                protocol = "HTTP" if url.startswith("http") else "gRPC"
                with ModelClient(url, "AddSub", init_timeout_s=30, inference_timeout_s=30) as client:
                    called = time.monotonic()
                    result = client.infer_batch(a, b)
                    took = time.monotonic() - called
                if not (np.array_equal(result["add"], a + b) and np.array_equal(result["sub"], a - b)):
                    return Finding(Status.FAIL, "serving", f"{protocol}: a wrong answer: {result}")
                timings.append(f"{protocol} answered right in {took * 1000:.0f} ms")
            stopping = time.monotonic()
        timings.append(f"stopped in {time.monotonic() - stopping:.1f} s")
    except Exception as exc:  # noqa: BLE001 - whatever failed is the finding
        return Finding(Status.FAIL, "serving", f"{type(exc).__name__}: {exc}")
    return Finding(Status.OK, "serving", f"sample model AddSub on free ports: {', '.join(timings)}")


def run_checks(*, serving: bool = True, out: TextIO) -> int:
    """Print every finding to ``out`` as it comes, then a summary; returns the exit code (1 if any check failed)."""
    print(f"pytriton_like check ({platform.platform()})", file=out, flush=True)
    findings = []
    for finding in environment_checks():
        findings.append(finding)
        print(finding.line(), file=out, flush=True)
    if serving:
        if any(finding.status is Status.FAIL for finding in findings):
            finding = Finding(Status.FAIL, "serving", "not tried: fix the failures above first")
        else:
            print("       serving a sample model...", file=out, flush=True)
            finding = serving_check()
        findings.append(finding)
        print(finding.line(), file=out, flush=True)
    failed = sum(finding.status is Status.FAIL for finding in findings)
    warned = sum(finding.status is Status.WARN for finding in findings)
    if failed:
        print(f"{failed} check(s) failed, {warned} warning(s)", file=out, flush=True)
        return 1
    print(f"all checks passed ({warned} warning(s))", file=out, flush=True)
    return 0

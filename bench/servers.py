"""The four servers the benchmark compares, and a process tree that leaves nothing behind.

Each server runs in its own session (``start_new_session=True``) with loopback-only ports.
:class:`ProcessTree` keeps a record of every process the server started (tritonserver and the
Python-backend stubs may sit in process groups of their own), the shared-memory files they map
and the workspace folders on their command lines; :meth:`ProcessTree.stop` sends SIGINT, then
SIGKILLs every recorded group and process after a grace period, and removes what they left. A
script that starts a server ends on SIGTERM as on an exception, so that its ``with`` blocks stop
the server (the signal's default action would leave it running in its session).
"""

import contextlib
import dataclasses
import http.client
import logging
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

import psutil

__all__ = [
    "Server", "ServerError", "ProcessTree", "free_ports", "start_python_server", "start_script", "start_floor",
    "start_native_floor", "python_backend_model",
]

logger = logging.getLogger(__name__)

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
SITE_PACKAGES = pathlib.Path(sysconfig.get_paths()["purelib"])
PYTRITON_DIR = SITE_PACKAGES / "pytriton"
BUNDLE_LIBS = SITE_PACKAGES / "nvidia_pytriton.libs"
# The stub links libpython3.X; the running interpreter's must be found before Debian's.
PYTHON_LIBDIR = sysconfig.get_config_var("LIBDIR")
READY_TIMEOUT_S = 120.0

_SHM_DIR = "/dev/shm/"
# A workspace is the folder holding tritonserver's --model-repository; removed after a kill only
# when named like PyTriton's (workspace_*) or pytriton_like's (pytriton_like-*) temporary folders.
_WORKSPACE_NAMES = re.compile(r"^(workspace_|pytriton_like-)[\w.-]+$")


class ServerError(RuntimeError):
    """A server failed to start or to become ready; the message ends with its log."""


def free_ports(count: int) -> List[int]:
    """``count`` different free ports (the probes stay open together, so none is picked twice)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        # SO_REUSEADDR: a connection in TIME_WAIT is not a listener left behind.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _exit_on_sigterm() -> None:
    """Let SIGTERM (``timeout``, ``kill``) end this script as an exception does, once: the ``with``
    blocks and ``finally`` clauses on the way out stop its servers. A server runs in a session of its
    own, so the signal's default action would end the script and leave the server running."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_exit)


def _raise_exit(signum: int, _frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the stop short
    raise SystemExit(128 + signum)


class ProcessTree:
    """A process started in a new session, its descendants, and what they leave behind."""

    def __init__(self, argv: List[str], env: Dict[str, str], log_path: pathlib.Path):
        _exit_on_sigterm()
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.launched_at = time.time()
        try:
            self.popen = subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except BaseException:
            self._log.close()
            raise
        self._known: Dict[Tuple[int, float], psutil.Process] = {}
        self._pgids: Set[int] = {self.popen.pid}
        self.shm_files: Set[str] = set()
        self.workspaces: Set[str] = set()
        self.refresh()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def refresh(self) -> List[psutil.Process]:
        """Record the live processes of the tree (and what they map); return them."""
        try:
            root = psutil.Process(self.popen.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = []
        # A process whose parent ended is no child of the tree any more, but it stays in the
        # session the leader started (Ray's and LitServe's helpers outlive their parents).
        seen = {proc.pid for proc in procs}
        for proc in psutil.process_iter():
            with contextlib.suppress(OSError):
                if proc.pid not in seen and os.getsid(proc.pid) == self.popen.pid:
                    procs.append(proc)
        for proc in procs:
            try:
                key = (proc.pid, proc.create_time())
                if key not in self._known:
                    self._known[key] = proc
                    self._pgids.add(os.getpgid(proc.pid))
                    for arg in proc.cmdline():
                        if arg.startswith("--model-repository="):
                            workspace = pathlib.Path(arg.split("=", 1)[1]).parent
                            if _WORKSPACE_NAMES.match(workspace.name):
                                self.workspaces.add(str(workspace))
                self.shm_files.update(_shm_files_of(proc.pid))
            except (psutil.Error, OSError):
                continue
        return procs

    def alive(self) -> List[psutil.Process]:
        out = []
        for proc in self._known.values():
            with contextlib.suppress(psutil.Error):
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    out.append(proc)
        return out

    def stop(self, grace_s: float) -> Dict[str, object]:
        """SIGINT the leader, wait ``grace_s``, SIGKILL whatever is left; remove leftovers."""
        report: Dict[str, object] = {"graceful": False, "killed": [], "removed": []}
        try:
            self.refresh()
            if self.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.popen.pid, signal.SIGINT)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and self.alive():
                self.popen.poll()  # reap the leader so it does not linger as a zombie
                time.sleep(0.05)
            report["graceful"] = not self.alive()
            if not report["graceful"]:
                report["killed"] = [f"{p.pid} {_name(p)}" for p in self.alive()]
                # Only groups led by a process of this tree: never our own or anyone else's.
                for pgid in self._pgids:
                    if any(pid == pgid for pid, _ in self._known):
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(pgid, signal.SIGKILL)
                for proc in self.alive():
                    with contextlib.suppress(psutil.Error):
                        proc.kill()
                # Not psutil.wait_procs: orphans reparented to init may stay zombies a while.
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and self.alive():
                    self.popen.poll()
                    time.sleep(0.02)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(10)
        finally:
            self._log.close()
            report["removed"] = self._remove_leftovers()
            report["still_alive"] = [f"{p.pid} {_name(p)}" for p in self.alive()]
        return report

    def _remove_leftovers(self) -> List[str]:
        removed = []
        pids = {pid for pid, _ in self._known}
        candidates = set(self.shm_files)
        # pytriton_like names its segments after the owner's pid; catch ones never sampled mapped.
        for pid in pids:
            candidates.update(str(p) for p in pathlib.Path(_SHM_DIR).glob(f"pytriton_like-{pid}-*"))
        for path in sorted(candidates):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(path)
        for path in sorted(self.workspaces):
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        return removed

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def _name(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return proc.name()
    return "?"


def _shm_files_of(pid: int) -> Set[str]:
    found = set()
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                idx = line.find(_SHM_DIR)
                if idx >= 0:
                    found.add(line[idx:].rstrip("\n").removesuffix(" (deleted)"))
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(_SHM_DIR):
                    found.add(target.removesuffix(" (deleted)"))
    return found


@dataclasses.dataclass
class Server:
    """A running server: its ports by name ("http", "grpc", "metrics", "openai"...), its process
    tree and how long it took to be ready."""

    key: str
    label: str
    ports: Dict[str, int]
    tree: ProcessTree
    start_to_ready_s: float = float("nan")
    launch_to_ready_s: float = float("nan")
    stop_report: Optional[Dict[str, object]] = None

    @property
    def http_port(self) -> int:
        return self.ports["http"]

    @property
    def grpc_port(self) -> int:
        return self.ports["grpc"]

    @property
    def metrics_port(self) -> int:
        return self.ports["metrics"]

    def url(self, path: str = "", port: str = "http") -> str:
        return f"http://127.0.0.1:{self.ports[port]}{path}"

    def stop(self, grace_s: float) -> Dict[str, object]:
        """Stop the whole tree (:meth:`ProcessTree.stop`) once; what it found and did, and the
        ports still in use (none, when all went well)."""
        if self.stop_report is None:
            self.stop_report = self.tree.stop(grace_s)
            self.stop_report["ports_in_use"] = [p for p in self.ports.values() if port_in_use(p)]
        return self.stop_report

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop(grace_s=15)


def _server_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = {**os.environ, **(extra or {})}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [PYTHON_LIBDIR, env.get("LD_LIBRARY_PATH", "")]))
    env.pop("PYTHONPATH", None)
    if env.get("BENCH_PYTHONPATH"):  # another copy of a package first (an A/B of two commits, ab.py)
        env["PYTHONPATH"] = env["BENCH_PYTHONPATH"]
    return env


def start_python_server(
    package: str, label: str, workdir: pathlib.Path, *, instances: int, max_batch_size: int,
    options: Sequence[str] = (), env: Optional[Dict[str, str]] = None,
) -> Server:
    """Start ``serve_double.py`` with ``package`` (``pytriton`` or ``pytriton_like``); wait until ready."""
    return start_script(
        HERE / "serve_double.py",
        [f"--package={package}", f"--instances={instances}", f"--max-batch-size={max_batch_size}", *options],
        package,
        label,
        workdir,
        env=env,
    )


def start_script(
    script: pathlib.Path, options: Sequence[str], key: str, label: str, workdir: pathlib.Path, *,
    python: Optional[str] = None, port_names: Sequence[str] = ("http", "grpc", "metrics"),
    ready_path: Optional[str] = None, env: Optional[Dict[str, str]] = None,
) -> Server:
    """Start a serving script on free loopback ports and wait until it is ready.

    The script gets ``--<name>-port=N`` for each of ``port_names``. It is ready when it printed
    ``BENCH_START <unix time>`` and ``BENCH_READY <unix time>`` (serve_double.py and the other
    ``serve_*.py`` of pytriton_like), or, with ``ready_path``, at the first 200 answer to
    ``GET ready_path`` on its first port (a server that cannot say when it is ready itself).
    ``python`` is the interpreter (default: this one; the peers run in an environment of their
    own), ``env`` adds to the environment.
    """
    ports = dict(zip(port_names, free_ports(len(port_names))))
    full_env = _server_env(env)
    # PyTriton's workspace goes under PYTRITON_HOME: keep it in our temporary folder.
    full_env.setdefault("PYTRITON_HOME", str(workdir / "pytriton_home"))
    argv = [python or sys.executable, str(script), *(f"--{name}-port={port}" for name, port in ports.items()), *options]
    tree = ProcessTree(argv, full_env, workdir / f"{key}.log")
    server = Server(key, label, ports, tree)
    try:
        if ready_path is None:
            marks = _wait_for_marks(tree, ("BENCH_START", "BENCH_READY"))
            server.start_to_ready_s = marks["BENCH_READY"] - marks["BENCH_START"]
            ready_at = marks["BENCH_READY"]
        else:
            ready_at = _poll_ready(tree, ports[port_names[0]], ready_path)
            server.start_to_ready_s = ready_at - tree.launched_at
    except BaseException:
        server.stop(grace_s=5)
        raise
    server.launch_to_ready_s = ready_at - tree.launched_at
    tree.refresh()
    return server


def _wait_for_marks(tree: ProcessTree, names: Tuple[str, ...]) -> Dict[str, float]:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        text = tree.read_log()
        marks = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(BENCH_\w+) ([\d.]+)$", text, re.M)}
        if all(name in marks for name in names):
            return marks
        if tree.popen.poll() is not None:
            raise ServerError(f"server exited with code {tree.popen.returncode} before ready:\n{_tail(text)}")
        if time.monotonic() > deadline:
            raise ServerError(f"server not ready after {READY_TIMEOUT_S:.0f} s:\n{_tail(text)}")
        time.sleep(0.02)


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


def python_backend_model(repository: pathlib.Path, name: str, source: pathlib.Path) -> pathlib.Path:
    """Writes the Python-backend model in folder ``source`` (its config.pbtxt and model.py) into
    ``repository`` as model ``name``, and returns ``repository``. model.py's ``@SITE_PACKAGES@``
    becomes this interpreter's site-packages: Triton's stub starts with the base interpreter's
    sys.path, whose numpy may be another version."""
    folder = repository / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "config.pbtxt", folder / "config.pbtxt")
    model = (source / "model.py").read_text().replace("@SITE_PACKAGES@", str(SITE_PACKAGES))
    (folder / "1" / "model.py").write_text(model)
    return repository


def start_floor(
    workdir: pathlib.Path, *, instances: int, max_batch_size: int, model_file: pathlib.Path = HERE / "floor" / "model.py",
    key: str = "floor",
) -> Server:
    """Plain tritonserver from the wheel with ``model_file`` (``bench/floor/model.py``: Double)
    computing inside the stub."""
    backends = workdir / key / "backends" / "python"
    backends.mkdir(parents=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        shutil.copy2(PYTRITON_DIR / "tritonserver" / "backends" / "python" / name, backends / name)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = PYTRITON_DIR / "tritonserver" / "python_backend_stubs" / version / "triton_python_backend_stub"
    shutil.copy2(stub, backends / stub.name)
    model_dir = _floor_model(workdir / key, "python", instances, max_batch_size)
    model = model_file.read_text().replace("@SITE_PACKAGES@", str(SITE_PACKAGES)).replace("@BENCH@", str(HERE))
    (model_dir / "1" / "model.py").write_text(model)
    return _start_tritonserver(key, key, workdir, model_dir.parent, backends.parent)


def start_native_floor(workdir: pathlib.Path, *, instances: int, max_batch_size: int) -> Server:
    """Plain tritonserver from the wheel with a minimal C backend computing inside it
    (``bench/native_floor/double_floor.c``, compiled here): no relay, no Python at all."""
    backends = workdir / "native_floor" / "backends"
    (backends / "double_floor").mkdir(parents=True)
    subprocess.run(
        [os.environ.get("CC", "cc"), "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared",
         f"-I{REPO / 'native'}", "-o", str(backends / "double_floor" / "libtriton_double_floor.so"),
         str(HERE / "native_floor" / "double_floor.c")],
        check=True,
    )
    model_dir = _floor_model(workdir / "native_floor", "double_floor", instances, max_batch_size)
    return _start_tritonserver("native_floor", "native floor", workdir, model_dir.parent, backends)


def _floor_model(root: pathlib.Path, backend: str, instances: int, max_batch_size: int) -> pathlib.Path:
    model_dir = root / "repository" / "Double"
    (model_dir / "1").mkdir(parents=True)
    config = (HERE / "floor" / "config.pbtxt").read_text()
    config = config.replace("@MAX_BATCH_SIZE@", str(max_batch_size)).replace("@INSTANCES@", str(instances))
    (model_dir / "config.pbtxt").write_text(config.replace('backend: "python"', f'backend: "{backend}"'))
    return model_dir


def _start_tritonserver(key: str, label: str, workdir: pathlib.Path, repository: pathlib.Path,
                        backends: pathlib.Path) -> Server:
    http_port, grpc_port, metrics_port = free_ports(3)
    env = _server_env()
    env["LD_LIBRARY_PATH"] = os.pathsep.join([str(PYTHON_LIBDIR), str(BUNDLE_LIBS), env["LD_LIBRARY_PATH"]])
    argv = [
        str(PYTRITON_DIR / "tritonserver" / "bin" / "tritonserver"),
        f"--model-repository={repository}",
        f"--backend-directory={backends}",
        "--http-address=127.0.0.1",
        f"--http-port={http_port}",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={grpc_port}",
        "--metrics-address=127.0.0.1",
        f"--metrics-port={metrics_port}",
    ]
    tree = ProcessTree(argv, env, workdir / f"{key}.log")
    server = Server(key, label, {"http": http_port, "grpc": grpc_port, "metrics": metrics_port}, tree)
    try:
        ready_at = _poll_ready(tree, http_port, "/v2/health/ready")
    except BaseException:
        server.stop(grace_s=5)
        raise
    server.start_to_ready_s = server.launch_to_ready_s = ready_at - tree.launched_at
    tree.refresh()
    return server


def _poll_ready(tree: ProcessTree, http_port: int, path: str) -> float:
    """The time of the first 200 answer to ``GET path`` (polled every 10 ms)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if tree.popen.poll() is not None:
            raise ServerError(f"server exited with code {tree.popen.returncode}:\n{_tail(tree.read_log())}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=1)
            try:
                conn.request("GET", path)
                if conn.getresponse().status == 200:
                    return time.time()
            finally:
                conn.close()
        if time.monotonic() > deadline:
            raise ServerError(f"server not ready after {READY_TIMEOUT_S:.0f} s:\n{_tail(tree.read_log())}")
        time.sleep(0.01)

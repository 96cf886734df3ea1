"""The tritonserver subprocess: start it, pump its log, know when it is ready, stop it."""

import array
import collections
import contextlib
import enum
import fcntl
import logging
import os
import pathlib
import re
import signal
import socket
import subprocess
import termios
import threading
import time
from typing import Dict, List, Optional, Sequence

from ..exceptions import PyTritonServerError
from ..relay.shm import SHM_DIR, STUB_REGION_PREFIX
from ..supervisor import describe_exit
from .parent_death import with_parent_death_signal
from .reaper import group_members, start_reaper, stop_reaper

__all__ = ["ServerProcess", "ServerState", "check_ports_free", "free_ports", "PRIVATE_UMASK"]

logger = logging.getLogger(__name__)

# The umask of tritonserver and every process it starts (docs/security.md).
PRIVATE_UMASK = 0o077
_TAIL_LINES = 40
# A start failure without error lines quotes this many last lines of the log instead.
_QUOTED_LINES = 10
# How long the exit waits for the log pipe to give up the server's last lines.
_DRAIN_TIMEOUT_S = 1.0
# glog error lines ("E1121 15:28:43.7 ...") and the final "error: ..." tritonserver prints.
_ERROR_LINE = re.compile(r"^(E\d{4} |error: )")
# Printed at every start on a machine without a GPU; not worth showing in an error.
_HARMLESS = ("CudaDriverHelper has not been initialized",)
# Lines tritonserver prints once an endpoint accepts connections.
_STARTED = {"HTTP": "Started HTTPService at", "gRPC": "Started GRPCInferenceService at", "metrics": "Started Metrics Service at"}
# What tritonserver prints when a signal hits it: SIGINT and SIGTERM (a stop, which may take its time)
# and the fatal ones (a crash of its own, an abort). After a fatal one its handler calls exit(), which
# can hang for good (a library's destructor waits for a lock the crashed thread held): a process that
# announced such an end and is still there after this long is killed, so that its supervisor sees it
# end and starts it again.
_SIGNAL_LINE = re.compile(r"^Signal \((\d+)\) received\.")
_FATAL_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE})
_FATAL_GRACE_S = 2.0


class ServerState(enum.Enum):
    """Where the server process is in its life."""

    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    EXITED = "exited"


def check_ports_free(ports: Dict[str, int], address: str = "0.0.0.0") -> None:
    """Raise PyTritonServerError naming the first endpoint whose port is taken, or two that share one."""
    seen: Dict[int, str] = {}
    for endpoint, port in ports.items():
        if port in seen:
            raise PyTritonServerError(
                f"cannot start tritonserver: the {seen[port]} and {endpoint} ports are both {port}; "
                f"give each endpoint its own port in TritonConfig"
            )
        seen[port] = endpoint
    for endpoint, port in ports.items():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # SO_REUSEADDR as tritonserver sets it, so TIME_WAIT leftovers do not count as taken.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, port))
            except OSError as exc:
                raise PyTritonServerError(
                    f"cannot start tritonserver: the {endpoint} port {port} is already in use ({exc.strerror}); "
                    f"choose another with TritonConfig({endpoint.lower()}_port=...)"
                ) from None


def free_ports(count: int) -> List[int]:
    """``count`` different free loopback ports (the probes stay open together, so none is picked twice)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


class ServerProcess:
    """One tritonserver process.

    The process gets SIGKILL from the kernel when the thread that spawned it ends (PR_SET_PDEATHSIG,
    parent_death.py), so the server never outlives the user process, even after ``kill -9``:
    :meth:`spawn` is called on the supervision tree's thread, which lives until the server is
    stopped (supervisor/__init__.py).
    """

    def __init__(self, argv: Sequence[str], env: Dict[str, str], log_file: pathlib.Path, endpoints: Sequence[str]):
        self._argv = list(argv)
        self._env = env
        self.log_file = log_file
        self._endpoints = set(endpoints)
        self._started: set = set()
        self._tail: collections.deque = collections.deque(maxlen=_TAIL_LINES)
        self._errors: collections.deque = collections.deque(maxlen=_TAIL_LINES)
        self._state = ServerState.NEW
        self._changed = threading.Condition()
        self._process: Optional[subprocess.Popen] = None
        self._reaper: Optional[subprocess.Popen] = None  # ends the stubs should this process die
        self._stopped = False  # stop() began: no reaper starts after it
        self._spawn_error: Optional[BaseException] = None
        self._exit_reader, self._exit_writer = os.pipe()  # written once the process exited
        self.returncode: Optional[int] = None
        self._fatal_signal: Optional[int] = None  # the signal tritonserver said hit it (its log)
        self.ended_because: Optional[str] = None  # why it was killed on purpose (end_on_purpose)

    @property
    def state(self) -> ServerState:
        return self._state

    @property
    def pid(self) -> Optional[int]:
        return self._process.pid if self._process else None

    def is_alive(self) -> bool:
        """Whether the process was started and has not exited."""
        return self._process is not None and self.returncode is None

    def spawn(self) -> None:
        """Start the process from the calling thread, which its parent-death signal is tied to, and
        watch it from a thread of its own; returns at once."""
        with self._changed:
            self._state = ServerState.STARTING
        try:
            self._process = subprocess.Popen(
                with_parent_death_signal(self._argv, signal.SIGKILL),
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # owner-only: the server's and its stubs' /dev/shm regions, files and sockets
                umask=PRIVATE_UMASK,
            )
        except OSError as exc:
            self._spawn_error = exc
            self._set_state(ServerState.EXITED)
            self._say_exited()
            return
        logger.info("tritonserver started (pid %d), log in %s", self._process.pid, self.log_file)
        threading.Thread(target=self._watch, name="tritonserver-watch", daemon=True).start()

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until every endpoint listens; raise PyTritonServerError if the server exited or took too long."""
        with self._changed:
            done = self._changed.wait_for(lambda: self._state is not ServerState.STARTING, timeout_s)
            state = self._state
        if self._spawn_error is not None:
            raise PyTritonServerError(f"cannot run {self._argv[0]}: {self._spawn_error}") from self._spawn_error
        if state is ServerState.EXITED:
            errors = "\n".join(self._errors or list(self._tail)[-_QUOTED_LINES:])
            raise PyTritonServerError(
                f"tritonserver {describe_exit(self.returncode)} while starting:\n{errors}", log_tail=self.log_tail()
            )
        if not done:
            self.stop(timeout_s=5)
            raise PyTritonServerError(
                f"tritonserver did not become ready within {timeout_s:.0f} s", log_tail=self.log_tail()
            )

    @property
    def exit_fd(self) -> int:
        """A descriptor that becomes readable once the process exited (and its last lines were read)."""
        return self._exit_reader

    def end_on_purpose(self, reason: str) -> None:
        """Kill the server for ``reason`` (its supervisor starts it again, as after a crash)."""
        self.ended_because = reason
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()

    def exit_cause(self) -> str:
        """How the process ended, in words (``"killed by SIGABRT"``), or that it runs."""
        if self.ended_because is not None:
            return f"killed on purpose: {self.ended_because}"
        if self._fatal_signal is not None and self.returncode == -signal.SIGKILL:
            return f"{describe_exit(-self._fatal_signal)} (it hung after it and was killed)"
        return describe_exit(self.returncode)

    def _watch(self) -> None:
        # The stubs inherit the server's output: the pipe may outlive the server, so its end is
        # not the server's exit. Read from now on: the readiness is in it, whatever the reaper does.
        pump = threading.Thread(target=self._pump_log, name="tritonserver-log", daemon=True)
        pump.start()
        with self._changed:
            if not self._stopped:
                try:
                    self._reaper = start_reaper(self._process.pid)
                except OSError as exc:
                    logger.warning("cannot start the reaper of tritonserver's stubs: %s", exc)
        self.returncode = self._process.wait()
        # Its last lines (why it exited) may still be in the pipe: read them before saying it
        # exited. Only a little while: stubs still running keep the pipe open.
        pump.join(_DRAIN_TIMEOUT_S)
        ended = describe_exit(self.returncode)
        if self._stopped and self.returncode == -signal.SIGKILL:
            ended = "killed by its stop (it had not exited by itself)"
        logger.info("tritonserver (pid %d) %s", self._process.pid, ended)
        self._set_state(ServerState.EXITED)
        self._say_exited()

    def _say_exited(self) -> None:
        with self._changed:
            if self._exit_writer >= 0:
                os.write(self._exit_writer, b"x")

    def _pump_log(self) -> None:
        fd = os.open(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with open(fd, "ab", buffering=0) as log:
            for line in self._process.stdout:
                log.write(line)
                text = line.decode("utf-8", "replace").rstrip()
                self._tail.append(text)
                if _ERROR_LINE.match(text) and not any(harmless in text for harmless in _HARMLESS):
                    self._errors.append(text)
                if self._state is ServerState.STARTING:
                    self._note_started(text)
                said = _SIGNAL_LINE.match(text)
                signum = int(said.group(1)) if said is not None else None
                if signum in _FATAL_SIGNALS and self._fatal_signal is None:
                    self._fatal_signal = signum
                    timer = threading.Timer(_FATAL_GRACE_S, self._kill_if_hung)
                    timer.daemon = True
                    timer.start()
        self._process.stdout.close()

    def _kill_if_hung(self) -> None:
        """Kill a server that announced a fatal signal and did not end (see ``_SIGNAL_LINE``)."""
        if self.returncode is None and self._process.poll() is None:
            logger.warning("tritonserver (pid %d) hangs after signal %d; killing it", self._process.pid,
                           self._fatal_signal)
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()

    def _note_started(self, text: str) -> None:
        for endpoint, marker in _STARTED.items():
            if marker in text:
                self._started.add(endpoint)
        if self._endpoints <= self._started:
            self._set_state(ServerState.READY)

    def _set_state(self, state: ServerState) -> None:
        with self._changed:
            if self._state is not ServerState.EXITED:
                self._state = state
            self._changed.notify_all()

    def wait_exit(self, timeout_s: Optional[float] = None) -> bool:
        """Wait until the process exited; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._state is ServerState.EXITED, timeout_s)

    def log_tail(self) -> str:
        """The last lines the server printed, once what it wrote is read from its pipe (up to
        ``_DRAIN_TIMEOUT_S``): an error answered over HTTP can come before the log line saying why."""
        deadline = time.monotonic() + _DRAIN_TIMEOUT_S
        while self._unread_output() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.02)  # the log thread files the lines it has just read
        return "\n".join(self._tail)

    def _unread_output(self) -> int:
        """Bytes the server wrote that the log thread has not read yet."""
        stdout = self._process.stdout if self._process is not None else None
        if stdout is None or stdout.closed:
            return 0
        pending = array.array("i", [0])
        try:
            fcntl.ioctl(stdout.fileno(), termios.FIONREAD, pending)
        except (OSError, ValueError):  # closed meanwhile
            return 0
        return pending[0]

    def stub_regions(self) -> List[str]:
        """The shared-memory regions named on the command lines of the server's stubs still running.

        tritonserver creates a region for each stub it launches and removes it when the stub is
        finalised; a server stopped while a model loads, or one that crashed, leaves them behind.
        """
        if self._process is None:
            return []
        return [arg for cmdline in _group_cmdlines(self._process.pid) for arg in cmdline if arg.startswith(STUB_REGION_PREFIX)]

    def protect_stub_regions(self) -> None:
        """Make the shared-memory regions of the running stubs owner-only.

        Triton's Python backend creates each stub's region mode 0644 whatever the umask (it sets
        the mode itself), so local users could read a stub's requests; call this after each load.
        """
        for name in self.stub_regions():
            try:
                os.chmod(os.path.join(SHM_DIR, name), 0o600)
            except FileNotFoundError:
                pass  # the stub ended meanwhile

    def stop(self, timeout_s: float) -> bool:
        """SIGINT (Triton's graceful stop), then SIGKILL after ``timeout_s``; waits for the exit.

        Returns:
            False if the server had to be killed (the caller knows whether that lost anything).
        """
        with self._changed:
            self._stopped = True
            process = self._process
        if process is None:
            self._close_exit_pipe()
            return True
        exited_by_itself = True
        if self._state is not ServerState.EXITED:
            _signal(process, signal.SIGINT)
            if not self.wait_exit(timeout_s):
                exited_by_itself = False
                _kill_group(process.pid)
                self.wait_exit(10)
        # Stubs a server left (it was stopped while loading a model, or crashed) are still in
        # its process group.
        _kill_group(process.pid)
        if self._reaper is not None:
            stop_reaper(self._reaper)
        self._close_exit_pipe()
        return exited_by_itself

    def _close_exit_pipe(self) -> None:
        with self._changed:
            for fd in (self._exit_reader, self._exit_writer):
                if fd >= 0:
                    os.close(fd)
            self._exit_reader = self._exit_writer = -1


def _kill_group(pgid: int) -> None:
    """SIGKILL every process of the group: the server started its own session, stubs included."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _group_cmdlines(pgid: int) -> List[List[str]]:
    """The command lines of the processes in process group ``pgid`` (from /proc)."""
    return [cmdline for _, cmdline in group_members(pgid)]


def _signal(process: subprocess.Popen, signum: int) -> None:
    try:
        process.send_signal(signum)
    except ProcessLookupError:
        pass

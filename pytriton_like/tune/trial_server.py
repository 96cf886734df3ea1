"""One trial's server: ``pytriton_like serve`` of the callable with the trial's settings, on free
loopback ports, in a process of its own, stopped so that nothing of it is left.

``serve`` builds the binding from the same flags the user gave ``tune`` (the trial's settings
added as flags), so a trial serves exactly what ``serve`` would. Its readiness is its line
``serving; press CTRL+C to stop``; a start that fails because a port was taken meanwhile is
tried again on other ports.
"""

import asyncio
import collections
import contextlib
import os
import signal
import sys
from typing import Deque, List, Optional, Sequence

from ..console import PREFIX
from ..server.parent_death import with_parent_death_signal
from ..server.process import free_ports
from .settings import Settings
from .usage import ProcessTree

__all__ = ["TrialServer", "StartFailure"]

READY_LINE = "serving; press CTRL+C to stop"
_PORT_TAKEN = "is already in use"
_ERROR = "pytriton_like serve: error: "
_PORT_TRIES = 3
_TAIL_LINES = 40
_STOP_GRACE_S = 60.0
# Trial servers listen on the loopback interface only (serve's default is every interface).
_LOOPBACK = {f"PYTRITON_TRITON_CONFIG_{name}_ADDRESS": "127.0.0.1" for name in ("HTTP", "GRPC", "METRICS")}


class StartFailure(Exception):
    """The trial's server did not become ready; the message ends with its last lines."""


class TrialServer:
    """``pytriton_like serve TARGET FLAGS... SETTINGS...`` until :meth:`stop`.

    Args:
        target: ``MODULE:CALLABLE`` as the user gave it.
        model_flags: the model's flags as the user gave them (``--input``, ``--output``, ``--strict``...).
        settings: the trial's settings, added as serve's flags.
        model_name: the name to serve it by.
        cwd: where ``serve`` runs (MODULE is imported from there).
        start_timeout_s: how long a start may take.
    """

    def __init__(self, target: str, model_flags: Sequence[str], settings: Settings, model_name: str, *,
                 cwd: str, start_timeout_s: float):
        self._target = target
        self._model_flags = list(model_flags)
        self.settings = settings
        self.model_name = model_name
        self._cwd = cwd
        self._start_timeout_s = start_timeout_s
        self._process: Optional[asyncio.subprocess.Process] = None
        self._reader: Optional[asyncio.Task] = None
        self._ready = asyncio.Event()
        self.tail: Deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self.http_port = 0
        self.tree: Optional[ProcessTree] = None

    def argv(self, ports: Sequence[int]) -> List[str]:
        http, grpc, metrics = ports
        return [
            sys.executable, "-m", "pytriton_like", "serve", self._target, *self._model_flags,
            "--model-name", self.model_name, *self.settings.serve_flags(),
            "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
        ]

    async def start(self) -> None:
        """Start it and wait until it serves; raises :class:`StartFailure` with its last lines."""
        for attempt in range(_PORT_TRIES):
            ports = free_ports(3)
            try:
                await self._start_once(ports)
                return
            except StartFailure as exc:
                if _PORT_TAKEN not in str(exc) or attempt == _PORT_TRIES - 1:
                    raise

    async def _start_once(self, ports: Sequence[int]) -> None:
        self.tail.clear()
        self._ready = asyncio.Event()
        # if tune dies (even by SIGKILL), serve gets SIGINT and stops as it does at a Ctrl-C, its
        # tritonserver and workers with it
        self._process = await asyncio.create_subprocess_exec(
            *with_parent_death_signal(self.argv(ports), signal.SIGINT), cwd=self._cwd,
            env={**os.environ, **_LOOPBACK},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C at the terminal is tune's to handle: it stops the trial itself
        )
        self.tree = ProcessTree(self._process.pid)
        self.http_port = ports[0]
        self._reader = asyncio.ensure_future(self._read())
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait([ready, self._reader], timeout=self._start_timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if self._ready.is_set():
            return
        if self._process.returncode is None and not self._reader.done():
            await self.stop()
            raise StartFailure(f"not serving after {self._start_timeout_s:g} s (--start-timeout-s):\n{self.last_lines()}")
        code = self._process.returncode
        await self.stop()
        errors = [line.split(_ERROR, 1)[1] for line in self.tail if _ERROR in line]
        said = errors[-1] if errors else f"serve exited with {code}"
        raise StartFailure(f"{said}; serve's last lines:\n{self.last_lines()}")

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        while True:
            line = await self._process.stdout.readline()
            if not line:
                break
            text = line.decode("utf-8", "replace").rstrip()
            self.tail.append(text)
            if READY_LINE in text:
                self._ready.set()
        await self._process.wait()

    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    def last_lines(self, count: int = 12) -> str:
        lines = list(self.tail)[-count:]
        return "\n".join(f"    {line[len(PREFIX):] if line.startswith(PREFIX) else line}" for line in lines)

    async def stop(self) -> None:
        """SIGINT, as a user stops serve; after a grace period SIGKILL for it and what it started."""
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(process.wait(), _STOP_GRACE_S)
            except asyncio.TimeoutError:
                members = self.tree.refresh() if self.tree is not None else {}
                for pid in [process.pid, *members]:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                await process.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._reader, 10)
            self._reader = None
        self._process = None

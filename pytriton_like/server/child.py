"""tritonserver as a supervised :class:`~pytriton_like.supervisor.Child`: when it dies, the same
server is started again, on the same ports, with the models loaded at that moment.

Only tritonserver comes back: the user's process, its loaded models, the relay servers and the
worker processes stay, and the new server's backend instances connect to them again.
"""

import pathlib
import threading
from typing import Callable, Dict, List, Optional, Sequence

from ..supervisor import Child
from .memory_watch import MemoryWatch
from .process import ServerProcess

__all__ = ["TritonServerChild"]


class TritonServerChild(Child):
    """The tritonserver of one run, across its restarts.

    Args:
        command: tritonserver's command line for its ``n``-th restart (0: the first start).
        env: its environment.
        log_file: where its output goes (appended at each start).
        endpoints: the endpoints it must say it started ("HTTP", "gRPC", "metrics").
        models_ready: checks, once the endpoints listen, that the models it loaded are ready
            (raises ``PyTritonServerError`` when one is not).
        start_timeout_s: how long a start may take.
        on_back: called once a restarted server serves.
        memory_growth_bytes: a server whose memory stays this much above what it held once it
            served is restarted (:class:`~.memory_watch.MemoryWatch`); 0: never.
    """

    name = "tritonserver"

    def __init__(
        self,
        *,
        command: Callable[[int], Sequence[str]],
        env: Dict[str, str],
        log_file: pathlib.Path,
        endpoints: List[str],
        models_ready: Callable[[], None],
        start_timeout_s: float,
        on_back: Callable[[], None],
        memory_growth_bytes: int = 0,
    ):
        self.process: Optional[ServerProcess] = None
        self._command = command
        self._env = env
        self._log_file = log_file
        self._endpoints = endpoints
        self._models_ready = models_ready
        self._start_timeout_s = start_timeout_s
        self._on_back = on_back
        self._starts = 0
        self._serving = threading.Condition()
        self._up = False  # the current process serves
        self._abandoned = False  # stopped, or its supervisor gave up: it serves no more
        self._memory = MemoryWatch(memory_growth_bytes) if memory_growth_bytes else None

    def start(self) -> None:
        if self.process is not None:  # what the dead one left: its stubs, its reaper
            self.process.stop(timeout_s=0)
        self.process = ServerProcess(self._command(self._starts), self._env, self._log_file, self._endpoints)
        self._starts += 1
        self.process.spawn()

    def ready(self) -> None:
        self.process.wait_ready(self._start_timeout_s)
        self._models_ready()
        self.process.protect_stub_regions()
        if self._memory is not None:
            self._memory.watch(self.process.pid, self.process.end_on_purpose)
        self._set_up(True)

    def sentinel(self) -> int:
        return self.process.exit_fd

    def exit_cause(self) -> str:
        return self.process.exit_cause()

    def exit_details(self) -> str:
        return f"the end of its log:\n{self.process.log_tail()}"

    def ended_on_purpose(self) -> str:
        return self.process.ended_because or ""

    def stop(self) -> None:
        self.abandon()
        self.end_watch()
        if self.process is not None:
            self.process.stop(timeout_s=self._start_timeout_s)

    def end_watch(self) -> None:
        """Watch the server's memory no more (it is being stopped on purpose). Idempotent."""
        if self._memory is not None:
            self._memory.close()

    def lost(self) -> None:
        self._set_up(False)

    def back(self) -> None:
        self._on_back()

    def serving(self) -> bool:
        """Whether the server serves now (its process runs, and no restart is under way)."""
        process = self.process
        return self._up and process is not None and process.returncode is None

    def wait_serving(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the server to serve (now, or once a restart under way is
        done); False if it does not by then, or will not (see :meth:`abandon`)."""
        with self._serving:
            self._serving.wait_for(lambda: self.serving() or self._abandoned, timeout_s)
            return self.serving()

    def abandon(self) -> None:
        """It serves no more and is not started again (stopped, or its supervisor gave up): nothing waits for it."""
        with self._serving:
            self._up, self._abandoned = False, True
            self._serving.notify_all()

    def log_tail(self) -> str:
        """The last lines the current server printed."""
        return self.process.log_tail() if self.process is not None else ""

    def protect_stub_regions(self) -> None:
        """Make the current server's stubs' shared-memory regions owner-only (after each load)."""
        if self.process is not None:
            self.process.protect_stub_regions()

    def models_changed(self) -> None:
        """A model was loaded or unloaded: what the server holds now is its memory's new baseline."""
        if self._memory is not None:
            self._memory.rebaseline()

    def restart(self, reason: str) -> None:
        """Stop the current server for ``reason``; its supervisor starts it again, with the models
        loaded now (:meth:`wait_serving` waits for that)."""
        self._set_up(False)
        if self.process is not None:
            self.process.end_on_purpose(reason)

    def _set_up(self, up: bool) -> None:
        with self._serving:
            self._up = up
            self._serving.notify_all()

"""``Triton.serve()``: run, block until a signal or ``stop()``, drain on SIGTERM, stop.

A part of :class:`pytriton_like.triton.Triton` (it inherits :class:`Serving`); what the signals
ask is kept by :class:`~pytriton_like.server.signals.StopRequests`.
"""

import logging
from typing import Optional

from .console import Console
from .exceptions import PyTritonServerError
from .remote import MONITORING_PERIOD_S
from .server.config import TritonConfig
from .server.drain import drain
from .server.lifecycle import TritonState
from .server.process import ServerState
from .server.signals import SignalWhileStarting, StopRequests, handling_signals
from .startup import ServerRun

__all__ = ["Serving"]

logger = logging.getLogger("pytriton_like.triton")  # the logger of Triton, which these methods are part of


class Serving:
    """``serve()`` and its signal handling (a mixin: ``Triton`` sets the attributes below and
    defines ``run``, ``stop`` and ``is_alive``)."""

    _state: TritonState
    _config: TritonConfig
    _console: Console
    _stops: StopRequests
    _run: Optional[ServerRun]
    _given_up: Optional[str]

    def serve(self, monitoring_period_s: float = MONITORING_PERIOD_S) -> None:
        """Run the server and block until SIGINT or SIGTERM (or :meth:`stop`), then stop it.

        Signal handlers are installed only when called from the main thread; from another
        thread, call :meth:`stop` to end it. A signal that comes while the server is still
        starting cuts the start short; ``serve()`` then returns as well, once all is stopped.

        While it serves, a process of the server that dies is started again — tritonserver on the
        same ports with the same models, the OpenAI endpoint, a worker process — within the
        bounds of ``TritonConfig`` and ``WorkerOptions`` (docs/reliability.md).

        Args:
            monitoring_period_s: how often to check that serving goes on (a process that dies is
                noticed at once anyway).

        Raises:
            PyTritonServerError: the server failed to start, or the run's supervisor gave up (a
                process of the server died once more than its restart policy allows): the message
                says which, how it ended, and shows the end of tritonserver's log, so that an
                orchestrator (systemd, Kubernetes) sees a failure.
        """
        self._console.printing = True
        try:
            with handling_signals(self._on_signal):
                try:
                    if self._state is TritonState.RUNNING:  # run() before: its lines were only logged
                        self._run.say_started(logged=False)
                    self.run()
                    self._console.say("serving; press CTRL+C to stop")
                    while not self._stops.requested.wait(monitoring_period_s):
                        if self._given_up is not None:
                            break
                    if self._stops.drain:
                        self._drain()
                except SignalWhileStarting:
                    pass  # the handler said so, and run() stopped what it had started
        finally:
            self.stop()
            self._console.printing = False
        if self._given_up is not None:
            policy = self._config.restart_policy()
            raise PyTritonServerError(
                f"{self._given_up}; so the run gave up while serving, and was not started again (TritonConfig."
                f"max_restarts={policy.max_restarts} within restart_window_secs={policy.window_s:g}; docs/reliability.md)",
                log_tail=self._run.server.log_tail(),
            )

    def _on_signal(self, signum, _frame) -> None:
        server = self._run.server if self._run is not None else None
        self._stops.on_signal(
            signum,
            starting=self._state is TritonState.NEW,
            answering=server is not None and server.state is ServerState.READY,
            running=self._state is TritonState.RUNNING,
        )

    def _drain(self) -> None:
        """Report not ready and go on serving for ``drain_secs`` (docs/deployment.md); stop() follows."""
        seconds = self._config.drain_time()
        server = self._run.server if self._run is not None else None
        if seconds <= 0 or self._state is not TritonState.RUNNING or server is None or server.returncode is not None:
            return  # nothing serves that could drain (a model whose worker processes are being restarted still drains)
        control = self._run.models.control if self._run.models is not None else None
        drain(seconds, control, self._config.strict_readiness, self._run.workspace.model_repository, self._console,
              self._stops.drain_over)

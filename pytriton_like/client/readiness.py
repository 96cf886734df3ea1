"""Waiting for the server and a model to be ready: deadline, backoff and verdict (no I/O).

The sync and asyncio clients each run a short loop around :class:`ReadinessWaiter`:
probe, record, and either return, fail with :meth:`ReadinessWaiter.failure`, or sleep
:meth:`ReadinessWaiter.next_delay`. Triton has no readiness notification, so polling
with a short backoff is the only way to wait; it lives only here.
"""

import enum
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .error_mapping import ErrorContext
from .exceptions import (
    PyTritonClientError,
    PyTritonClientModelNotReadyError,
    PyTritonClientTimeoutError,
)

__all__ = ["Readiness", "ModelState", "ReadinessWaiter", "model_state_from_index"]

_FIRST_DELAY_S = 0.01
_MAX_DELAY_S = 0.5


class Readiness(enum.Enum):
    """What one probe found."""

    SERVER_NOT_READY = "server not ready"
    MODEL_NOT_READY = "model not ready"
    READY = "ready"


class ModelState(enum.Enum):
    """State of a model version in the server's repository index."""

    LOADING = "LOADING"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"
    READY = "READY"


def model_state_from_index(
    entries: List[Dict[str, Any]], model_name: str, model_version: Optional[str]
) -> Tuple[ModelState, Optional[str]]:
    """State (and the server's reason, if any) of a model in a repository index.

    Args:
        entries: the index's entries as Triton's HTTP endpoint writes them (``ClientCore.raw_index``).
        model_name: the model.
        model_version: the version (``None``: the numerically greatest one listed).

    Returns:
        ``(state, reason)``; ``UNAVAILABLE`` when the model (version) is not listed.
    """
    versions: Dict[str, Tuple[ModelState, Optional[str]]] = {}
    for entry in entries:
        if entry.get("name") != model_name or not entry.get("version"):
            continue
        state = entry.get("state")
        versions[str(entry["version"])] = (ModelState(state) if state else ModelState.LOADING, entry.get("reason"))
    if model_version:
        return versions.get(str(model_version), (ModelState.UNAVAILABLE, None))
    numeric = [version for version in versions if version.isdigit()]
    if not numeric:
        return ModelState.UNAVAILABLE, None
    return versions[max(numeric, key=int)]


class ReadinessWaiter:
    """Deadline, backoff and verdict of one wait for the server and model to be ready.

    Args:
        timeout_s: how long the whole wait may take.
        context: the client's error context (model, url) for the verdict.
        clock: monotonic clock, replaceable in tests.
    """

    def __init__(
        self,
        timeout_s: float,
        context: ErrorContext,
        clock: Callable[[], float] = time.monotonic,
        asyncio_words: bool = False,
    ):
        self._asyncio_words = asyncio_words  # PyTriton's asyncio clients word their timeouts otherwise
        self._timeout_s = timeout_s
        self._context = context
        self._clock = clock
        self._deadline = clock() + timeout_s
        self._delay = _FIRST_DELAY_S
        self._last: Optional[Readiness] = None
        self._last_error: Optional[PyTritonClientError] = None
        self._server_seen_up = False

    @property
    def timeout_s(self) -> float:
        """The timeout of the whole wait."""
        return self._timeout_s

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self._deadline - self._clock())

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self._clock() >= self._deadline

    def record(self, readiness: Readiness) -> None:
        """Records what a probe found."""
        self._last = readiness
        self._last_error = None
        if readiness is not Readiness.SERVER_NOT_READY:
            self._server_seen_up = True

    def record_error(self, error: PyTritonClientError) -> None:
        """Records a probe that failed (server unreachable, probe timed out...)."""
        self._last_error = error
        if not self._server_seen_up:
            self._last = Readiness.SERVER_NOT_READY
        # else: keep what the server last said; a probe cut short by the deadline (or a busy
        # server) does not mean the server went away

    @property
    def last_error(self) -> Optional[PyTritonClientError]:
        """The error of the last probe, if it failed; the verdict chains it."""
        return self._last_error

    def needs_model_state(self) -> bool:
        """Whether :meth:`failure` would tell more with the model's state (the server was up, the model not)."""
        return self._last is Readiness.MODEL_NOT_READY

    def next_delay(self) -> float:
        """How long to sleep before the next probe: doubling from 10 ms up to 0.5 s, never past the deadline."""
        delay = min(self._delay, self.remaining())
        self._delay = min(self._delay * 2, _MAX_DELAY_S)
        return delay

    def failure(self, model_state: Optional[Tuple[ModelState, Optional[str]]] = None) -> PyTritonClientError:
        """The error to raise once the deadline passed.

        Args:
            model_state: the model's state in the repository index, when the server is up
                and could tell.

        Returns:
            :class:`PyTritonClientModelUnavailableError` if the server is ready but does not
            list the model (version) or lists it as unavailable; otherwise
            :class:`PyTritonClientTimeoutError`.
        """
        context = self._context
        attributes = context.attributes()
        waited = f"within {self._timeout_s:g} s"
        # PyTriton's words first, so code matching them keeps working; then ours.
        if self._asyncio_words:
            model_timed_out = (
                f"Timeout while waiting for model {context.model_name} to be ready (timeout={self._timeout_s:0.2f}): "
            )
        else:
            model_timed_out = (
                f"Waiting for model {context.model_name}/{context.model_version or '<latest>'} to be ready timed out: "
            )
        if self._last is Readiness.MODEL_NOT_READY and model_state is not None:
            state, reason = model_state
            if state is ModelState.UNAVAILABLE:
                because = f": {reason}" if reason else " (not in the server's repository index or failed to load)"
                return PyTritonClientModelNotReadyError(
                    f"{model_timed_out}model {context.model_name!r} ({_version(context)}) is not available at"
                    f" {context.url}{because}",
                    timeout_s=self._timeout_s,
                    **attributes,
                )
            return PyTritonClientTimeoutError(
                f"{model_timed_out}model {context.model_name!r} ({_version(context)}) at {context.url} was not ready"
                f" {waited} (state {state.value})",
                timeout_s=self._timeout_s,
                **attributes,
            )
        if self._last is Readiness.MODEL_NOT_READY:
            what = f"{model_timed_out}model {context.model_name!r} ({_version(context)}) at {context.url} was not ready {waited}"
        else:
            what = f"Waiting for server to be ready timed out: server at {context.url} was not ready {waited}"
            if self._last_error is not None:
                what += f"; last error: {self._last_error.message}"
        return PyTritonClientTimeoutError(what, timeout_s=self._timeout_s, **attributes)


def _version(context: ErrorContext) -> str:
    return f"version {context.model_version}" if context.model_version else "latest version"

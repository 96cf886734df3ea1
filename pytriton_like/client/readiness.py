"""Waiting for the server and a model to be ready: deadline, backoff, warnings and verdict (no I/O).

The wait is written once, as :func:`wait_steps`: probe, record, and either return, fail with
:meth:`ReadinessWaiter.failure`, or sleep :meth:`ReadinessWaiter.next_delay`. The sync and
asyncio clients run it with :func:`run_wait` and :func:`run_wait_async`, which do only the I/O
it asks for. Triton has no readiness notification, so polling with a short backoff is the only
way to wait; its delays are :class:`pytriton_like.polling.Backoff`'s, the one back-off of every
wait for the server.

A wait does not pass in silence: when the server is up and the model is not ready, the
client reads the server's repository index at once and then every 10 s
(:meth:`ReadinessWaiter.report_due`), and :meth:`ReadinessWaiter.report` logs a WARNING when
the index shows the model missing (naming the models the server has), not loaded or failed
to load, or when the server would not show its index. The wait itself lasts its whole
timeout, as PyTriton's does: the model may be bound later.
"""

import dataclasses
import difflib
import enum
import logging
import time
from typing import Any, Awaitable, Callable, Dict, Generator, List, Optional, Tuple, Union

from ..polling import Backoff
from .error_mapping import ErrorContext
from .exceptions import (
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientModelUnavailableError,
    PyTritonClientModelUnavailableTimeoutError,
    PyTritonClientTimeoutError,
)

__all__ = [
    "Readiness",
    "ModelState",
    "IndexAnswer",
    "ReadinessWaiter",
    "model_state_from_index",
    "why_unavailable",
    "NOT_YET",
    "wait_steps",
    "run_wait",
    "run_wait_async",
]

_LOGGER = logging.getLogger(__name__)

# Probe errors that mean "not ready yet": keep polling until the deadline.
NOT_YET = (PyTritonClientModelUnavailableError, PyTritonClientTimeoutError, PyTritonClientInferenceServerError)
_PROBE = "probe"
_INDEX = "index"

# How often a wait for a model that is not ready says why.
REPORT_EVERY_S = 10.0
# How long a wait stays quiet about a model listed but never loaded: a server just up loads it next.
LOAD_GRACE_S = 2.0
# Longest list of the server's models in a message.
_MAX_LISTED = 20


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


@dataclasses.dataclass(frozen=True)
class IndexAnswer:
    """What the server answered when asked for its repository index: the entries (as
    ``ClientCore.raw_index`` gives them), or the error that kept them from the client."""

    entries: Optional[List[Dict[str, Any]]] = None
    error: Optional[PyTritonClientError] = None


def why_unavailable(
    entries: List[Dict[str, Any]], model_name: str, model_version: Optional[str], url: str
) -> Optional[str]:
    """Why a repository index says the model (version) cannot become ready by itself; ``None`` if
    it is ready, loading or unloading.

    The reasons: not in the index (the message names the models there and a close match), in the
    repository but never loaded, no such version, or unavailable (unloaded, failed to load: the
    server's reason).
    """
    listed = [entry for entry in entries if entry.get("name") == model_name]
    if not listed:
        names = sorted({str(entry.get("name")) for entry in entries if entry.get("name")})
        by_lower = {name.lower(): name for name in names}
        close = difflib.get_close_matches(model_name.lower(), list(by_lower), n=1)
        hint = f" (did you mean {by_lower[close[0]]!r}?)" if close else ""
        return f"model {model_name!r} is not in the repository of the server at {url}{hint}; {_listing(names)}"
    versions = sorted({str(entry["version"]) for entry in listed if entry.get("version")}, key=_version_key)
    if not versions:
        return (
            f"model {model_name!r} is in the repository of the server at {url} but not loaded"
            " (load it with the client's or Triton's load_model())"
        )
    if model_version and str(model_version) not in versions:
        return f"model {model_name!r} has no version {model_version} at {url}; its versions: {', '.join(versions)}"
    state, reason = model_state_from_index(entries, model_name, model_version)
    if state is not ModelState.UNAVAILABLE:
        return None
    which = f"version {model_version}" if model_version else "latest version"
    return f"model {model_name!r} ({which}) at {url} is not available" + (f": {reason}" if reason else "")


def _listing(names: List[str]) -> str:
    if not names:
        return "the server has no models"
    shown = ", ".join(names[:_MAX_LISTED])
    more = f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else ""
    return f"the server has: {shown}{more}"


def _version_key(version: str) -> Tuple[int, str]:
    return (int(version), "") if version.isdigit() else (-1, version)


def _index_unreadable(error: PyTritonClientError) -> str:
    """Why the client cannot tell whether the server has the model: its index was refused (or failed)."""
    detail = error.message.split(" failed: ", 1)[-1]
    text = f"the server did not show its repository index, which would tell whether it has the model ({detail})"
    if "restricted" in detail:
        text += "; pass access_token= to the client (see docs/security.md)"
    return text


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
        self._backoff = Backoff(timeout_s, clock)
        self._last: Optional[Readiness] = None
        self._last_error: Optional[PyTritonClientError] = None
        self._server_seen_up = False
        self._next_report: Optional[float] = None
        self._quiet_until = 0.0  # LOAD_GRACE_S after the server was first seen up

    @property
    def timeout_s(self) -> float:
        """The timeout of the whole wait."""
        return self._timeout_s

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return self._backoff.remaining()

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self._backoff.expired()

    def record(self, readiness: Readiness) -> None:
        """Records what a probe found."""
        self._last = readiness
        self._last_error = None
        if readiness is not Readiness.SERVER_NOT_READY and not self._server_seen_up:
            self._server_seen_up, self._quiet_until = True, self._clock() + LOAD_GRACE_S

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

    def report_due(self) -> bool:
        """Whether to read the repository index and :meth:`report` now: the server is up, the
        model is not ready, and nothing was reported yet or for :data:`REPORT_EVERY_S`."""
        return self._last is Readiness.MODEL_NOT_READY and (
            self._next_report is None or self._clock() >= self._next_report
        )

    def report(self, answer: IndexAnswer) -> None:
        """Log a WARNING saying why the model is not ready, when the index tells (or was refused).

        A model that is loading or unloading gets no warning: it is on its way; nor, for
        :data:`LOAD_GRACE_S` after the server was first seen up, one listed but never loaded.
        """
        now = self._clock()
        self._next_report = now + REPORT_EVERY_S
        context = self._context
        if answer.entries is not None:
            why = why_unavailable(answer.entries, context.model_name, context.model_version, context.url)
            if why is None:
                return
            listed = [entry for entry in answer.entries if entry.get("name") == context.model_name]
            if now < self._quiet_until and listed and not any(entry.get("version") for entry in listed):
                self._next_report = self._quiet_until
                return
        else:
            why = f"model {context.model_name!r} ({_version(context)}) at {context.url} is not ready; "
            why += _index_unreadable(answer.error) if answer.error is not None else "the server did not say why"
        _LOGGER.warning(
            "%s; waiting up to %.0f s more for it (timeout %g s, in case it is bound or loaded meanwhile)",
            why,
            self.remaining(),
            self._timeout_s,
        )

    def next_delay(self) -> float:
        """How long to sleep before the next probe: doubling from 10 ms up to 0.5 s, never past the deadline."""
        return self._backoff.next_delay()

    def failure(self, answer: Optional[IndexAnswer] = None) -> PyTritonClientError:
        """The error to raise once the deadline passed.

        Args:
            answer: the server's repository index (or why it could not be read), when the server
                was up and the model was not ready (:meth:`needs_model_state`).

        Returns:
            :class:`PyTritonClientModelUnavailableTimeoutError` if the index shows the model
            (version) missing, not loaded or unavailable — the message names the models the
            server has —; otherwise :class:`PyTritonClientTimeoutError`.
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
        if self._last is Readiness.MODEL_NOT_READY:
            what = f"{model_timed_out}model {context.model_name!r} ({_version(context)}) at {context.url} was not ready {waited}"
            if answer is not None and answer.entries is not None:
                why = why_unavailable(answer.entries, context.model_name, context.model_version, context.url)
                if why is not None:
                    return PyTritonClientModelUnavailableTimeoutError(
                        f"{model_timed_out}{why}; waited {self._timeout_s:g} s for it",
                        timeout_s=self._timeout_s,
                        **attributes,
                    )
                state, _ = model_state_from_index(answer.entries, context.model_name, context.model_version)
                what += f" (state {state.value})"
            elif answer is not None and answer.error is not None:
                what += f"; {_index_unreadable(answer.error)}"
        else:
            what = f"Waiting for server to be ready timed out: server at {context.url} was not ready {waited}"
            if self._last_error is not None:
                what += f"; last error: {self._last_error.message}"
        return PyTritonClientTimeoutError(what, timeout_s=self._timeout_s, **attributes)


def _version(context: ErrorContext) -> str:
    return f"version {context.model_version}" if context.model_version else "latest version"


Step = Union[str, float]  # "probe", "index", or seconds to sleep


def wait_steps(waiter: ReadinessWaiter) -> Generator[Step, Any, None]:
    """The readiness wait, without I/O: what to do next, until ready (returns) or the time is up (raises).

    Yields ``"probe"`` (send the :class:`Readiness` the probe found, or the :data:`NOT_YET`
    error it raised), ``"index"`` (send the :class:`IndexAnswer`), or a number of seconds to
    sleep (send ``None``).

    Raises:
        PyTritonClientTimeoutError: the wait's timeout passed (or its
            :class:`PyTritonClientModelUnavailableTimeoutError` branch, see :meth:`ReadinessWaiter.failure`).
    """
    while True:
        outcome = yield _PROBE
        if isinstance(outcome, Readiness):
            if outcome is Readiness.READY:
                return
            waiter.record(outcome)
        else:
            waiter.record_error(outcome)
        if waiter.expired():
            answer = (yield _INDEX) if waiter.needs_model_state() else None
            raise waiter.failure(answer) from waiter.last_error
        if waiter.report_due():
            waiter.report((yield _INDEX))
        yield waiter.next_delay()


def run_wait(
    waiter: ReadinessWaiter,
    probe: Callable[[], Readiness],
    index: Callable[[], IndexAnswer],
    pause: Callable[[float], None],
) -> None:
    """Runs :func:`wait_steps` with blocking I/O."""
    steps = wait_steps(waiter)
    step = next(steps)
    while True:
        if step == _PROBE:
            try:
                result: Any = probe()
            except NOT_YET as exc:
                result = exc
        elif step == _INDEX:
            result = index()
        else:
            pause(step)
            result = None
        try:
            step = steps.send(result)
        except StopIteration:
            return


async def run_wait_async(
    waiter: ReadinessWaiter,
    probe: Callable[[], Awaitable[Readiness]],
    index: Callable[[], Awaitable[IndexAnswer]],
    pause: Callable[[float], Awaitable[None]],
) -> None:
    """Runs :func:`wait_steps` with asyncio I/O (the same steps as :func:`run_wait`, awaited)."""
    steps = wait_steps(waiter)
    step = next(steps)
    while True:
        if step == _PROBE:
            try:
                result: Any = await probe()
            except NOT_YET as exc:
                result = exc
        elif step == _INDEX:
            result = await index()
        else:
            await pause(step)
            result = None
        try:
            step = steps.send(result)
        except StopIteration:
            return

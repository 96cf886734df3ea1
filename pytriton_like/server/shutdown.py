"""Stopping a server ``Triton`` started: unload every model, stop the process, remove what it left.

Unloading comes first: Triton's own stop waits out its exit timeout while any HTTP client keeps a
connection open, and then exits without finalising the models. Unloading lets in-flight requests
finish (for up to the exit timeout) and the models finalise; after that, nothing is lost by
cutting the server's stop short.
"""

import logging
import os
import time
from typing import Callable, Iterable, List, Optional, Sequence

from ..polling import poll
from ..relay.shm import SHM_DIR, STUB_REGION_PREFIX, is_segment_name
from .control import ControlError, ServerControl
from .drain import DRAINING_MODEL
from .process import ServerProcess

__all__ = ["stop_server", "DEFAULT_EXIT_TIMEOUT_S"]

logger = logging.getLogger(__name__)

DEFAULT_EXIT_TIMEOUT_S = 30
# Once the models are unloaded nothing is in flight: Triton gets this long to exit by itself
# (it takes about 1 s).
_GRACE_AFTER_UNLOAD_S = 3
# While models unload: how long our relay servers must sit idle before the stop no longer waits
# for Triton to finish the unload: where only bound models are left (with no batch in flight they
# have nothing left to finish; Triton's unload returns once they are done), and where a model of
# the user's repository is left too (a Python backend's stub may take seconds to end).
_IDLE_BEFORE_GIVING_UP_BOUND_S = 1
_IDLE_BEFORE_GIVING_UP_S = 3


def stop_server(
    server: ServerProcess,
    control: Optional[ServerControl],
    names: Sequence[str],
    busy: Callable[[], bool],
    idle: Callable[[str], bool],
    exit_timeout_s: float,
    unloaded_hook: Callable[[], None],
) -> None:
    """Unload the models (``names`` first, then any other loaded), stop ``server``, remove its stubs' regions.

    Args:
        control: the server's control calls; ``None`` without the HTTP endpoint (no unload then).
        names: the models of this ``Triton``, those that use others first (ensembles).
        busy: whether a batch is in flight in our relay servers.
        idle: whether a model is bound (has relay servers) and none of them handles a batch.
        exit_timeout_s: how long in-flight requests may take to finish.
        unloaded_hook: called between the unload and the stop (with no callable running).
    """
    regions = set(server.stub_regions())  # Python-backend stubs of the user's repository models
    unloading = control is not None and server.returncode is None
    unloaded = unloading and _unload_models(control, names, busy, idle, exit_timeout_s)
    unloaded_hook()
    if unloading and not unloaded:
        # Triton's own stop would wait for the models it still holds, up to its exit timeout.
        server.stop(timeout_s=0)
    elif unloaded:
        if not server.stop(timeout_s=_GRACE_AFTER_UNLOAD_S):
            # tritonserver 2.51's gRPC shutdown joins an executor thread that can sit in a
            # poll for seconds after large gRPC requests (tens of MiB); nothing is left to lose.
            logger.info("tritonserver was still exiting %.0f s after its models unloaded; stopped it", _GRACE_AFTER_UNLOAD_S)
    elif not server.stop(timeout_s=exit_timeout_s + 5):
        logger.warning("tritonserver did not stop within %.0f s; killed it", exit_timeout_s + 5)
    _remove_regions(regions)


def _unload_models(
    control: ServerControl, names: Sequence[str], busy: Callable[[], bool], idle: Callable[[str], bool], timeout_s: float
) -> bool:
    """Unload every model (bound or not) and wait (up to ``timeout_s``) until they are unloaded.

    Returns whether they unloaded (False: the wait gave up on one Triton holds).
    """
    names = list(names)
    try:
        loaded = [entry["name"] for entry in control.repository_index() if entry.get("state")]
    except ControlError as exc:
        logger.warning("reading the repository index: %s", exc)
        loaded = []
    # The draining model stays failed: the server then reports not ready until it exits.
    for name in names + sorted(set(loaded) - set(names) - {DRAINING_MODEL}):
        try:
            control.unload(name, timeout_s)
        except ControlError as exc:
            logger.warning("unloading model %s: %s", name, exc)
    return _wait_unloaded(control, names + sorted(set(loaded) - set(names)), busy, idle, timeout_s)


def _wait_unloaded(
    control: ServerControl, names: List[str], busy: Callable[[], bool], idle: Callable[[str], bool], timeout_s: float
) -> bool:
    """Wait for the models to unload, up to ``timeout_s``, or until our relay servers sat idle a while.

    Triton 2.51 keeps a decoupled model UNLOADING for good after a gRPC stream of it was
    cancelled by its client, although every request got its final response; once no batch is in
    flight in our relay servers, nothing is lost by not waiting for it.

    Returns whether the models unloaded (False: the wait gave up).
    """
    idle_since: List[float] = []
    gave_up: List[str] = []

    def done() -> bool:
        try:
            left = control.loaded(names)
        except ControlError as exc:
            logger.warning("reading the repository index: %s", exc)
            return True
        if not left:
            return True
        now = time.monotonic()
        if busy():
            idle_since.clear()
            return False
        if not idle_since:
            idle_since.append(now)
        bound = all(idle(name) for name in left)
        patience = _IDLE_BEFORE_GIVING_UP_BOUND_S if bound else _IDLE_BEFORE_GIVING_UP_S
        if now - idle_since[0] < patience:
            return False
        logger.warning(
            "tritonserver has not finished unloading %s although no request is in flight for %.0f s%s; stopping it",
            ", ".join(left), patience,
            " (a gRPC stream its client cancelled holds a decoupled model: docs/known_issues.md)" if bound else "",
        )
        gave_up.extend(left)
        return True

    if not poll(done, timeout_s):
        logger.warning("a model did not unload within %.0f s (a callable still running?)", timeout_s)
        return False
    return not gave_up


def _remove_regions(names: Iterable[str]) -> None:
    """Unlink Triton stub regions a killed server could not (normally gone already)."""
    for name in names:
        if name and is_segment_name(name, prefix=STUB_REGION_PREFIX):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
                logger.warning("removed shared memory %s left by the server", name)
            except FileNotFoundError:
                pass

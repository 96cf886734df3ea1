"""A model served by worker processes reports not ready while none of them serves.

tritonserver 2.51 has no call that marks a loaded model not ready, and its backend API none that
an instance could answer. So when every worker process of a model is lost (being restarted, or
its pool gave up) and none is back within the grace of its restart policy
(:attr:`~pytriton_like.supervisor.RestartPolicy.grace_s`), the model is unloaded, and it is loaded
again once a worker process is back: clients and load balancers see ``/v2/models/<name>/ready``
fail meanwhile, and requests fail at once with "model not ready" instead of waiting. A worker
process back within the grace costs no unload: the backend instances hold their batches for it
that long.
"""

import logging
import threading
import time
from typing import Callable, Optional


__all__ = ["Availability"]

logger = logging.getLogger(__name__)


class Availability:
    """Loads and unloads one model as :meth:`set` says, on a thread of its own, latest wish first.

    Args:
        model_name: the model, for the log.
        load: loads the model (its repository entry is in place); raises on failure.
        unload: unloads every version of the model; raises on failure.
        grace_s: how long a wish to unload waits for a wish to load before it is acted on (the
            worker processes' restart policy's grace).
    """

    def __init__(
        self, model_name: str, load: Callable[[], None], unload: Callable[[], None], grace_s: float
    ):
        self._name = model_name
        self._load, self._unload = load, unload
        self._grace_s = grace_s
        self._changed = threading.Condition()
        self._wanted: Optional[bool] = None  # None: nothing to do
        self._loaded = True
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"pytriton_like-availability-{model_name}", daemon=True)
        self._thread.start()

    def set(self, available: bool) -> None:
        """Ask for the model loaded (``True``) or unloaded; returns at once."""
        with self._changed:
            self._wanted = available
            self._changed.notify()

    def close(self) -> None:
        """Stop acting (whatever is under way finishes first)."""
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join()

    def _next_wish(self) -> Optional[bool]:
        """The next wish to act on (None: closed); an unload only once the grace passed without a load."""
        with self._changed:
            while True:
                while self._wanted is None and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return None
                wanted, self._wanted = self._wanted, None
                if wanted or not self._loaded:
                    return wanted
                deadline = time.monotonic() + self._grace_s
                while self._wanted is None and not self._closed and time.monotonic() < deadline:
                    self._changed.wait(deadline - time.monotonic())
                if self._wanted is None and not self._closed:
                    return False

    def _run(self) -> None:
        while True:
            wanted = self._next_wish()
            if wanted is None:
                return
            if wanted == self._loaded:
                continue
            try:
                if wanted:
                    self._load()
                    logger.warning("model %r is ready again: a worker process serves again", self._name)
                else:
                    logger.warning(
                        "model %r is not ready: none of its worker processes serves, and none came back within %g s",
                        self._name, self._grace_s,
                    )
                    self._unload()
                self._loaded = wanted
            except Exception:  # noqa: BLE001 - logged; the next change tries again
                logger.exception("model %r: could not %s it", self._name, "load" if wanted else "unload")

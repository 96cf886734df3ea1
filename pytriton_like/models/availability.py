"""A model served by worker processes reports not ready while none of its workers lives.

tritonserver 2.51 has no call that marks a loaded model not ready, and its backend API none that
an instance could answer. So while every worker of a model is dead (being restarted, or given
up on) the model is unloaded, and it is loaded again once a worker is back: clients and load
balancers see ``/v2/models/<name>/ready`` fail meanwhile, and requests fail at once with "model
not ready" instead of waiting. Unloading waits for the batches the backend instances hold for
their restarting workers; they are served when the workers come back.
"""

import logging
import threading
from typing import Callable, Optional

__all__ = ["Availability"]

logger = logging.getLogger(__name__)


class Availability:
    """Loads and unloads one model as :meth:`set` says, on a thread of its own, latest wish first.

    Args:
        model_name: the model, for the log.
        load: loads the model (its repository entry is in place); raises on failure.
        unload: unloads every version of the model; raises on failure.
    """

    def __init__(self, model_name: str, load: Callable[[], None], unload: Callable[[], None]):
        self._name = model_name
        self._load, self._unload = load, unload
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

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._wanted is None and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return
                wanted, self._wanted = self._wanted, None
            if wanted == self._loaded:
                continue
            try:
                if wanted:
                    self._load()
                    logger.warning("model %r is ready again: a worker process is back", self._name)
                else:
                    logger.warning("model %r is not ready: none of its worker processes is alive", self._name)
                    self._unload()
                self._loaded = wanted
            except Exception:  # noqa: BLE001 - logged; the next change tries again
                logger.exception("model %r: could not %s it", self._name, "load" if wanted else "unload")

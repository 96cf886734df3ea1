"""Poll mode over the user's model repository: a thread that loads new or changed models and unloads removed ones.

tritonserver itself runs in explicit mode (bound models are loaded through its control API, which
its poll mode refuses), so pytriton_like watches the user's repository the way Triton's poll mode would.
"""

import logging
import threading
from typing import Callable, Dict, Optional

from ..exceptions import PyTritonError
from .user_repository import Fingerprint, ModelRepository

__all__ = ["RepositoryPoller"]

logger = logging.getLogger(__name__)


class RepositoryPoller:
    """Scans ``repository`` every ``interval_s`` seconds until :meth:`stop`.

    Args:
        repository: the user's model repository.
        interval_s: seconds between two scans.
        load: loads (or reloads) a model by name; raises a :class:`PyTritonError` if it fails.
        unload: unloads a model by name; raises a :class:`PyTritonError` if it fails.
        known: the fingerprints of the models as they were loaded at start.
    """

    def __init__(
        self,
        repository: ModelRepository,
        interval_s: float,
        load: Callable[[str], None],
        unload: Callable[[str], None],
        known: Dict[str, Fingerprint],
    ):
        self._repository = repository
        self._interval_s = interval_s
        self._load = load
        self._unload = unload
        self._known = dict(known)
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """Start watching in a background thread."""
        self._thread = threading.Thread(target=self._run, name="pytriton_like-repository-poller", daemon=True)
        self._thread.start()
        logger.info("polling model repository %s every %s s", self._repository.path, self._interval_s)

    def stop(self) -> None:
        """Stop watching; returns once the thread has ended (after a load it is doing)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def poll(self) -> None:
        """One scan: load what is new or changed, unload what was removed."""
        current = self._repository.snapshot()
        for name, fingerprint in current.items():
            if self._stopped.is_set():
                return
            previous = self._known.get(name)
            if previous == fingerprint:
                continue
            # Remembered even if the load fails: a broken model is tried again once its files change.
            self._known[name] = fingerprint
            self._apply(self._load, name, "added" if previous is None else "changed", "loading", "loaded")
        for name in sorted(set(self._known) - set(current)):
            if self._stopped.is_set():
                return
            del self._known[name]
            self._apply(self._unload, name, "removed", "unloading", "unloaded")

    def _apply(self, action: Callable[[str], None], name: str, event: str, doing: str, done: str) -> None:
        logger.info("model repository: model %s %s; %s it", name, event, doing)
        try:
            action(name)
        except PyTritonError as exc:
            logger.error("model repository: model %s was %s but not %s: %s", name, event, done, exc)
        else:
            logger.info("model repository: model %s %s", name, done)

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - the watcher must outlive one bad scan (a folder vanishing mid-walk)
                logger.exception("model repository: scanning %s failed", self._repository.path)

"""The relay's own per-model metrics, published on Triton's metrics endpoint (custom metrics).

The stub's custom-metrics API (``pb_utils.MetricFamily``) makes one round trip to tritonserver
per update (about 15 µs measured here), several per batch: too much for a relay whose tiny
request costs ~1.4 ms end to end. So ``execute`` only adds to plain counters, and a thread
publishes what was added since the last time, every ``PUBLISH_PERIOD_S`` and when the model
unloads. A scrape therefore lags the requests by up to that period. docs/metrics.md lists the
metrics.
"""

import threading
import time
from typing import Dict, Tuple

__all__ = ["RelayMetrics", "PUBLISH_PERIOD_S", "FAMILIES"]

PUBLISH_PERIOD_S = 1.0

# key: (metric family name, description, extra labels). All are counters, labelled with the
# model and its version; the durations are in microseconds, summed over batches.
FAMILIES: Dict[str, Tuple[str, str, Dict[str, str]]] = {
    "requests": ("pytriton_like_requests", "Requests the relay handed to the callable's process", {}),
    "batches": ("pytriton_like_batches", "Batches (executions) the relay handed to the callable's process", {}),
    "callable_errors": (
        "pytriton_like_request_failures",
        "Requests that failed, by where: the callable (raised, bad outputs) or the relay",
        {"reason": "callable"},
    ),
    "relay_errors": (
        "pytriton_like_request_failures",
        "Requests that failed, by where: the callable (raised, bad outputs) or the relay",
        {"reason": "relay"},
    ),
    "callable_us": ("pytriton_like_callable_duration_us", "Time spent in the callable, microseconds", {}),
    "relay_us": (
        "pytriton_like_relay_duration_us",
        "Time the relay added to the callable's (the stub's execute time minus the callable's), microseconds",
        {},
    ),
}


class RelayMetrics:
    """Counters of one model instance's relay, published to Triton's metrics by a thread.

    Args:
        pb_utils: the stub's ``triton_python_backend_utils`` module.
        model: the model's name (label ``model``).
        version: the model's version (label ``version``).
        period_s: how often the thread publishes.
    """

    def __init__(self, pb_utils, model: str, version: str, period_s: float = PUBLISH_PERIOD_S):
        labels = {"model": model, "version": version}
        # A family's metrics vanish from the endpoint when the family object is destroyed: keep them.
        self._families = {}
        self._metrics = {}
        for key, (name, description, extra) in FAMILIES.items():
            family = self._families.get(name)
            if family is None:
                family = self._families[name] = pb_utils.MetricFamily(
                    name=name, description=description, kind=pb_utils.MetricFamily.COUNTER
                )
            self._metrics[key] = family.Metric(labels={**labels, **extra})
        self._pending = dict.fromkeys(FAMILIES, 0)  # durations in nanoseconds
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._period_s = period_s
        self._thread = threading.Thread(target=self._run, name="pytriton_like-metrics", daemon=True)
        self._thread.start()

    def record(
        self,
        requests: int,
        *,
        execute_ns: int = 0,
        callable_ns: int = 0,
        callable_errors: int = 0,
        relay_errors: int = 0,
    ) -> None:
        """Count one batch of ``requests``; ``execute_ns`` 0 when the relay time is not known (streaming)."""
        callable_ns = _nanoseconds(callable_ns)
        relay_ns = max(execute_ns - callable_ns, 0) if execute_ns else 0
        with self._lock:
            pending = self._pending
            pending["requests"] += requests
            pending["batches"] += 1
            pending["callable_errors"] += callable_errors
            pending["relay_errors"] += relay_errors
            pending["callable_us"] += callable_ns
            pending["relay_us"] += relay_ns

    def record_errors(self, *, callable_errors: int = 0, relay_errors: int = 0, callable_ns: int = 0) -> None:
        """Count failures (and callable time) found after the batch was counted (streaming)."""
        callable_ns = _nanoseconds(callable_ns)
        with self._lock:
            self._pending["callable_errors"] += callable_errors
            self._pending["relay_errors"] += relay_errors
            self._pending["callable_us"] += callable_ns

    def close(self) -> None:
        """Stop the thread, publishing what is pending."""
        self._stop.set()
        self._thread.join()
        self._publish()

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            self._publish()

    def _publish(self) -> None:
        with self._lock:
            pending = self._pending
            # durations go out in whole microseconds; the rest waits for the next time
            self._pending = dict.fromkeys(FAMILIES, 0)
            for key in ("callable_us", "relay_us"):
                self._pending[key] = pending[key] % 1000
                pending[key] //= 1000
        for key, value in pending.items():
            if value:
                self._metrics[key].increment(value)


def _nanoseconds(value) -> int:
    """A duration the worker reported (a RESULT's ``x.c``): a positive int, or 0 for anything else."""
    return value if isinstance(value, int) and value > 0 else 0

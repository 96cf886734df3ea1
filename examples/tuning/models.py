"""Callables whose best settings are known: what ``pytriton_like tune`` should find for each.
(README.md; ``make bench-tune`` and tests/functional/test_tune.py tune them too.)

- ``sleepy``: 20 ms per call whatever the batch: batching and a queue delay win by far.
- ``busy``: 3 ms of pure Python per row, holding the GIL: only worker processes help, up to the cores.
- ``fixed_and_rows``: 20 ms per call plus 2 ms per row: under a latency budget a batch size in between wins.
"""

import time

from pytriton_like.decorators import batch

__all__ = ["sleepy", "busy", "fixed_and_rows"]


@batch
def sleepy(x):
    time.sleep(0.02)
    return {"y": x * 2}


@batch
def busy(x):
    for _ in range(len(x)):
        start = time.thread_time()
        while time.thread_time() - start < 0.003:
            pass
    return {"y": x * 2}


@batch
def fixed_and_rows(x):
    time.sleep(0.02 + 0.002 * len(x))
    return {"y": x + 1}

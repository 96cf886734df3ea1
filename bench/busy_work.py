"""The CPU-bound benchmark model's work: y = 2x after about 0.6 ms of pure Python per row.

Pure Python holds the GIL the whole time, like a tokenizer's or a feature pipeline's Python: the
kind of callable that one process cannot run on more than one core. ``bench/serve_busy.py``
(pytriton_like) and ``bench/floor_busy/model.py`` (Triton's Python backend) both call it.
"""

import numpy as np

LOOPS_PER_ROW = 13_000  # about 0.6 ms on the 2-core benchmark machine (CPython 3.11)


def busy_double(x: np.ndarray) -> np.ndarray:
    """``2 * x``, after ``LOOPS_PER_ROW`` iterations of a pure-Python loop per row of ``x``."""
    for _ in range(x.shape[0]):
        total = 0
        for i in range(LOOPS_PER_ROW):
            total += i * i
    return x * np.float32(2)

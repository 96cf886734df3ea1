"""Triton's perf_analyzer as the measuring load generator, where it is installed.

On a model that answers in about a millisecond, perf_analyzer (C++) measured 1.0-1.7x the
throughput tune's own Python load generator measured at 8 clients on a 2-core machine, and the
same within noise at 32 (docs/tuning.md): where it is on the PATH (or given with ``--perf-analyzer``), each
level's numbers come from it. It sends tune's own requests (``--input-data``) but checks no
answer, so tune's generator drives every level first for a short while and checks its answers.
"""

import asyncio
import csv
import json
import os
import pathlib
import resource
import shutil
import tempfile
from typing import Optional, Sequence

import numpy as np

from ..access_tokens import read_token
from .samples import Sample

__all__ = ["PerfAnalyzer", "PerfAnalyzerNumbers"]


class PerfAnalyzerNumbers(dict):
    """``throughput``, ``p50_ms``, ``p99_ms``, ``seconds`` and perf_analyzer's own ``cpu_s``."""


def _content(array: np.ndarray):
    if array.dtype.kind in "OSU":
        return [item.decode() if isinstance(item, bytes) else str(item) for item in array.ravel().tolist()]
    return array.ravel().tolist()


class PerfAnalyzer:
    """One perf_analyzer binary; :meth:`measure` runs it for one concurrency level."""

    def __init__(self, binary: str):
        self.binary = binary

    @classmethod
    def find(cls, explicit: Optional[str] = None) -> Optional["PerfAnalyzer"]:
        """``explicit`` (raises FileNotFoundError if it is not there), else ``perf_analyzer`` on the PATH, else None."""
        if explicit:
            if not os.access(explicit, os.X_OK):
                raise FileNotFoundError(f"--perf-analyzer {explicit}: no such program")
            return cls(explicit)
        found = shutil.which("perf_analyzer")
        return cls(found) if found else None

    async def measure(self, model: str, port: int, samples: Sequence[Sample], batching: bool, concurrency: int,
                      window_s: float) -> PerfAnalyzerNumbers:
        """Three windows of ``window_s`` at ``concurrency`` over HTTP, the samples as the requests;
        raises RuntimeError with its last lines if it fails."""
        rows = [{name: {"content": _content(array), "shape": list(array.shape[1:] if batching else array.shape)}
                 for name, array in sample.inputs.items()} for sample in samples]
        with tempfile.TemporaryDirectory(prefix="pytriton_like-tune-") as folder:
            data, result = pathlib.Path(folder, "data.json"), pathlib.Path(folder, "result.csv")
            data.write_text(json.dumps({"data": rows}))
            argv = [self.binary, "-m", model, "-u", f"127.0.0.1:{port}", "-i", "http", "--input-data", str(data),
                    f"--concurrency-range={concurrency}", f"--measurement-interval={max(100, int(window_s * 1000))}",
                    "--max-trials=3", "--stability-percentage=1000", "-f", str(result)]
            token = read_token(port)
            if token:  # it reads the server's statistics, a restricted group (docs/security.md)
                argv += ["-H", f"triton-access-token:{token}"]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            loop = asyncio.get_running_loop()
            started = loop.time()
            process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                           stderr=asyncio.subprocess.STDOUT)
            try:
                output, _ = await asyncio.wait_for(process.communicate(), 60 + 10 * window_s)
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if process.returncode != 0 or not result.exists():
                tail = "\n".join(output.decode("utf-8", "replace").splitlines()[-6:])
                raise RuntimeError(f"perf_analyzer ended with {process.returncode}:\n{tail}")
            with result.open(encoding="utf-8") as file:
                row = next(csv.DictReader(file))
        return PerfAnalyzerNumbers(
            throughput=float(row["Inferences/Second"]),
            p50_ms=float(row["p50 latency"]) / 1e3,
            p99_ms=float(row["p99 latency"]) / 1e3,
            seconds=loop.time() - started,
            cpu_s=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        )

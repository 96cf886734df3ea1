"""A trial: one setting served and driven over the concurrency levels; what it measured.

:class:`Trial` is the record (its state a :class:`TrialStatus`, changed by :meth:`Trial.finish`);
:func:`run_trial` serves the settings, checks the answers of each request alone, drives each
level and stops the server, leaving nothing of it.
"""

import asyncio
import dataclasses
import enum
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from .load import Checker, LevelResult, Window, drive, encode_request
from .perf_analyzer import PerfAnalyzer
from .settings import Settings
from .trial_server import StartFailure, TrialServer
from .usage import own_cpu_seconds

__all__ = ["TrialStatus", "Measurement", "Trial", "run_trial"]

_RSS_EVERY_S = 0.2


class TrialStatus(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    OK = "ok"
    WRONG_ANSWERS = "wrong answers"
    FAILED = "failed"
    NOT_STARTED = "did not start"
    INTERRUPTED = "interrupted"


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One concurrency level of one trial.

    ``cpu_cores``: CPU of the serving processes (serve, tritonserver, workers) over the window, in
    cores; ``rss_mib``: their resident memory, summed, at its peak; ``generator_cpu_cores``: what
    the load generator (this process) used meanwhile.
    """

    concurrency: int
    throughput: float
    p50_ms: float
    p99_ms: float
    requests: int
    seconds: float
    cpu_cores: float
    rss_mib: float
    generator_cpu_cores: float

    @property
    def cpu_ms_per_request(self) -> float:
        return self.cpu_cores * self.seconds / self.requests * 1e3 if self.requests else float("nan")

    def as_dict(self) -> Dict[str, Any]:
        fields = dataclasses.asdict(self)
        fields["cpu_ms_per_request"] = self.cpu_ms_per_request
        return {name: round(value, 3) if isinstance(value, float) else value for name, value in fields.items()}


@dataclasses.dataclass
class Trial:
    """One setting tried: its state, what went wrong (``error``) and its measurements."""

    number: int
    settings: Settings
    given: bool = False
    status: TrialStatus = TrialStatus.PENDING
    error: Optional[str] = None
    note: Optional[str] = None
    measurements: List[Measurement] = dataclasses.field(default_factory=list)
    start_s: Optional[float] = None
    seconds: float = 0.0

    @property
    def usable(self) -> bool:
        """Whether its numbers may be recommended: it ran, and every answer was right."""
        return self.status is TrialStatus.OK and bool(self.measurements)

    def begin(self) -> None:
        self.status = TrialStatus.RUNNING

    def finish(self, status: TrialStatus, error: Optional[str] = None) -> None:
        if self.status is not TrialStatus.RUNNING:
            raise RuntimeError(f"trial {self.number} is {self.status.value}, not running")
        self.status, self.error = status, error


# What each level reports to the one who watches (the progress bar): (trial, concurrency, measurement or None).
LevelWatcher = Callable[[Trial, int, Optional[Measurement]], None]


async def run_trial(trial: Trial, server: TrialServer, checker: Checker, levels: Sequence[int], window: Window, *,
                    stop_after: Callable[[Settings, List[Measurement]], Optional[str]], deadline: float,
                    watch: Optional[LevelWatcher] = None, perf_analyzer: Optional[PerfAnalyzer] = None) -> None:
    """Serve ``trial.settings``, check each sample alone, drive ``levels`` in turn (until
    ``stop_after`` names a reason, or ``deadline`` on the monotonic clock comes), stop the server.
    With ``perf_analyzer``, it measures each level after tune's generator checked its answers there.

    A cancellation (Ctrl-C) marks the trial interrupted, stops its server and is raised again.
    """
    trial.begin()
    began = time.monotonic()
    try:
        try:
            await server.start()
        except StartFailure as exc:
            trial.finish(TrialStatus.NOT_STARTED, str(exc))
            return
        trial.start_s = time.monotonic() - began
        wires = [encode_request(server.model_name, server.http_port, sample.inputs) for sample in checker.samples]
        alone = Window(warmup_s=0.0, window_s=0.0, min_requests=len(wires), max_window_s=window.request_timeout_s,
                       request_timeout_s=window.request_timeout_s)
        first = await drive(server.http_port, wires, checker, 1, alone)
        if _failed(trial, first, server):
            return
        for concurrency in levels:
            if time.monotonic() + _level_seconds(window, perf_analyzer) > deadline:
                trial.note = "cut short by the time budget"
                break
            if watch is not None:
                watch(trial, concurrency, None)
            measurement = await _measure(server, wires, checker, concurrency, window, trial, perf_analyzer)
            if measurement is None:
                return
            trial.measurements.append(measurement)
            if watch is not None:
                watch(trial, concurrency, measurement)
            reason = stop_after(trial.settings, trial.measurements)
            if reason is not None:
                trial.note = reason
                break
        trial.finish(TrialStatus.OK)
    except asyncio.CancelledError:
        if trial.status is TrialStatus.RUNNING:
            trial.finish(TrialStatus.INTERRUPTED, "stopped by Ctrl-C")
        raise
    finally:
        trial.seconds = time.monotonic() - began
        await asyncio.shield(server.stop())


def _level_seconds(window: Window, perf_analyzer: Optional[PerfAnalyzer] = None) -> float:
    """About how long a level takes (perf_analyzer measures three windows and starts first)."""
    return window.warmup_s + window.window_s * (1 if perf_analyzer is None else 3) + (0 if perf_analyzer is None else 1)


async def _measure(server: TrialServer, wires: Sequence[bytes], checker: Checker, concurrency: int, window: Window,
                   trial: Trial, perf_analyzer: Optional[PerfAnalyzer]) -> Optional[Measurement]:
    if perf_analyzer is None:
        return await _measure_ourselves(server, wires, checker, concurrency, window, trial)
    checks = dataclasses.replace(window, window_s=0.0, min_requests=0, max_window_s=0.0)
    if _failed(trial, await drive(server.http_port, wires, checker, concurrency, checks), server):
        return None
    tree = server.tree
    assert tree is not None
    peak = {"rss": 0}
    sampler = asyncio.ensure_future(_sample_memory(tree, peak))
    before = tree.cpu_seconds()
    try:
        numbers = await perf_analyzer.measure(server.model_name, server.http_port, checker.samples,
                                              server.settings.batching, concurrency, window.window_s)
    except RuntimeError as exc:
        trial.finish(TrialStatus.FAILED, f"at concurrency {concurrency}, {exc}")
        return None
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
    seconds = numbers["seconds"]
    return Measurement(
        concurrency=concurrency, throughput=numbers["throughput"], p50_ms=numbers["p50_ms"],
        p99_ms=numbers["p99_ms"], requests=round(numbers["throughput"] * 3 * window.window_s), seconds=seconds,
        cpu_cores=(tree.cpu_seconds() - before) / seconds, rss_mib=peak["rss"] / 2**20,
        generator_cpu_cores=numbers["cpu_s"] / seconds,
    )


async def _sample_memory(tree, peak: Dict[str, int]) -> None:
    while True:
        peak["rss"] = max(peak["rss"], tree.rss_bytes())
        await asyncio.sleep(_RSS_EVERY_S)


async def _measure_ourselves(server: TrialServer, wires: Sequence[bytes], checker: Checker, concurrency: int,
                             window: Window, trial: Trial) -> Optional[Measurement]:
    tree = server.tree
    assert tree is not None
    marks: Dict[str, float] = {}
    peak = {"rss": 0}

    def on_window(started: Optional[float]) -> None:
        suffix = "start" if started is not None else "end"
        marks[f"server_{suffix}"] = tree.cpu_seconds()
        marks[f"own_{suffix}"] = own_cpu_seconds()

    sampler = asyncio.ensure_future(_sample_memory(tree, peak))
    try:
        result = await drive(server.http_port, wires, checker, concurrency, window, on_window=on_window)
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
    if _failed(trial, result, server):
        return None
    seconds = result.seconds or float("nan")
    return Measurement(
        concurrency=concurrency,
        throughput=result.throughput,
        p50_ms=result.percentile(50),
        p99_ms=result.percentile(99),
        requests=result.requests,
        seconds=result.seconds,
        cpu_cores=(marks.get("server_end", 0.0) - marks.get("server_start", 0.0)) / seconds,
        rss_mib=peak["rss"] / 2**20,
        generator_cpu_cores=(marks.get("own_end", 0.0) - marks.get("own_start", 0.0)) / seconds,
    )


def _failed(trial: Trial, result: LevelResult, server: TrialServer) -> bool:
    """Mark the trial failed (errors) or wrong (answers that differ); whether it was."""
    if not (result.errors or result.wrong):
        return False
    counts = []
    if result.errors:
        counts.append(f"{result.errors} failed ({result.first_error})")
    if result.wrong:
        counts.append(f"{result.wrong} answered differently from the callable ({result.first_wrong})")
    detail = f"at concurrency {result.concurrency}, {'; '.join(counts)}"
    if not server.alive():
        detail += f"\n  the server ended; its last lines:\n{server.last_lines()}"
    trial.finish(TrialStatus.WRONG_ANSWERS if result.wrong and not result.errors else TrialStatus.FAILED, detail)
    return True

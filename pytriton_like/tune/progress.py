"""The progress bar (tqdm): the share of the time budget spent, the trial and its settings, the
level being driven and the best so far; a line per finished trial above it.
"""

import sys
import time
from typing import Optional, TextIO

from .choice import Pick
from .trial import Measurement, Trial, TrialStatus

__all__ = ["Progress", "trial_line", "numbers"]


def numbers(measurement: Measurement) -> str:
    """``1834 req/s at 32 clients, p50 17.2 ms, p99 19.8 ms``."""
    return (f"{measurement.throughput:,.0f} req/s at {measurement.concurrency} client"
            f"{'s' if measurement.concurrency > 1 else ''}, p50 {measurement.p50_ms:.1f} ms,"
            f" p99 {measurement.p99_ms:.1f} ms")


def trial_line(trial: Trial, best: Optional[Measurement]) -> str:
    """One line saying how a trial ended."""
    head = f"trial {trial.number}: {trial.settings.label()}"
    if trial.status is not TrialStatus.OK:
        first = (trial.error or "").splitlines()[0] if trial.error else ""
        return f"{head}: {trial.status.value.upper()}: {first}"
    if not trial.measurements:
        return f"{head}: nothing measured"
    if best is None:
        closest = min(trial.measurements, key=lambda m: m.p99_ms)
        return f"{head}: none within the latency budget (closest: {numbers(closest)})"
    usage = f"serving CPU {best.cpu_cores:.2f} cores, {best.rss_mib:,.0f} MiB"
    return f"{head}: {numbers(best)}; {usage}"


class Progress:
    """A bar over the time budget, on ``out`` (stderr); nothing but the finished lines when ``bar`` is False."""

    def __init__(self, budget_s: float, *, out: TextIO = sys.stderr, bar: bool = True):
        self._out = out
        self._started = time.monotonic()
        self._budget_s = budget_s
        self._bar = None
        self._trial = ""
        self._level = ""
        self._best = "none yet"
        if bar:
            from tqdm import tqdm  # noqa: PLC0415 - the tune extra; checked before the search starts

            # tqdm writes ", " before the postfix: "... 12/300 s, best: ..."
            self._bar = tqdm(total=round(budget_s), file=out, unit="s", dynamic_ncols=True, leave=False,
                             bar_format="{desc} |{bar:20}| {n:.0f}/{total:.0f} s{postfix}")

    def tick(self) -> None:
        """Move the bar to the time spent (called every half second)."""
        if self._bar is not None:
            self._bar.n = min(round(time.monotonic() - self._started), self._bar.total)
            self._bar.refresh()

    def trial(self, trial: Trial, concurrency: Optional[int] = None) -> None:
        self._trial = f"trial {trial.number}: {trial.settings.label()}"
        self._level = f" @ {concurrency} clients" if concurrency is not None else " (starting)"
        self._show()

    def best(self, pick: Optional[Pick]) -> None:
        if pick is not None:
            self._best = f"{pick.measurement.throughput:,.0f} req/s p99 {pick.measurement.p99_ms:.1f} ms (trial {pick.trial.number})"
        self._show()

    def write(self, line: str) -> None:
        if self._bar is not None:
            self._bar.write(line, file=self._out)
        else:
            print(line, file=self._out, flush=True)

    def _show(self) -> None:
        if self._bar is not None:
            self._bar.set_description_str(f"{self._trial}{self._level}", refresh=False)
            self._bar.set_postfix_str(f"best: {self._best}", refresh=False)
            self.tick()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

"""One run of ``pytriton_like tune``: the search loop over trials, its time budget and Ctrl-C,
then the choice, the report and what the terminal prints.
"""

import argparse
import asyncio
import contextlib
import dataclasses
import os
import pathlib
import signal
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from ..cli.flags import model_flags, settings_from_arguments
from ..cli.serve import CliError, inputs_from_signature, load_target, parse_tensor
from .choice import Goal, choose
from .load import Checker, Window
from .perf_analyzer import PerfAnalyzer
from .progress import Progress, trial_line
from .report import build_report, summary_lines, write_json
from .samples import Sample, make_samples, reference_answers
from .search import make_search
from .settings import Settings
from .space import Space, default_space, usable_cores
from .trial import Trial, run_trial
from .trial_server import TrialServer

__all__ = ["Run"]

# A first trial's server start, before any was timed (later trials go by the slowest start seen).
_START_GUESS_S = 3.0
_STOP_ALLOWANCE_S = 1.5


def _name_of(func: Callable) -> str:
    """The model's default name, as serve gives it: the function's (or method's) name, else the class's."""
    return getattr(func, "__name__", None) or type(func).__name__


def _shapes(texts: Sequence[str]) -> Dict[str, List[int]]:
    shapes = {}
    for text in texts:
        name, _, dims = text.partition(":")
        try:
            shapes[name] = [int(dim) for dim in dims.split(",")]
        except ValueError:
            raise CliError(f"--shape {text!r}: expected NAME:DIMS, e.g. tokens:128 or image:224,224,3") from None
        if not name or any(dim < 1 for dim in shapes[name]):
            raise CliError(f"--shape {text!r}: expected NAME:DIMS with dimensions of 1 or more")
    return shapes


@dataclasses.dataclass
class Run:
    """Everything a run needs, checked before the first trial."""

    target: str
    model_name: str
    model_flags: List[str]
    given: Settings
    space: Space
    goal: Goal
    levels: List[int]
    window: Window
    strategy: str
    time_budget_s: float
    start_timeout_s: float
    samples: List[Sample]
    reference: str
    report_dir: Optional[pathlib.Path]
    progress_bar: bool
    perf_analyzer: Optional[PerfAnalyzer] = None

    @classmethod
    def from_arguments(cls, args: argparse.Namespace) -> "Run":
        """Check the flags, import the callable and call it on the samples (its answers are the reference)."""
        given = settings_from_arguments(args)
        func = load_target(args.target)
        if args.inputs:
            inputs = [parse_tensor(text, "--input") for text in args.inputs]
        else:
            inputs = inputs_from_signature(func)
        data = None
        if args.input_data:
            try:
                with np.load(args.input_data, allow_pickle=False) as loaded:
                    data = {name: loaded[name] for name in loaded.files}
            except (OSError, ValueError) as exc:
                raise CliError(f"--input-data {args.input_data}: {exc}") from None
        shapes = _shapes(args.shape)
        unknown = sorted(set(shapes) - {spec.name for spec in inputs})
        if unknown:
            raise CliError(f"--shape names no input: {', '.join(unknown)} (the inputs:"
                           f" {', '.join(spec.name for spec in inputs)})")
        samples = make_samples(inputs, given.batching, shapes, data)
        try:
            reference_answers(func, samples)
            reference = "the callable's own answers, called in the tune process on each request alone"
        except Exception as exc:  # noqa: BLE001 - any failure: the served answers, one at a time, are the reference
            for sample in samples:
                sample.expected = None
            reference = (f"the given settings' answers, one request at a time (calling the callable here failed:"
                         f" {type(exc).__name__}: {exc})")
        if args.time_budget_s < _START_GUESS_S + args.window_s:
            raise CliError(
                f"a time budget of {args.time_budget_s:g} s is too short for one trial: its server takes a few seconds"
                f" to start, then each concurrency level runs {args.window_s + Window().warmup_s:g} s; give"
                f" --time-budget-s {max(30, round(4 * (_START_GUESS_S + args.window_s)))} or more"
            )
        perf_analyzer = None
        if args.load_generator != "builtin" or args.perf_analyzer:
            try:
                perf_analyzer = PerfAnalyzer.find(args.perf_analyzer)
            except FileNotFoundError as exc:
                raise CliError(str(exc)) from None
            if perf_analyzer is None and args.load_generator == "perf_analyzer":
                raise CliError("--load-generator perf_analyzer: perf_analyzer is not on the PATH (--perf-analyzer PATH)")
        space = default_space(
            given, cores=usable_cores(), max_batch_sizes=args.search_max_batch_size,
            queue_delays_us=args.search_queue_delay_microseconds, instances=args.search_instances,
            workers=args.search_workers, preferred=not args.no_preferred_batch_sizes,
        )
        return cls(
            target=args.target,
            model_name=args.model_name or _name_of(func),
            model_flags=model_flags(args),
            given=given,
            space=space,
            goal=Goal(latency_budget_ms=args.latency_budget_ms, objective=args.objective),
            levels=list(args.concurrency),
            window=Window(window_s=args.window_s, max_window_s=max(10.0, 10 * args.window_s)),
            strategy=args.search,
            time_budget_s=args.time_budget_s,
            start_timeout_s=args.start_timeout_s,
            samples=samples,
            reference=reference,
            report_dir=pathlib.Path(args.report) if args.report else None,
            progress_bar=not args.no_progress and sys.stderr.isatty(),
            perf_analyzer=perf_analyzer,
        )

    def execute(self) -> int:
        """Search, choose, report; the exit code."""
        _say(f"tuning {self.target} as model {self.model_name}: {self.strategy} search of {self.space.size()}"
             f" settings for up to {self.time_budget_s:g} s; concurrency {','.join(map(str, self.levels))}"
             + (f"; p99 budget {self.goal.latency_budget_ms:g} ms" if self.goal.latency_budget_ms else ""))
        trials: List[Trial] = []
        started = time.monotonic()
        progress = Progress(self.time_budget_s, bar=self.progress_bar)
        search = make_search(self.strategy, self.space, self.given, self.goal, self.levels)
        try:
            ended = asyncio.run(self._search(search, trials, progress))
        except KeyboardInterrupt:  # a second Ctrl-C: the trial's server was stopped by run_trial's finally
            ended = "stopped by Ctrl-C"
        finally:
            progress.close()
        choice = choose(trials, self.goal, self.levels)
        info: Dict[str, Any] = {
            "strategy": self.strategy, "ended": ended, "time_budget_s": self.time_budget_s,
            "elapsed_s": round(time.monotonic() - started, 1), "space": {
                "max_batch_size": list(self.space.max_batch_sizes),
                "max_queue_delay_microseconds": list(self.space.queue_delays_us),
                "instances": list(self.space.instances), "workers": list(self.space.workers),
                "preferred_batch_sizes": self.space.preferred},
            "space_size": self.space.size(), "untried": search.untried(),
            "window_s": self.window.window_s, "warmup_s": self.window.warmup_s,
            "load_generator": (f"perf_analyzer ({self.perf_analyzer.binary}), HTTP, after tune's clients checked"
                               " the answers at each level" if self.perf_analyzer else
                               "pytriton_like's: closed-loop clients over HTTP/1.1 (KServe v2, binary tensors)")
                              + ", on this machine",
            "reference": self.reference, "requests": [
                {name: {"dtype": str(array.dtype), "shape": list(array.shape)} for name, array in s.inputs.items()}
                for s in self.samples[:1]],
        }
        report = build_report(target=self.target, model_name=self.model_name, model_flags=self.model_flags,
                              trials=trials, choice=choice, goal=self.goal, levels=self.levels, search=info)
        path = self.report_dir / "report.json" if self.report_dir is not None else None
        lines = summary_lines(report, choice, report_path=path)
        if self.report_dir is not None:
            from .page import render_page  # noqa: PLC0415 - matplotlib, only for a report

            write_json(report, self.report_dir)
            (self.report_dir / "report.html").write_text(render_page(report, lines), encoding="utf-8")
        print("\n".join(lines), flush=True)
        if ended == "stopped by Ctrl-C":
            return 130
        return 0 if choice.recommended is not None else 1

    async def _search(self, search, trials: List[Trial], progress: Progress) -> str:
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        interrupted = []

        def on_sigint() -> None:
            interrupted.append(True)
            progress.write("stopping (Ctrl-C): the trial under way ends, then the report of what was measured")
            loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C ends it at once
            main.cancel()

        # Signal handlers go on the main thread only; elsewhere (a test's thread) Ctrl-C is not handled.
        with contextlib.suppress(ValueError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        ticker = asyncio.ensure_future(_tick(progress))
        deadline = time.monotonic() + self.time_budget_s
        slowest_start = _START_GUESS_S
        try:
            while True:
                left = deadline - time.monotonic()
                if trials and left < slowest_start + self.window.warmup_s + self.window.window_s + _STOP_ALLOWANCE_S:
                    return "time budget spent"
                settings = search.next()
                if settings is None:
                    return "converged" if self.strategy == "quick" else "every setting tried"
                trial = Trial(number=len(trials) + 1, settings=settings, given=settings == self.given)
                trials.append(trial)
                progress.trial(trial)
                server = TrialServer(self.target, self.model_flags, settings, self.model_name, cwd=os.getcwd(),
                                     start_timeout_s=self.start_timeout_s)
                await run_trial(trial, server, Checker(self.samples), self.levels, self.window,
                                stop_after=self.goal.stop_after, deadline=deadline,
                                watch=lambda t, c, m: progress.trial(t, c) if m is None else None,
                                perf_analyzer=self.perf_analyzer)
                slowest_start = max(slowest_start, trial.start_s or 0.0)
                search.observe(trial)
                line = trial_line(trial, self.goal.best(trial, self.levels))
                if trial.note:
                    line += f" ({trial.note})"
                progress.write(line)
                if trial.status.value != "ok" and trial.error and "\n" in trial.error:
                    progress.write("\n".join("  " + part for part in trial.error.splitlines()[1:]))
                progress.best(choose(trials, self.goal, self.levels).recommended)
        except asyncio.CancelledError:
            if not interrupted:
                raise
            if hasattr(main, "uncancel"):
                main.uncancel()
            return "stopped by Ctrl-C"
        finally:
            ticker.cancel()
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)


async def _tick(progress: Progress) -> None:
    while True:
        progress.tick()
        await asyncio.sleep(0.5)


def _say(line: str) -> None:
    print(f"pytriton_like tune: {line}", file=sys.stderr, flush=True)

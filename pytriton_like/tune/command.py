"""``pytriton_like tune MODULE:CALLABLE``: its own flags, and the run from flags to report.

The model's flags and the given settings are serve's (``cli/flags.py``); each trial serves the
callable with ``serve`` itself. What a run prints: a line per trial and a progress bar on
stderr, the recommendation on stdout; ``--report DIR`` writes report.json and report.html.
"""

import argparse
import sys
from typing import List

from ..exceptions import PyTritonError

__all__ = ["add_tune_arguments", "run_tune", "parse_levels", "DEFAULT_TIME_BUDGET_S"]

DEFAULT_TIME_BUDGET_S = 300.0
DEFAULT_CONCURRENCY = "1:64"
# what to install when the tune extra's packages are missing (the package is on no index: docs/installation.md)
_EXTRAS = "pip install matplotlib tqdm, or install pytriton_like with its [tune] extra"


def _levels_type(text: str) -> List[int]:
    try:
        return parse_levels(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_levels(text: str) -> List[int]:
    """Concurrency levels from ``32``, ``1,4,16`` or ``1:64`` (the powers of two from 1 to 64)."""
    try:
        if ":" in text:
            low, high = (int(part) for part in text.split(":", 1))
            if not 1 <= low <= high:
                raise ValueError
            levels, level = [], low
            while level < high:
                levels.append(level)
                level *= 2
            return levels + [high]
        levels = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"expected N, N,N,... or LOW:HIGH (powers of two between), with N >= 1; got {text!r}") from None
    if not levels or levels[0] < 1:
        raise ValueError(f"concurrency levels must be 1 or more, got {text!r}")
    return levels


def _values(text: str) -> List[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not values or values[0] < 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers of 0 or more, got {text!r}")
    return values


def add_tune_arguments(parser: argparse.ArgumentParser) -> None:
    """tune's own flags (the model's and the given settings' are serve's)."""
    load = parser.add_argument_group("the load and the goal")
    load.add_argument("--concurrency", type=_levels_type, default=parse_levels(DEFAULT_CONCURRENCY), metavar="LEVELS",
                      help="concurrent clients to drive each setting with: N (the load you expect), N,N,... or"
                      f" LOW:HIGH (powers of two; default {DEFAULT_CONCURRENCY})")
    load.add_argument("--latency-budget-ms", type=float, default=None, metavar="MS",
                      help="the p99 latency a recommendation must stay within (default: none)")
    load.add_argument("--objective", choices=("throughput", "latency"), default="throughput",
                      help="the highest throughput within the budget (default), or the lowest p99 at the highest"
                      " concurrency")
    load.add_argument("--shape", action="append", default=[], metavar="NAME:DIMS",
                      help="the size of an input's variable dimensions in the requests, e.g. tokens:128 (default 1)")
    load.add_argument("--input-data", metavar="FILE.npz",
                      help="send these arrays (one per input, batch axis included) instead of generated ones")
    search = parser.add_argument_group("the search")
    search.add_argument("--search", choices=("quick", "exhaustive"), default="quick",
                        help="quick: hill climbing from the given settings (default); exhaustive: every point")
    search.add_argument("--time-budget-s", type=float, default=DEFAULT_TIME_BUDGET_S, metavar="S",
                        help=f"stop searching after S seconds (default {DEFAULT_TIME_BUDGET_S:g})")
    search.add_argument("--search-max-batch-size", type=_values, default=(), metavar="N,N,...",
                        help="the largest batches to try (default 1,2,4,...,128)")
    search.add_argument("--search-queue-delay-microseconds", type=_values, default=(), metavar="US,US,...",
                        help="the queue delays to try (default 0,100,500,1000,2000,5000,10000)")
    search.add_argument("--search-instances", type=_values, default=(), metavar="N,N,...",
                        help="the numbers of instances as threads to try (default 1 to 4)")
    search.add_argument("--search-workers", type=_values, default=(), metavar="N,N,...",
                        help="the numbers of worker processes to try (default 1 to the cores this process may use)")
    search.add_argument("--no-preferred-batch-sizes", action="store_true",
                        help="do not try preferred batch sizes")
    search.add_argument("--window-s", type=float, default=1.0, metavar="S",
                        help="how long each concurrency level is measured (default 1; longer for steadier numbers)")
    search.add_argument("--start-timeout-s", type=float, default=300.0, metavar="S",
                        help="how long a trial's server may take to start (default 300)")
    search.add_argument("--load-generator", choices=("auto", "builtin", "perf_analyzer"), default="auto",
                        help="what measures each level: tune's own clients (builtin), Triton's perf_analyzer, or"
                        " auto: perf_analyzer where it is on the PATH (tune's clients check the answers either way)")
    search.add_argument("--perf-analyzer", metavar="PATH", help="the perf_analyzer program to use")
    out = parser.add_argument_group("the results")
    out.add_argument("--report", metavar="DIR", help="write DIR/report.json and DIR/report.html")
    out.add_argument("--no-progress", action="store_true", help="no progress bar (a line per trial still)")


def _missing_extras(need_plots: bool) -> List[str]:
    missing = []
    for module, needed in (("tqdm", True), ("matplotlib", need_plots)):
        if needed:
            try:
                __import__(module)
            except ImportError:
                missing.append(module)
    return missing


def run_tune(args: argparse.Namespace) -> int:
    """Run the search the flags describe; returns the exit code (0: a recommendation, 1: none or
    an error, 130: stopped by Ctrl-C, the report of what was measured written all the same)."""
    from ..cli.serve import CliError  # noqa: PLC0415 - the same error type serve reports

    missing = _missing_extras(need_plots=bool(args.report))
    if missing and not (args.no_progress and missing == ["tqdm"]):
        print(f"pytriton_like tune: error: it needs {' and '.join(missing)} (the tune extra): {_EXTRAS}",
              file=sys.stderr)
        return 1
    try:
        from .run import Run  # noqa: PLC0415 - imported once the extras are known to be there

        run = Run.from_arguments(args)
    except (CliError, PyTritonError, ValueError) as exc:
        print(f"pytriton_like tune: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # before the search: nothing measured, nothing to report
        print("pytriton_like tune: stopped before the first trial", file=sys.stderr)
        return 130
    return run.execute()

"""The results: ``report.json`` (what a script reads, and ``serve --settings``) and the lines the
terminal prints (the recommendation as ``bind(...)`` arguments and as ``serve`` flags).
"""

import json
import os
import pathlib
import platform
import shlex
import time
from typing import Any, Dict, List, Optional, Sequence

from .. import __version__
from .choice import Choice, Goal, Pick
from .progress import numbers
from .trial import Trial

__all__ = ["build_report", "write_json", "summary_lines", "REPORT_VERSION"]

REPORT_VERSION = 1


def _pick(pick: Optional[Pick]) -> Optional[Dict[str, Any]]:
    if pick is None:
        return None
    measurement = pick.measurement.as_dict()
    return {**pick.trial.settings.as_dict(), "trial": pick.trial.number, **measurement}


def _rows(trial: Trial, excluded: bool) -> List[Dict[str, Any]]:
    """One row per measurement of the trial (one without numbers if it measured nothing)."""
    head = {"trial": trial.number, "settings": trial.settings.as_dict(), "label": trial.settings.label(),
            "given": trial.given, "status": trial.status.value, "excluded": excluded, "error": trial.error,
            "note": trial.note, "start_s": None if trial.start_s is None else round(trial.start_s, 2)}
    if not trial.measurements:
        return [{**head, "concurrency": None, "throughput": None, "p50_ms": None, "p99_ms": None}]
    return [{**head, **measurement.as_dict()} for measurement in trial.measurements]


def build_report(*, target: str, model_name: str, model_flags: Sequence[str], trials: Sequence[Trial],
                 choice: Choice, goal: Goal, levels: Sequence[int], search: Dict[str, Any]) -> Dict[str, Any]:
    """Everything measured, and the choice, as plain data (the shape of report.json)."""
    excluded = {trial.number for trial in choice.excluded}
    return {
        "version": REPORT_VERSION,
        "tool": f"pytriton_like tune {__version__}",
        "created": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "target": target,
        "model_name": model_name,
        "model_flags": list(model_flags),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()},
        "goal": {"latency_budget_ms": goal.latency_budget_ms, "objective": goal.objective,
                 "concurrency": list(levels)},
        "search": search,
        "recommended": _pick(choice.recommended),
        "closest": _pick(choice.closest),
        "given": _pick(choice.given),
        "trials": [row for trial in trials for row in _rows(trial, trial.number in excluded)],
    }


def write_json(report: Dict[str, Any], folder: pathlib.Path) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "report.json"
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return path


def summary_lines(report: Dict[str, Any], choice: Choice, *, report_path: Optional[pathlib.Path] = None) -> List[str]:
    """What the terminal prints at the end."""
    search = report["search"]
    trials = {row["trial"] for row in report["trials"]}
    lines = [f"{len(trials)} trial{'s' if len(trials) != 1 else ''} in {search['elapsed_s']:.0f} s"
             f" ({search['strategy']} search, {search['ended']}); {len(choice.excluded)} excluded"]
    for trial in choice.excluded:
        first = (trial.error or "").splitlines()[0]
        lines.append(f"  excluded: trial {trial.number} ({trial.settings.label()}): {trial.status.value}: {first}")
    budget = report["goal"]["latency_budget_ms"]
    pick = choice.recommended
    if pick is None:
        if choice.closest is None:
            lines.append("no trial measured anything: nothing to recommend")
        else:
            lines.append(f"no setting met the latency budget (p99 <= {budget:g} ms); the closest, trial"
                         f" {choice.closest.trial.number} ({choice.closest.trial.settings.label()}):"
                         f" {numbers(choice.closest.measurement)}")
        return lines + _files(report_path)
    settings = pick.trial.settings
    lines.append(f"recommended: {settings.label()} (trial {pick.trial.number})")
    lines.append(f"  {numbers(pick.measurement)}; serving CPU {pick.measurement.cpu_cores:.2f} cores,"
                 f" {pick.measurement.rss_mib:,.0f} MiB")
    if choice.given is not None:
        given = choice.given
        ratio = pick.measurement.throughput / given.measurement.throughput if given.measurement.throughput else 0
        same = " (the recommendation)" if given.trial is pick.trial else f": {ratio:.1f}x the throughput"
        lines.append(f"  the given settings ({given.trial.settings.label()}): {numbers(given.measurement)}{same}")
    else:
        lines.append("  the given settings have no numbers to compare with (their trial did not run right)")
    lines.append(f"  in a script:  triton.bind(..., {settings.bind_arguments(_func_name(report['target']))})")
    command = ["pytriton_like", "serve", report["target"], *report["model_flags"], *settings.serve_flags()]
    lines.append(f"  as a command: {shlex.join(command)}")
    if report_path is not None:
        lines.append(f"           or: pytriton_like serve {shlex.quote(report['target'])}"
                     f" {shlex.join(report['model_flags'])}{' ' if report['model_flags'] else ''}"
                     f"--settings {shlex.quote(str(report_path))}")
    return lines + _files(report_path)


def _func_name(target: str) -> str:
    return target.partition(":")[2].split(".")[-1] or "infer_func"


def _files(report_path: Optional[pathlib.Path]) -> List[str]:
    if report_path is None:
        return ["(--report DIR writes report.json and report.html)"]
    return [f"report: {report_path} and {report_path.with_name('report.html')}"]

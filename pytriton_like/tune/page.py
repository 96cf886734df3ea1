"""report.html: one self-contained page (inline SVG drawn by matplotlib, no script, nothing fetched).

Three parts: throughput against p99 latency for every measurement, the Pareto front marked (no
other point has both a lower latency and a higher throughput), the budget a dashed line;
throughput and p99 against concurrency for the best few settings and the given ones; a table of
every trial.
"""

import html
import io
import math
from typing import Any, Dict, List, Sequence

from .choice import pareto_front

__all__ = ["render_page", "COLORS"]

# Matplotlib's default palette: what a reader of plots expects.
COLORS = {"point": "#1f77b4", "front": "#d62728", "recommended": "#2ca02c", "given": "#000000",
          "excluded": "#aaaaaa"}
_LINES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_BEST_FEW = 5


def _figure(width: float, height: float, columns: int = 1):
    from matplotlib.figure import Figure  # noqa: PLC0415 - the tune extra; checked before the search starts

    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(1, columns)
    return figure, axes


def _svg(figure) -> str:
    import matplotlib  # noqa: PLC0415

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "pytriton_like"}):
        figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _log_if_wide(axis_set, values: Sequence[float]) -> None:
    values = [value for value in values if value and value > 0 and math.isfinite(value)]
    if values and max(values) / min(values) > 20:
        axis_set("log")


def _measured(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [row for row in rows if row.get("throughput") is not None]


def pareto_plot(report: Dict[str, Any]) -> str:
    """Throughput against p99 latency, one point per trial and concurrency."""
    figure, axes = _figure(8, 5)
    rows = _measured(report["trials"])
    kept = [row for row in rows if not row["excluded"]]
    dropped = [row for row in rows if row["excluded"]]
    axes.scatter([r["p99_ms"] for r in kept], [r["throughput"] for r in kept], s=22, color=COLORS["point"],
                 label="a setting at one concurrency")
    if dropped:
        axes.scatter([r["p99_ms"] for r in dropped], [r["throughput"] for r in dropped], s=30, marker="x",
                     color=COLORS["excluded"], label="excluded (wrong answers or failures)")
    front = [kept[index] for index in pareto_front([(r["p99_ms"], r["throughput"]) for r in kept])]
    if front:
        axes.plot([r["p99_ms"] for r in front], [r["throughput"] for r in front], "-o", color=COLORS["front"],
                  markersize=6, drawstyle="steps-post", label="Pareto front")
        for row in front:
            axes.annotate(f"#{row['trial']} c{row['concurrency']}", (row["p99_ms"], row["throughput"]),
                          textcoords="offset points", xytext=(5, 4), fontsize=8, color=COLORS["front"])
    given = [r for r in kept if r["given"]]
    if given:
        axes.scatter([r["p99_ms"] for r in given], [r["throughput"] for r in given], s=50, marker="D",
                     facecolors="none", edgecolors=COLORS["given"], label="the given settings")
    chosen = report.get("recommended")
    if chosen:
        axes.scatter([chosen["p99_ms"]], [chosen["throughput"]], s=260, marker="*", color=COLORS["recommended"],
                     edgecolors="black", linewidths=0.6, zorder=5, label="recommended")
    budget = report["goal"]["latency_budget_ms"]
    if budget:
        axes.axvline(budget, linestyle="--", color="#555555", linewidth=1, label=f"latency budget {budget:g} ms")
    _log_if_wide(axes.set_xscale, [r["p99_ms"] for r in rows] + ([budget] if budget else []))
    _log_if_wide(axes.set_yscale, [r["throughput"] for r in rows])
    axes.set_xlabel("p99 latency (ms)")
    axes.set_ylabel("throughput (requests/s)")
    axes.set_title("Throughput against p99 latency: every setting at every concurrency")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    return _svg(figure)


def _best_trials(report: Dict[str, Any]) -> List[int]:
    """The few trials with the highest throughput within the budget, and the given one(s)."""
    budget = report["goal"]["latency_budget_ms"]
    best: Dict[int, float] = {}
    for row in _measured(report["trials"]):
        if row["excluded"] or (budget and row["p99_ms"] > budget):
            continue
        best[row["trial"]] = max(best.get(row["trial"], 0.0), row["throughput"])
    chosen = sorted(best, key=lambda trial: -best[trial])[:_BEST_FEW]
    given = sorted({row["trial"] for row in report["trials"] if row["given"] and row["throughput"] is not None})
    return chosen + [trial for trial in given if trial not in chosen]


def concurrency_plot(report: Dict[str, Any]) -> str:
    """Throughput and p99 against concurrency for the best few settings (and the given ones)."""
    figure, (left, right) = _figure(11, 4.6, columns=2)
    rows = _measured(report["trials"])
    for number, trial in enumerate(_best_trials(report)):
        points = sorted((r for r in rows if r["trial"] == trial), key=lambda r: r["concurrency"])
        label = f"#{trial} {points[0]['label']}" + (" (given)" if points[0]["given"] else "")
        style = dict(color=_LINES[number % len(_LINES)], marker="o", markersize=4,
                     linestyle="--" if points[0]["given"] else "-")
        concurrency = [r["concurrency"] for r in points]
        left.plot(concurrency, [r["throughput"] for r in points], label=label, **style)
        right.plot(concurrency, [r["p99_ms"] for r in points], label=label, **style)
    budget = report["goal"]["latency_budget_ms"]
    if budget:
        right.axhline(budget, linestyle="--", color="#555555", linewidth=1, label=f"budget {budget:g} ms")
    levels = report["goal"]["concurrency"]
    for axes, what in ((left, "throughput (requests/s)"), (right, "p99 latency (ms)")):
        axes.set_xscale("log", base=2)
        axes.set_xticks(levels, [str(level) for level in levels])
        axes.minorticks_off()
        axes.set_xlabel("concurrent clients")
        axes.set_ylabel(what)
        axes.grid(True, alpha=0.3)
    _log_if_wide(right.set_yscale, [r["p99_ms"] for r in rows])
    left.set_title("Throughput against concurrency (the best few)")
    right.set_title("p99 latency against concurrency")
    if rows:  # a report where no trial measured anything has no lines to name
        left.legend(fontsize=7, loc="best")
    return _svg(figure)


def _table(report: Dict[str, Any]) -> str:
    budget = report["goal"]["latency_budget_ms"]
    best: Dict[int, Dict[str, Any]] = {}
    for row in report["trials"]:
        current = best.get(row["trial"])
        fits = row["throughput"] is not None and not (budget and row["p99_ms"] > budget)
        if current is None or (fits and (current["throughput"] is None or row["throughput"] > current["throughput"])):
            best[row["trial"]] = row
    recommended = (report.get("recommended") or {}).get("trial")
    cells = []
    for trial in sorted(best, key=lambda number: -(best[number]["throughput"] or -1)):
        row = best[trial]
        numbers = ["", "", "", "", "", ""] if row["throughput"] is None else [
            str(row["concurrency"]), f"{row['throughput']:,.0f}", f"{row['p50_ms']:.1f}", f"{row['p99_ms']:.1f}",
            f"{row['cpu_cores']:.2f}", f"{row['rss_mib']:,.0f}"]
        what = row["status"] + (f": {row['error']}" if row["error"] else "") + (f" ({row['note']})" if row["note"] else "")
        kind = "recommended" if trial == recommended else "excluded" if row["excluded"] else ""
        mark = " ★" if trial == recommended else " (given)" if row["given"] else ""
        cells.append(f"<tr class='{kind}'><td>{trial}{mark}</td><td>{html.escape(row['label'])}</td>"
                     + "".join(f"<td class='n'>{value}</td>" for value in numbers)
                     + f"<td><pre>{html.escape(what)}</pre></td></tr>")
    head = ("<tr><th>trial</th><th>settings</th><th>clients</th><th>req/s</th><th>p50 ms</th><th>p99 ms</th>"
            "<th>CPU cores</th><th>RSS MiB</th><th>status</th></tr>")
    return f"<table id='trials'>{head}{''.join(cells)}</table>"


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1150px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
.box { border: 1px solid #2ca02c; background: #f3fbf3; padding: 0.6em 1em; border-radius: 6px; }
.box.none { border-color: #d62728; background: #fdf3f3; }
code, pre { font-family: ui-monospace, monospace; font-size: 0.85em; white-space: pre-wrap; margin: 0; }
table { border-collapse: collapse; font-size: 0.85em; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
td.n { text-align: right; } tr.recommended { background: #eaf7ea; } tr.excluded { color: #888; }
figure { margin: 1em 0; } svg { max-width: 100%; height: auto; }
"""


def render_page(report: Dict[str, Any], summary: Sequence[str]) -> str:
    """The whole page for ``report`` (report.json's data); ``summary`` is what the terminal printed."""
    goal = report["goal"]
    budget = f"p99 within {goal['latency_budget_ms']:g} ms" if goal["latency_budget_ms"] else "no latency budget"
    box = "box" if report.get("recommended") else "box none"
    title = f"pytriton_like tune: {report['target']}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p>Model <code>{html.escape(report['model_name'])}</code>, {report['search']['strategy']} search, objective
{html.escape(goal['objective'])}, {budget}, concurrency {', '.join(map(str, goal['concurrency']))};
{report['machine']['cores']} cores ({html.escape(report['machine']['platform'])}), {html.escape(report['created'])}.
The load generator ran on the same machine as the server.</p>
<div class="{box}"><pre>{html.escape(chr(10).join(summary))}</pre></div>
<h2>Throughput against latency</h2>
<figure id="pareto-plot">{pareto_plot(report)}</figure>
<h2>The best settings against concurrency</h2>
<figure id="concurrency-plot">{concurrency_plot(report)}</figure>
<h2>Every trial (its best measurement within the budget)</h2>
{_table(report)}
</body></html>
"""

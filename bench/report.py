"""The results: a Markdown table with ratios to PyTriton and the targets, the JSON file, the plot."""

import dataclasses
import json
import math
import pathlib
from typing import Dict, List, Optional

__all__ = ["METRICS", "SERVERS", "Metric", "Target", "ratios", "verdicts", "table", "write_json", "plot"]

# Server keys, in the order they run and appear.
SERVERS = {
    "pytriton": "PyTriton 0.7.0",
    "pytriton_like": "pytriton_like",
    "floor": "Python-backend floor",
    "native_floor": "native floor",
}
REFERENCE = "pytriton"
FLOOR = "floor"
CANDIDATE = "pytriton_like"


@dataclasses.dataclass(frozen=True)
class Target:
    """A target for pytriton_like: ``op`` ("<=" or ">=") ``bound``, as a ratio to ``reference``'s
    value, or an absolute value when ``reference`` is None."""

    op: str
    bound: float
    reference: Optional[str] = REFERENCE

    def text(self) -> str:
        if self.reference is None:
            return f"{self.op} {self.bound:g}"
        return f"{self.op} {self.bound:g}x {'PyTriton' if self.reference == REFERENCE else 'floor'}"


@dataclasses.dataclass(frozen=True)
class Metric:
    key: str
    label: str
    fmt: str
    targets: tuple = ()


# Targets: the relay's first issue (ratios to PyTriton) and the native relay's (issue 14: ratios
# to the Python-backend floor, start to ready <= 0.6 s, idle RSS <= half of the 131 MiB measured
# before it).
_IDLE_RSS_BEFORE_NATIVE_MIB = 131
METRICS: List[Metric] = [
    Metric("seq_http_median_ms", "seq. latency HTTP, median (ms)", "{:.3f}", (Target("<=", 0.45),)),
    Metric("seq_http_p99_ms", "seq. latency HTTP, p99 (ms)", "{:.3f}"),
    Metric("seq_grpc_median_ms", "seq. latency gRPC, median (ms)", "{:.3f}", (Target("<=", 0.45),)),
    Metric("seq_grpc_p99_ms", "seq. latency gRPC, p99 (ms)", "{:.3f}"),
    Metric("pa_http_c1_p50_ms", "perf_analyzer HTTP c1, p50 (ms)", "{:.3f}", (Target("<=", 1.0, FLOOR),)),
    Metric("pa_grpc_c1_p50_ms", "perf_analyzer gRPC c1, p50 (ms)", "{:.3f}", (Target("<=", 1.0, FLOOR),)),
    Metric("pa_http_c8_rps", "perf_analyzer HTTP c8 (infer/s)", "{:,.0f}", (Target(">=", 1.5, FLOOR),)),
    Metric("pa_http_c32_rps", "perf_analyzer HTTP c32 (infer/s)", "{:,.0f}", (Target(">=", 1.5, FLOOR),)),
    Metric("pa_grpc_c8_rps", "perf_analyzer gRPC c8 (infer/s)", "{:,.0f}", (Target(">=", 1.5, FLOOR),)),
    Metric("pa_grpc_c32_rps", "perf_analyzer gRPC c32 (infer/s)", "{:,.0f}", (Target(">=", 1.5, FLOOR),)),
    Metric("wrk_8_rps", "HTTP 8 connections, wrk (req/s)", "{:,.0f}"),
    Metric("wrk_32_rps", "HTTP 32 connections, wrk (req/s)", "{:,.0f}", (Target(">=", 2.5),)),
    Metric("wrk_128_rps", "HTTP 128 connections, wrk (req/s)", "{:,.0f}"),
    Metric("grpc_16mib_mbps", "16 MiB in+out gRPC (MB/s)", "{:,.0f}", (Target(">=", 1.0),)),
    Metric("grpc_256mib_mbps", "256 MiB in+out gRPC (MB/s)", "{:,.0f}", (Target(">=", 1.0),)),
    Metric("start_to_ready_s", "start to ready (s)", "{:.2f}", (Target("<=", 0.6), Target("<=", 0.6, None))),
    Metric("launch_to_ready_s", "process launch to ready (s)", "{:.2f}"),
    Metric("idle_rss_mib", "idle RSS, whole tree (MiB)", "{:,.0f}",
           (Target("<=", _IDLE_RSS_BEFORE_NATIVE_MIB / 2, None),)),
    Metric("peak_rss_mib", "peak RSS, {size} MiB in flight (MiB)", "{:,.0f}", (Target("<=", 1.0),)),
    Metric("peak_pss_mib", "peak PSS, {size} MiB in flight (MiB)", "{:,.0f}"),
]


def _num(value) -> Optional[float]:
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _value(results: Dict[str, Dict], server: str, key: str) -> Optional[float]:
    return _num(results.get(server, {}).get("metrics", {}).get(key))


def ratios(results: Dict[str, Dict], reference: str = REFERENCE) -> Dict[str, Dict[str, Optional[float]]]:
    """Each server's value divided by ``reference``'s, per metric."""
    out = {}
    for key in SERVERS:
        out[key] = {}
        for metric in METRICS:
            a, b = _value(results, key, metric.key), _value(results, reference, metric.key)
            out[key][metric.key] = a / b if a is not None and b else None
    return out


def verdicts(results: Dict[str, Dict]) -> List[Dict]:
    """PASS/MISS of pytriton_like against every target (n/a when a number is missing)."""
    out = []
    for metric in METRICS:
        for target in metric.targets:
            if target.reference is None:
                value = _value(results, CANDIDATE, metric.key)
            else:
                value = ratios(results, target.reference)[CANDIDATE][metric.key]
            if value is None:
                verdict = "n/a"
            else:
                verdict = "PASS" if (value <= target.bound if target.op == "<=" else value >= target.bound) else "MISS"
            out.append({"metric": metric.key, "target": target.text(), "value": value, "verdict": verdict})
    return out


def _label(metric: Metric, memory_mib: Optional[float]) -> str:
    return metric.label.format(size=f"{memory_mib:g}" if memory_mib else "?")


def table(results: Dict[str, Dict], memory_mib: Optional[float]) -> str:
    """A Markdown table: each server's numbers, pytriton_like's ratios to PyTriton and to the
    Python-backend floor, the targets and verdicts."""
    to_pytriton, to_floor = ratios(results, REFERENCE), ratios(results, FLOOR)
    by_metric: Dict[str, List[Dict]] = {}
    for v in verdicts(results):
        by_metric.setdefault(v["metric"], []).append(v)
    head = ["metric", *SERVERS.values(), "ours / PyTriton", "ours / floor", "target", "verdict"]
    rows = [head, ["---"] * len(head)]
    for metric in METRICS:
        if all(_value(results, k, metric.key) is None for k in SERVERS):
            continue  # e.g. 256 MiB in quick mode
        row = [_label(metric, memory_mib)]
        for key in SERVERS:
            value = _value(results, key, metric.key)
            row.append(metric.fmt.format(value) if value is not None else "n/a")
        for ratio in (to_pytriton, to_floor):
            r = ratio[CANDIDATE][metric.key]
            row.append(f"{r:#.3g}x" if r is not None else "n/a")
        found = by_metric.get(metric.key, [])
        row += ["; ".join(v["target"] for v in found), "; ".join(f"**{v['verdict']}**" for v in found)]
        rows.append(row)
    return "\n".join("| " + " | ".join(cells) + " |" for cells in rows)


def write_json(path: pathlib.Path, document: Dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")


def plot(path: pathlib.Path, results: Dict[str, Dict], title: str, memory_mib: Optional[float]) -> None:
    """Bars per metric group, one colour per server, the ratio to PyTriton over each bar; verdicts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    in_flight = f"{memory_mib:g} MiB in flight" if memory_mib else "peak"
    panels = [
        ("sequential latency, median (ms, lower is better)",
         ["seq_http_median_ms", "seq_grpc_median_ms"], ["HTTP", "gRPC"]),
        ("perf_analyzer, concurrency 1: p50 (ms, lower is better)",
         ["pa_http_c1_p50_ms", "pa_grpc_c1_p50_ms"], ["HTTP", "gRPC"]),
        ("perf_analyzer throughput (infer/s, higher is better)",
         ["pa_http_c8_rps", "pa_http_c32_rps", "pa_grpc_c8_rps", "pa_grpc_c32_rps"],
         ["HTTP c8", "HTTP c32", "gRPC c8", "gRPC c32"]),
        ("HTTP throughput, wrk (req/s, higher is better)", ["wrk_8_rps", "wrk_32_rps", "wrk_128_rps"],
         ["8 conn.", "32 conn.", "128 conn."]),
        ("large tensors in+out, gRPC (MB/s, higher is better)",
         ["grpc_16mib_mbps", "grpc_256mib_mbps"], ["16 MiB", "256 MiB"]),
        ("time to ready (s, lower is better)",
         ["start_to_ready_s", "launch_to_ready_s"], ["from start", "from launch"]),
        ("RSS of the whole process tree (MiB, lower is better)", ["idle_rss_mib", "peak_rss_mib"], ["idle", in_flight]),
    ]
    colors = {"pytriton": "#8c8c8c", "pytriton_like": "#1f77b4", "floor": "#2ca02c", "native_floor": "#d62728"}
    ratio = ratios(results, FLOOR)
    fig, grid = plt.subplots(3, 3, figsize=(16, 12))
    axes = grid.ravel()
    for ax, (panel_title, keys, ticks) in zip(axes, panels):
        present = [i for i, k in enumerate(keys) if any(_value(results, s, k) is not None for s in SERVERS)]
        keys, ticks = [keys[i] for i in present], [ticks[i] for i in present]
        width = 0.8 / len(SERVERS)
        for i, (server, name) in enumerate(SERVERS.items()):
            values = [_value(results, server, k) for k in keys]
            xs = [j + (i - (len(SERVERS) - 1) / 2) * width for j in range(len(keys))]
            bars = ax.bar(xs, [v or 0 for v in values], width, label=name, color=colors[server])
            for bar, key, value in zip(bars, keys, values):
                r = ratio[server].get(key)
                text = "n/a" if value is None else (f"{r:#.3g}x" if server != FLOOR and r is not None else "")
                ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(ticks)
        ax.set_title(panel_title, fontsize=10)
        ax.tick_params(labelsize=9)
        ax.margins(y=0.12)
    for unused in axes[len(panels):-1]:
        unused.axis("off")
    summary = axes[-1]
    summary.axis("off")
    handles, names = axes[0].get_legend_handles_labels()
    (axes[len(panels)] if len(panels) < len(axes) - 1 else summary).legend(
        handles, names, loc="center", fontsize=11, frameon=False)
    lines = [f"{CANDIDATE}: (bars show ratios to the Python-backend floor)", ""]
    labels = {m.key: _label(m, memory_mib) for m in METRICS}
    for v in verdicts(results):
        r = f"{v['value']:#.3g}" if v["value"] is not None else "n/a"
        lines.append(f"{labels[v['metric']].split(' (')[0]}: {r} ({v['target']}) {v['verdict']}")
    summary.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", fontsize=8, family="monospace")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def title_of(document: Dict) -> str:
    return f"pytriton_like bench ({document['profile']['name']}), {document['date']}, {document['git']['describe']}"


#!/usr/bin/env python3
"""``make bench-nested-profile``: what each request of ``make bench-nested``'s models does with the
CPU, by process and by kind of work, from a system-wide ``perf`` profile.

In one server (bench/serve_nested.py), perf_analyzer drives ``Outer`` (a nested call through the
relay), ``OuterBLS`` (Triton's Python backend, BLS) and ``Inner`` alone in turns, ``--rounds``
times, while ``perf record -a`` samples every CPU once per 250 µs of CPU time it runs. Each
sample is sorted by process (perf_analyzer, tritonserver, the serving process, BLS's stub) and by
kind (copies of memory, page faults, the Python interpreter, numpy, the rest of the kernel, the
rest of user space); the counts over Triton's count of the model's requests give µs of CPU per
request. What the relay's path does beyond ``Inner`` alone, against what BLS's does, is where a
nested call's time goes. It needs ``perf`` (Debian's linux-perf, which the target installs) and
root, or ``kernel.perf_event_paranoid`` of -1. What the numbers show is in bench/README.md.

    make bench-nested-profile                                # 1 MiB over HTTP at c1, 2 rounds: about a minute
    make bench-nested-profile ARGS="--size 16 --protocol grpc --concurrency 8"
"""

import argparse
import collections
import json
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import measure
import nested
import servers

HERE = pathlib.Path(__file__).resolve().parent
PATHS = ("relay", "bls", "alone")
PERIOD_US = 250  # one sample per this much CPU time (perf's cpu-clock event, -c in ns below)
PROCESSES = {"perf_analyzer": "perf_analyzer", "tritonserver": "tritonserver", "python": "serving process",
             "triton_python_b": "BLS stub"}  # perf's comm (the first 15 characters of the name)
COPIES = re.compile(r"memmove|memcpy|copy_to_iter|copy_from_iter|copy_user")
PAGE_FAULTS = re.compile(r"page_fault|clear_page|do_anonymous_page|handle_mm_fault|unmap_page_range|do_fault")


def kind(dso: str, symbol: str) -> str:
    """The kind of work a sample of ``symbol`` in ``dso`` did."""
    if COPIES.search(symbol):
        return "copies"
    if PAGE_FAULTS.search(symbol):
        return "page faults"
    if "libpython" in dso:
        return "interpreter"
    if "_multiarray_umath" in dso:
        return "numpy"
    return "kernel, other" if dso == "[kernel.kallsyms]" else "user, other"


def samples(data: pathlib.Path) -> Dict[Tuple[str, str], int]:
    """Samples of ``perf record``'s ``data`` per (process, kind); processes outside PROCESSES are left out."""
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "comm,dso,sym", "-g", "none", "--stdio",
         "-F", "sample,comm,dso,sym", "--field-separator", "\t"],
        capture_output=True, text=True, check=True).stdout
    counts: Dict[Tuple[str, str], int] = collections.Counter()
    for line in report.splitlines():
        fields = [field.strip() for field in line.split("\t")]
        if line.startswith("#") or len(fields) < 4 or fields[1] not in PROCESSES:
            continue
        symbol = re.sub(r"^\[.\]\s*", "", fields[3])
        counts[(PROCESSES[fields[1]], kind(fields[2], symbol))] += int(fields[0])
    return counts


def profile(server: servers.Server, key: str, args, data: pathlib.Path) -> Dict:
    """perf_analyzer against ``key``'s model, ``perf record -a`` all the while; its µs per request by process and kind."""
    model = nested.MODELS[key]
    port = server.http_port if args.protocol == "http" else server.grpc_port
    before = measure.model_stats(server.http_port, model)["requests"]
    recorder = subprocess.Popen(["perf", "record", "-a", "-e", "cpu-clock", "-c", str(PERIOD_US * 1000), "-o", str(data)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)  # perf opens its events
        found = measure.perf_analyzer(args.protocol, port, concurrency=args.concurrency, model=model,
                                      shape=f"x:{args.size}", interval_ms=args.interval_ms)
    finally:
        recorder.send_signal(signal.SIGINT)
        try:
            _, errors = recorder.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.communicate()
            raise
    if recorder.returncode not in (0, -signal.SIGINT):
        raise measure.BenchError(f"perf record failed: {errors.decode(errors='replace')[-500:]}")
    requests = measure.model_stats(server.http_port, model)["requests"] - before
    spent = {f"{process} / {work}": round(count * PERIOD_US / requests, 1)
             for (process, work), count in sorted(samples(data).items())}
    return {"path": key, "requests": requests, "p50_ms": found["p50_ms"], "req_per_s": found["req_per_s"],
            "cpu_us": spent}


def table(results: List[Dict]) -> str:
    """Medians over the rounds, µs of CPU per request: each process and kind, all, and beyond ``Inner`` alone."""
    def median(key: str, pick) -> float:
        return statistics.median(pick(r) for r in results if r["path"] == key)

    rows = sorted({row for r in results for row in r["cpu_us"]})
    totals = {key: median(key, lambda r: sum(r["cpu_us"].values())) for key in PATHS}
    lines = ["| µs of CPU per request (medians) | " + " | ".join(nested.LABELS[key] for key in PATHS) + " |",
             "|---" * (len(PATHS) + 1) + "|",
             "| p50 latency | " + " | ".join(f"{median(key, lambda r: r['p50_ms']) * 1000:,.0f} µs" for key in PATHS) + " |",
             "| requests/s | " + " | ".join(f"{median(key, lambda r: r['req_per_s']):,.0f}" for key in PATHS) + " |"]
    for row in rows:
        lines.append(f"| {row} | " + " | ".join(f"{median(key, lambda r, row=row: r['cpu_us'].get(row, 0.0)):,.0f}"
                                                for key in PATHS) + " |")
    lines.append("| all | " + " | ".join(f"{totals[key]:,.0f}" for key in PATHS) + " |")
    lines.append("| beyond Inner alone | " + " | ".join(
        "—" if key == "alone" else f"{totals[key] - totals['alone']:,.0f}" for key in PATHS) + " |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--size", type=int, choices=sorted(nested.SIZES), default=262144, help="FP32 values a request")
    parser.add_argument("--protocol", choices=("grpc", "http"), default="http")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--interval-ms", type=int, default=2000, help="perf_analyzer's measurement window")
    parser.add_argument("--output", type=pathlib.Path, default=HERE / "results" / "nested_profile.json")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-nested-profile-") as tmp:
        workdir = pathlib.Path(tmp)
        server = nested.start_server(workdir)
        with server:
            nested.check_answers(server, [args.size])
            started = time.time()
            for round_index in range(args.rounds):
                for key in nested.turned(PATHS, round_index):
                    found = profile(server, key, args, workdir / f"{key}-{round_index}.data")
                    found["round"] = round_index
                    results.append(found)
                    print(f"  round {round_index + 1} {key:6} p50 {found['p50_ms'] * 1000:7.0f} us"
                          f"  {sum(found['cpu_us'].values()):7.0f} us of CPU a request", flush=True)
        leftovers = (server.stop_report or {}).get("ports_in_use") or []
    text = (f"{nested.SIZES[args.size]}, {args.protocol}, c{args.concurrency}, {args.rounds} rounds\n\n"
            + table(results))
    print(text)
    args.output.write_text(json.dumps({"when": started, "python": sys.version.split()[0], "size": args.size,
                                       "protocol": args.protocol, "concurrency": args.concurrency,
                                       "results": results, "table": text}, indent=1) + "\n")
    print(f"written {args.output}")
    if leftovers:
        raise SystemExit(f"ports still in use after the stop: {leftovers}")


if __name__ == "__main__":
    main()

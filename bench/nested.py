#!/usr/bin/env python3
"""``make bench-nested``: a model calling another model, three ways, side by side in one server.

One server (bench/serve_nested.py) holds ``Inner`` (y = 2x) and the models that call it for each
request they get: ``Outer`` (a bound callable, ``triton_context.client("Inner")``: a nested call
through the relay), ``OuterNetwork`` (a bound callable with a gRPC ``ModelClient`` of the server's own
url: the path nested calls took before) and ``OuterBLS`` (a Triton Python-backend model, BLS); and,
at 16 floats, ``OuterRaw``: the relay's nested call with the least Python there can be
(bench/nested_raw.py), which shows what the client's Python costs. For 16 floats and for 1 MiB in
and out, over gRPC and HTTP, perf_analyzer measures each outer model's p50 latency with one
request in flight and its throughput with eight, and ``Inner`` alone's: what the same request
costs without a nested call, the bound no nested call can beat. The models take turns within
each configuration, and each configuration is measured ``--rounds`` times (the median is shown).
The table gives each number, the ratios to BLS with the goals of issue 41, the range of that ratio
over the rounds (relay and BLS measured one shortly after the other in each: on a 2-core machine
the rounds differ more than the two paths do), and for the latencies the share of BLS's nested
hop (its p50 beyond Inner alone's) that the relay's takes. At c1, the last column is what a relay
that cost nothing would give against BLS (of the medians, and within each round): the relay's p50
less the relay's own time in each request (Triton's statistics: ``Outer``'s time in the model less
``Inner``'s in the core), the client, Triton's front end and ``Inner`` being what a BLS call pays
too; where it is above a goal, no relay meets that goal with this ``Inner``. A second table says where each c8
request's CPU went: per process (perf_analyzer's own included), beyond what Inner alone costs,
context switches, and how many cores were busy.

    make bench-nested                      # about 17 minutes
    make bench-nested ARGS="--rounds 1 --protocols grpc --sizes 16"
"""

import argparse
import contextlib
import json
import math
import os
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import measure
import servers

HERE = pathlib.Path(__file__).resolve().parent
MODELS = {"relay": "Outer", "raw": "OuterRaw", "network": "OuterNetwork", "bls": "OuterBLS", "alone": "Inner"}
LABELS = {"relay": "nested call (relay)", "raw": "least Python (no client)", "network": "gRPC client (before)",
          "bls": "Python backend BLS", "alone": "Inner alone (no nested call)"}
RAW_SIZES = (16,)  # OuterRaw takes small tensors only (bench/nested_raw.py)
SIZES = {16: "16 floats", 262144: "1 MiB"}
# issue 41's goals: ours against BLS (c1: p50 at most this share of BLS's; c8: at least this many times its throughput)
GOALS = {(16, 1): 1.0, (262144, 1): 0.8, (16, 8): 1.3, (262144, 8): 1.0}


def check_answers(server: servers.Server, sizes: List[int]) -> None:
    """Each outer model answers 2x over HTTP and gRPC, for every size, before anything is timed."""
    with contextlib.closing(grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")) as grpc_client, \
            contextlib.closing(httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")) as http_client:
        for size in sizes:
            x = np.random.default_rng(size).random((1, size), dtype=np.float32)
            for key, model in MODELS.items():
                if key == "raw" and size not in RAW_SIZES:
                    continue
                for lib, client in ((grpcclient, grpc_client), (httpclient, http_client)):
                    infer_input = lib.InferInput("x", list(x.shape), "FP32")
                    infer_input.set_data_from_numpy(x)
                    y = client.infer(model, [infer_input]).as_numpy("y")
                    if y is None or not np.array_equal(y, x * np.float32(2)):
                        raise measure.BenchError(f"{model} answered wrongly over {lib.__name__}")


def start_server(workdir: pathlib.Path) -> servers.Server:
    """bench/serve_nested.py started on free loopback ports, its BLS model's repository in ``workdir``."""
    return servers.start_script(HERE / "serve_nested.py", [f"--repository={workdir / 'repository'}"], "nested",
                                "nested calls", workdir)


def turned(keys: Sequence[str], round_index: int) -> List[str]:
    """``keys`` in round ``round_index``'s order: turned by one each round, so no model always goes first."""
    shift = round_index % len(keys)
    return list(keys[shift:]) + list(keys[:shift])


def measure_all(server: servers.Server, args, rounds: Optional[range] = None) -> List[Dict]:
    """Each model's c1 and c8 numbers, for each of ``rounds`` (the round's number turns the models'
    order), size and protocol."""
    results = []
    keys = list(MODELS)
    for round_index in rounds or range(args.rounds):
        for size in args.sizes:
            for protocol in args.protocols:
                port = server.grpc_port if protocol == "grpc" else server.http_port
                for concurrency in (1, 8):
                    for key in (key for key in turned(keys, round_index) if key != "raw" or size in RAW_SIZES):
                        before = measure.model_stats(server.http_port, MODELS[key])
                        inner_before = measure.model_stats(server.http_port, MODELS["alone"])
                        with measure.CpuMeter(server.tree.refresh) as cpu:
                            found = measure.perf_analyzer(protocol, port, concurrency=concurrency, model=MODELS[key],
                                                          shape=f"x:{size}", interval_ms=args.interval_ms)
                        after = measure.model_stats(server.http_port, MODELS[key])
                        found.update(path=key, size=size, protocol=protocol, round=round_index,
                                     **cpu_per_request(cpu, found["cpu_s"], after["requests"] - before["requests"]))
                        if key == "relay":
                            found["relay_own_us"] = relay_own_us(
                                before, after, inner_before, measure.model_stats(server.http_port, MODELS["alone"]))
                        results.append(found)
                        print(f"  round {round_index + 1} {SIZES[size]:>9} {protocol:4} c{concurrency} {key:8}"
                              f" p50 {found['p50_ms'] * 1000:7.0f} us  {found['req_per_s']:8.1f}/s", flush=True)
    return results


def relay_own_us(outer_before: Dict, outer_after: Dict, inner_before: Dict, inner_after: Dict) -> float:
    """The relay's own time in each of ``Outer``'s requests, from Triton's statistics over a run:
    ``Outer``'s compute_infer (its relay hop and its callable) less ``Inner``'s time in Triton's core
    per nested call (what a BLS call of it waits for too). What is left is the relay hop, the nested
    call beyond ``Inner``, and the few µs of the callable's own Python."""
    def mean_us(before, after, phase):
        count = max(1, after[f"{phase}_count"] - before[f"{phase}_count"])
        return (after[f"{phase}_ns"] - before[f"{phase}_ns"]) / count / 1000

    return mean_us(outer_before, outer_after, "infer") - mean_us(inner_before, inner_after, "success")


def cpu_per_request(cpu: measure.CpuMeter, load_generator_s: float, requests: int) -> Dict:
    """Where a request's CPU went while perf_analyzer ran (its windows and the warm-up between):
    µs per request by process, the load generator included, context switches per request, and how
    many of the machine's cores were busy on average."""
    labels = {"serve_nested.py": "serving process", "triton_python_backend_stub": "BLS stub"}
    cpu_us = {labels.get(label, label): spent for label, spent in cpu.per(requests).items() if spent >= 0.5}
    cpu_us["perf_analyzer"] = round(load_generator_s / requests * 1e6, 1)
    switches = sum(cpu.per(requests, "switches", scale=1).values())
    busy = sum(cpu.share().values()) + load_generator_s / cpu.seconds
    return {"requests": requests, "cpu_us": cpu_us, "switches": round(switches, 1), "cores_busy": round(busy, 2)}


def cpu_table(results: List[Dict], args) -> str:
    """At c8, per request: the CPU each process spent, the context switches, and the part that is the
    outer model's own (beyond what ``Inner`` alone costs, the same for every path); medians over rounds."""
    columns = ("perf_analyzer", "tritonserver", "serving process", "BLS stub")
    lines = ["| c8, per request (medians) | requests/s | cores busy (of " + str(os.cpu_count()) + ") | "
             + " | ".join(f"{column} µs" for column in columns)
             + " | all µs | beyond Inner alone µs | context switches |", "|---" * (len(columns) + 6) + "|"]
    for size in args.sizes:
        for protocol in args.protocols:
            def median(key, pick):
                values = [pick(r) for r in results if (r["size"], r["protocol"], r["concurrency"], r["path"])
                          == (size, protocol, 8, key) and "cpu_us" in r]
                return statistics.median(values) if values else float("nan")

            alone = median("alone", lambda r: sum(r["cpu_us"].values()))
            for key in MODELS:
                total = median(key, lambda r: sum(r["cpu_us"].values()))
                if math.isnan(total):
                    continue
                parts = [median(key, lambda r, column=column: r["cpu_us"].get(column, 0.0)) for column in columns]
                beyond = "—" if key == "alone" else f"{total - alone:,.0f}"
                lines.append(f"| {SIZES[size]}, {protocol}, {LABELS[key]} | {median(key, lambda r: r['req_per_s']):,.0f}"
                             f" | {median(key, lambda r: r['cores_busy']):.2f} | "
                             + " | ".join(f"{part:,.0f}" for part in parts)
                             + f" | {total:,.0f} | {beyond} | {median(key, lambda r: r['switches']):.1f} |")
    return "\n".join(lines)


def table(results: List[Dict], args) -> str:
    def rows(size, protocol, concurrency, key):
        return [r for r in results if (r["size"], r["protocol"], r["concurrency"], r["path"])
                == (size, protocol, concurrency, key)]

    def median(size, protocol, concurrency, key, field):
        values = [r[field] for r in rows(size, protocol, concurrency, key)]
        return statistics.median(values) if values else float("nan")

    def round_ratios(size, protocol, concurrency, field):
        """relay / BLS within each round: the two were measured one shortly after the other."""
        bls = {r["round"]: r[field] for r in rows(size, protocol, concurrency, "bls")}
        return sorted(r[field] / bls[r["round"]] for r in rows(size, protocol, concurrency, "relay") if r["round"] in bls)

    def round_floors(size, protocol):
        """What a relay costing nothing would give against BLS at c1, within each round."""
        bls = {r["round"]: r["p50_ms"] for r in rows(size, protocol, 1, "bls")}
        return sorted((r["p50_ms"] - r["relay_own_us"] / 1000) / bls[r["round"]] for r in rows(size, protocol, 1, "relay")
                      if r["round"] in bls and "relay_own_us" in r)

    lines = ["| outer model calling Inner | " + " | ".join(LABELS[key] for key in MODELS)
             + " | relay / BLS | per round | before / BLS | goal | relay's nested hop / BLS's"
             + " | a relay costing nothing / BLS (per round) |", "|---" * 12 + "|"]
    for size in args.sizes:
        for protocol in args.protocols:
            for concurrency, field, unit in ((1, "p50_ms", "c1 p50"), (8, "req_per_s", "c8 throughput")):
                values = {key: median(size, protocol, concurrency, key, field) for key in MODELS}
                shown = ["—" if math.isnan(values[key]) else  # not measured at this size (OuterRaw)
                         f"{values[key] * 1000:,.0f} µs" if field == "p50_ms" else f"{values[key]:,.0f}/s"
                         for key in MODELS]
                relay, before = values["relay"] / values["bls"], values["network"] / values["bls"]
                paired = round_ratios(size, protocol, concurrency, field)
                spread = f"{paired[0]:.2f}–{paired[-1]:.2f}×" if paired else "—"
                goal = GOALS[(size, concurrency)]
                met = relay <= goal if field == "p50_ms" else relay >= goal
                sign = "≤" if field == "p50_ms" else "≥"
                hop = floor = "—"
                if field == "p50_ms" and values["bls"] > values["alone"]:
                    hop = f"{(values['relay'] - values['alone']) / (values['bls'] - values['alone']):.2f}×"
                own = median(size, protocol, concurrency, "relay", "relay_own_us") if field == "p50_ms" else math.nan
                if not math.isnan(own):
                    floors = round_floors(size, protocol)
                    floor = f"{(values['relay'] - own / 1000) / values['bls']:.2f}× ({floors[0]:.2f}–{floors[-1]:.2f}×)"
                lines.append(f"| {SIZES[size]}, {protocol}, {unit} | " + " | ".join(shown)
                             + f" | {relay:.2f}× | {spread} | {before:.2f}× | {sign} {goal}×: {'met' if met else 'MISSED'}"
                             + f" | {hop} | {floor} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--protocols", nargs="+", choices=("grpc", "http"), default=["grpc", "http"])
    parser.add_argument("--sizes", nargs="+", type=int, choices=sorted(SIZES), default=sorted(SIZES))
    parser.add_argument("--interval-ms", type=int, default=2000, help="perf_analyzer's measurement window")
    parser.add_argument("--output", type=pathlib.Path, default=HERE / "results" / "nested.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-nested-") as tmp:
        workdir = pathlib.Path(tmp)
        server = start_server(workdir)
        with server:
            check_answers(server, args.sizes)
            started = time.time()
            results = measure_all(server, args)
        report = server.stop_report or {}
        leftovers = report.get("ports_in_use") or []
    text = table(results, args) + "\n\n" + cpu_table(results, args)
    print(text)
    args.output.write_text(json.dumps({"when": started, "python": sys.version.split()[0], "results": results,
                                       "table": text}, indent=1) + "\n")
    print(f"written {args.output}")
    if leftovers:
        raise SystemExit(f"ports still in use after the stop: {leftovers}")


if __name__ == "__main__":
    main()

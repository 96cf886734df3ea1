#!/usr/bin/env python3
"""``make bench-nested-split``: where a nested call's time goes, inside a running server.

A server in this process holds ``Inner`` (y = 2x) and the models that call it, FP32 ``[-1]`` as
in bench/serve_nested.py. Four tables (the first three for 16 floats and 1 MiB):

1. **The split.** ``Outer`` (a bound callable) calls ``Inner`` through
   ``triton_context.client("Inner")`` once per request; a client sends ``--requests`` sequential
   requests to it over HTTP. The callable times each nested call, and the caller's end of the
   relay (the public names of pytriton_like/relay/calls.py and transport.py) is wrapped here to
   time, within each call: encoding the CALL (a large input's copy into the caller's arena
   included), sending it, waiting for the REPLY, receiving and decoding it. What is left is the
   client's own Python (arguments checked, the request planned, a connection taken and given
   back). Triton's statistics give, over the same requests, ``Inner``'s time in Triton's core per
   call (queued, run, answered: what a BLS call of it pays too) and ``Outer``'s relay hop (its
   compute_infer beyond its callable). Medians of what was timed here; Triton's numbers are means.
2. **The bound at c1.** The same sequential requests go, in turn, to ``OuterBLS`` (a Triton
   Python-backend model calling ``Inner`` with BLS, bench/nested_bls/). ``Outer``'s p50 less the
   relay's own time (``Outer``'s relay hop and the nested call beyond ``Inner``'s time in the core)
   is what a relay that cost nothing would give: the client, Triton's front end and ``Inner`` are
   paid by a BLS call too. Where that is above a target ratio to BLS's p50, no relay meets it.
3. **On two CPUs and on one.** ``LoopRelay`` (a bound callable, ``triton_context.client``),
   ``LoopRaw`` (a bound callable making the same calls with the least Python there can be,
   bench/nested_raw.py: 16 floats only) and ``LoopBLS`` (a Triton Python-backend model,
   bench/nested_loop_bls/) each time 1,000 calls of ``Inner`` in a loop, 5 rounds, first as the
   system places the processes, then with tritonserver, its Python-backend stubs and this process
   pinned to one CPU (the benchmark pins; the library never does). On one CPU no hand-off between
   the processes' threads waits for an idle CPU to wake: what remains is the work a call does.
   Run in .venv-numpy1: the BLS model runs in Triton's stub.
4. **The client's Python, warm and cold.** ``ClientPython`` (a bound callable) times the CPU its
   thread spends in ``triton_context.client("Inner").infer_batch`` with the connection's call
   left out (it returns ``Inner``'s answer at once: what is left is the client's own Python), 16
   floats, first back to back, then each right after a real nested call of the least Python
   (bench/nested_raw.py). A nested call waits while tritonserver and ``Inner`` run on the same
   CPUs; after it, the client's code and data are out of the CPU's caches, and the same Python
   takes several times as long as back to back.

Wrapping costs about a microsecond per part.

    make bench-nested-split                         # about 2 minutes
    make bench-nested-split ARGS="--requests 5000"
"""

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import tempfile
import threading
import time
import urllib.request
from typing import Callable, Dict, Iterator, List

import numpy as np
import psutil

from pytriton_like.client import ModelClient
from pytriton_like.decorators import triton_context
from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.relay import calls, transport
from pytriton_like.server.process import free_ports
from pytriton_like.triton import Triton, TritonConfig, TritonSecurityConfig

import nested_raw
import servers

HERE = pathlib.Path(__file__).resolve().parent
INPUTS = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
OUTPUTS = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
TIMINGS = [Tensor(name="us", dtype=np.float32, shape=(-1,))]
CONFIG = ModelConfig(max_batch_size=64, batcher=DynamicBatcher())
SIZES = {16: "16 floats", 262144: "1 MiB"}
PARTS = ("encode", "send", "wait", "recv", "decode", "channel")
TIMES: Dict[str, List[int]] = {"call": [], "callable": [], **{part: [] for part in PARTS}}
WARM_UP, ROUNDS, CALLS = 300, 5, 1000  # as bench/nested_loop_bls/model.py's
BLOCKS = 5  # the split's requests to Outer and OuterBLS, in turn
LOOPS = {"LoopRelay": "nested call (relay)", "LoopRaw": "least Python (no client)", "LoopBLS": "BLS"}
_inside = threading.local()  # set while a nested call runs in this thread: the relay servers' own sends are not timed
_stubbed = threading.local()  # .outputs set: the connection's call returns them at once (ClientPython)


def timed(function: Callable, part: str) -> Callable:
    """``function``, timed into TIMES[part] while a nested call runs in the thread."""
    def wrapper(*args, **kwargs):
        if not getattr(_inside, "call", False):
            return function(*args, **kwargs)
        started = time.perf_counter_ns()
        try:
            return function(*args, **kwargs)
        finally:
            TIMES[part].append(time.perf_counter_ns() - started)
    return wrapper


def wrap_the_callers_end() -> None:
    call = calls.CallChannel.call

    def channel_call(*args, **kwargs):
        outputs = getattr(_stubbed, "outputs", None)
        if outputs is not None:
            return outputs
        _inside.call = True
        started = time.perf_counter_ns()
        try:
            return call(*args, **kwargs)
        finally:
            TIMES["channel"].append(time.perf_counter_ns() - started)
            _inside.call = False

    calls.CallChannel.call = channel_call
    calls.encode_call = timed(calls.encode_call, "encode")
    calls.decode_reply = timed(calls.decode_reply, "decode")
    transport.Channel.send = timed(transport.Channel.send, "send")
    transport.Channel.readable = timed(transport.Channel.readable, "wait")
    transport.Channel.recv = timed(transport.Channel.recv, "recv")


def inner(requests):
    return [{"y": request["x"] * np.float32(2)} for request in requests]


@triton_context
def outer(requests, triton_context):
    started = time.perf_counter_ns()
    client = triton_context.client("Inner")
    answers = []
    for request in requests:
        called = time.perf_counter_ns()
        answers.append({"y": client.infer_batch(x=request["x"])["y"]})
        TIMES["call"].append(time.perf_counter_ns() - called)
    TIMES["callable"].append(time.perf_counter_ns() - started)
    return answers


def timed_loop(call: Callable[[], object]) -> List[float]:
    """Microseconds per ``call()`` in each of ROUNDS rounds of CALLS, after WARM_UP calls."""
    for _ in range(WARM_UP):
        call()
    rounds = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(CALLS):
            call()
        rounds.append((time.perf_counter() - started) / CALLS * 1e6)
    return rounds


@triton_context
def loop_relay(requests, triton_context):
    client = triton_context.client("Inner")
    x = requests[0]["x"]
    rounds = timed_loop(lambda: client.infer_batch(x=x))
    return [{"us": np.array([rounds], dtype=np.float32)} for _ in requests]


def loop_raw(requests):
    """The same calls with the least Python (bench/nested_raw.py): 16 floats only."""
    x = requests[0]["x"]
    caller = nested_raw.RawCaller("Inner")
    try:
        rounds = timed_loop(lambda: caller.call({"x": x}))
    finally:
        caller.close()
    return [{"us": np.array([rounds], dtype=np.float32)} for _ in requests]


@triton_context
def client_python(requests, triton_context):
    """Per round, the median thread CPU (µs) of the client's Python per call: back to back, and
    right after a nested call (16 floats)."""
    x = requests[0]["x"]
    _stubbed.outputs = triton_context.client("Inner").infer_batch(x=x)  # the answer, and the config learnt
    caller = nested_raw.RawCaller("Inner")

    def client_alone() -> int:
        started = time.thread_time_ns()
        triton_context.client("Inner").infer_batch(x=x)
        return time.thread_time_ns() - started

    def after_a_call() -> int:
        _stubbed.outputs, outputs = None, _stubbed.outputs
        caller.call({"x": x})
        _stubbed.outputs = outputs
        return client_alone()

    rounds = []
    try:
        for _ in range(ROUNDS):
            for timed_call in (client_alone, after_a_call):
                for _ in range(WARM_UP):
                    timed_call()
                rounds.append(statistics.median(timed_call() for _ in range(CALLS)) / 1000)
    finally:
        _stubbed.outputs = None
        caller.close()
    return [{"us": np.array([rounds], dtype=np.float32)} for _ in requests]


# -- the split ----------------------------------------------------------------------------------


def statistics_of(http_port: int, model: str) -> Dict[str, List[int]]:
    url = f"http://127.0.0.1:{http_port}/v2/models/{model}/stats"
    with urllib.request.urlopen(url, timeout=10) as response:
        found = json.load(response)["model_stats"][0]["inference_stats"]
    return {phase: [int(found[phase]["ns"]), int(found[phase]["count"])] for phase in ("success", "compute_infer")}


def median_us(values: List[int]) -> float:
    return statistics.median(values) / 1000 if values else float("nan")


def split(clients: Dict[str, ModelClient], http_port: int, size: int, requests: int) -> Dict[str, float]:
    """Sequential requests to ``Outer`` and ``OuterBLS`` in turn, BLOCKS blocks each: the callable's
    and the wrappers' timings and Triton's statistics (taken around ``Outer``'s blocks only:
    ``OuterBLS`` calls ``Inner`` too), and each model's latency as this process's client sees it."""
    x = np.random.default_rng(size).random((1, size), dtype=np.float32)
    for client in clients.values():
        for _ in range(max(50, requests // 20)):
            client.infer_batch(x=x)
    for values in TIMES.values():
        values.clear()
    latency: Dict[str, List[int]] = {model: [] for model in clients}
    spent = {model: {"success": [0, 0], "compute_infer": [0, 0]} for model in ("Inner", "Outer")}
    for _ in range(BLOCKS):
        for model, client in clients.items():
            if model == "Outer":
                before = {name: statistics_of(http_port, name) for name in spent}
            for _ in range(max(1, requests // BLOCKS)):
                started = time.perf_counter_ns()
                client.infer_batch(x=x)
                latency[model].append(time.perf_counter_ns() - started)
            if model == "Outer":
                for name, phases in spent.items():
                    after = statistics_of(http_port, name)
                    for phase, total in phases.items():
                        total[0] += after[phase][0] - before[name][phase][0]
                        total[1] += after[phase][1] - before[name][phase][1]
    found = {key: median_us(values) for key, values in TIMES.items()}
    found["inner"] = spent["Inner"]["success"][0] / spent["Inner"]["success"][1] / 1000
    outer_compute = spent["Outer"]["compute_infer"][0] / spent["Outer"]["compute_infer"][1] / 1000
    found["hop"] = outer_compute - statistics.mean(TIMES["callable"]) / 1000
    found["p50"], found["bls_p50"] = median_us(latency["Outer"]), median_us(latency["OuterBLS"])
    return found


def split_table(results: Dict[int, Dict[str, float]]) -> str:
    heads = ["nested call", "encode CALL", "send", "wait", "receive", "decode REPLY", "rest of the call",
             "rest of the client", "Inner in Triton's core (mean)", "nested call beyond Inner",
             "Outer's relay hop (mean)"]
    lines = ["| per nested call (µs) | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for size, found in results.items():
        parts = sum(found[part] for part in PARTS if part != "channel")
        values = [found["call"], found["encode"], found["send"], found["wait"], found["recv"], found["decode"],
                  found["channel"] - parts, found["call"] - found["channel"], found["inner"],
                  found["call"] - found["inner"], found["hop"]]
        lines.append(f"| {SIZES[size]} | " + " | ".join(f"{value:,.0f}" for value in values) + " |")
    return "\n".join(lines)


def bound_table(results: Dict[int, Dict[str, float]]) -> str:
    """What a relay that cost nothing would give at c1: ``Outer``'s p50 less the relay's own time
    (``Outer``'s relay hop and the nested call beyond ``Inner``'s time in the core), against BLS's."""
    heads = ["Outer (relay) p50", "OuterBLS (BLS) p50", "relay / BLS", "the relay's own time",
             "Outer's p50 less the relay's own time", "that / BLS"]
    lines = ["| sequential requests over HTTP (µs) | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for size, found in results.items():
        own = found["hop"] + found["call"] - found["inner"]
        values = [f"{found['p50']:,.0f}", f"{found['bls_p50']:,.0f}", f"{found['p50'] / found['bls_p50']:.2f}×",
                  f"{own:,.0f}", f"{found['p50'] - own:,.0f}", f"{(found['p50'] - own) / found['bls_p50']:.2f}×"]
        lines.append(f"| {SIZES[size]} | " + " | ".join(values) + " |")
    return "\n".join(lines)


# -- on two CPUs and on one ---------------------------------------------------------------------


@contextlib.contextmanager
def one_cpu(pin: bool) -> Iterator[None]:
    """Every thread of this process and of its children (tritonserver, the stubs) on one CPU, then back."""
    if not pin:
        yield
        return
    allowed = os.sched_getaffinity(0)
    cpu = {min(allowed)}

    def place(cpus) -> None:
        this = psutil.Process()
        for process in [this, *this.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                for thread in process.threads():
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(thread.id, cpus)

    place(cpu)
    try:
        yield
    finally:
        place(allowed)


def loops(http_port: int, rounds: int) -> Dict[tuple, List[float]]:
    found: Dict[tuple, List[float]] = {}
    for _ in range(rounds):
        for size in SIZES:
            x = np.random.default_rng(size).random((1, size), dtype=np.float32)
            for pin in (False, True):
                for model in LOOPS:
                    if model == "LoopRaw" and size != 16:
                        continue  # its outputs must be inline
                    with one_cpu(pin), ModelClient(f"http://127.0.0.1:{http_port}", model,
                                                   inference_timeout_s=600) as client:
                        found.setdefault((size, pin, model), []).extend(client.infer_batch(x=x)["us"][0].tolist())
    return found


def loop_table(found: Dict[tuple, List[float]]) -> str:
    lines = ["| 1,000 calls of Inner in a loop (µs a call: median, and the rounds' range) | "
             + " | ".join(LOOPS.values()) + " | relay / BLS | least Python / BLS |", "|---" * (len(LOOPS) + 3) + "|"]
    for size in SIZES:
        for pin, where in ((False, "as the system places them"), (True, "all on one CPU")):
            values = [found.get((size, pin, model), []) for model in LOOPS]
            medians = [statistics.median(value) if value else None for value in values]
            shown = [f"{median:,.0f} ({min(value):,.0f}–{max(value):,.0f})" if value else "—"
                     for median, value in zip(medians, values)]
            ratios = [f"{median / medians[2]:.2f}×" if median else "—" for median in medians[:2]]
            lines.append(f"| {SIZES[size]}, {where} | " + " | ".join(shown + ratios) + " |")
    return "\n".join(lines)


def client_python_table(http_port: int) -> str:
    with ModelClient(f"http://127.0.0.1:{http_port}", "ClientPython", inference_timeout_s=600) as client:
        rounds = client.infer_batch(x=np.ones((1, 16), dtype=np.float32))["us"][0].tolist()
    warm, cold = rounds[0::2], rounds[1::2]
    shown = [f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})" for values in (warm, cold)]
    header = ("| the client's Python per nested call, 16 floats (µs of its thread's CPU: median, and the rounds' range) "
              "| back to back | right after a nested call | after / back to back |")
    row = (f"| `triton_context.client(\"Inner\").infer_batch(x=x)`, the connection's call left out | {shown[0]} | "
           f"{shown[1]} | {statistics.median(cold) / statistics.median(warm):.1f}× |")
    return f"{header}\n|---|---|---|---|\n{row}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests per size for the split")
    parser.add_argument("--rounds", type=int, default=2, help="how many times each loop runs, in turn with the others")
    parser.add_argument("--output", type=pathlib.Path, default=HERE / "results" / "nested_split.md")
    args = parser.parse_args()
    load_before = os.getloadavg()
    wrap_the_callers_end()
    http_port, grpc_port, metrics_port = free_ports(3)
    with tempfile.TemporaryDirectory(prefix="bench-nested-split-") as tmp:
        repository = servers.python_backend_model(pathlib.Path(tmp), "LoopBLS", HERE / "nested_loop_bls")
        servers.python_backend_model(repository, "OuterBLS", HERE / "nested_bls")
        config = TritonConfig(http_address="127.0.0.1", http_port=http_port, grpc_address="127.0.0.1",
                              grpc_port=grpc_port, metrics_address="127.0.0.1", metrics_port=metrics_port,
                              model_repository=repository)
        # the statistics are read without a token
        security = TritonSecurityConfig(restricted_endpoints=["shared-memory", "model-repository", "trace", "logging"])
        with Triton(config=config, security_config=security) as triton:
            triton.bind("Inner", inner, inputs=INPUTS, outputs=OUTPUTS, config=CONFIG)
            triton.bind("Outer", outer, inputs=INPUTS, outputs=OUTPUTS, config=CONFIG)
            triton.bind("LoopRelay", loop_relay, inputs=INPUTS, outputs=TIMINGS, config=CONFIG)
            triton.bind("LoopRaw", loop_raw, inputs=INPUTS, outputs=TIMINGS, config=CONFIG)
            triton.bind("ClientPython", client_python, inputs=INPUTS, outputs=TIMINGS, config=CONFIG)
            triton.run()
            clients = {model: ModelClient(f"http://127.0.0.1:{http_port}", model, inference_timeout_s=60)
                       for model in ("Outer", "OuterBLS")}
            try:
                results = {size: split(clients, http_port, size, args.requests) for size in SIZES}
            finally:
                for client in clients.values():
                    client.close()
            print(split_table(results), bound_table(results), sep="\n\n", flush=True)
            loop_results = loops(http_port, args.rounds)
            print(loop_table(loop_results), flush=True)
            client_results = client_python_table(http_port)
            print(client_results)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = ", ".join(f"{before:.1f} -> {after:.1f}" for before, after in zip(load_before, os.getloadavg()))
    args.output.write_text(f"`make bench-nested-split`, {when}, load average (1, 5, 15 min) {load}\n\n"
                           f"{split_table(results)}\n\n{bound_table(results)}\n\n{loop_table(loop_results)}\n\n"
                           f"{client_results}\n")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()

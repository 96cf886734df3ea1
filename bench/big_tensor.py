#!/usr/bin/env python3
"""What one big request costs in memory: 1 GiB of FP32 in, 1 GiB out, over HTTP and over gRPC.

One pytriton_like server (a process of its own, like a user's: bench/serve_double.py started
through bench/servers.py) serves ``Double`` (y = 2x without ``@batch``, FP32 ``[-1]``,
``max_batch_size`` 1). For each protocol a client process of its own sends one request
of ``--mib`` MiB (2^28 float32 for 1024) with ``ModelClient`` and checks the answer, while this
process samples, every ``--interval-ms``, the memory of every serving process (the user's
process and tritonserver, and any other process of that tree) and of the shared memory they
hold. It prints, per protocol, the idle level before the request, the peak while it ran and the
level ``--after-s`` seconds after it returned, with PASS/FAIL against two targets:

- the peak is at most ``--budget`` × (input + output) above nothing (default 3×: 6 GiB for 1 GiB);
- ``--after-s`` seconds after the request the relay's arenas (the shared memory) are back within
  ``--slack-mib`` of where they were before it (they shrank back); the same is printed for the
  whole of the serving processes.

How memory is counted (the ``total`` column; docs/performance.md):
  total = Σ over the serving processes of (RssAnon + RssFile)       (their private memory)
        + Σ over the distinct shared-memory files they map or hold open (memfd arenas,
          /dev/shm segments), each counted once, of its allocated pages
A shared page is counted once however many processes map it, and an allocated page that no
process has touched yet (posix_fallocate) is counted too. ``sum Pss`` (shared pages split between
the processes that map them; unmapped ones not at all) and ``sum Rss`` (shared pages counted in
every process) are printed beside it. The client's own memory is not in any of them: its peak RSS
is printed apart.

Usage: .venv/bin/python bench/big_tensor.py [--mib 1024] [--protocols http grpc] [--model double|identity]
Writes bench/results/big_tensor.json (with the commit, the machine and its load, and every sample
of the total). Exit code 1 when a request failed or the peak or the arenas missed their target;
whether all serving processes came back to idle is printed too (over gRPC tritonserver keeps its
own buffers unless ``--lean-grpc``: docs/performance.md).
"""

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

import servers

GIB = 1 << 30
MIB = 1 << 20
HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results" / "big_tensor.json"


# -- the client (a process of its own: its buffers are not the server's) -------------------------


def client(args) -> None:
    import numpy as np

    from pytriton_like.client import ModelClient

    count = args.mib * MIB // 4
    x = np.arange(count, dtype=np.float32).reshape(1, count)  # exact in FP32 up to 2^24, then rounded: still exact ×2
    with ModelClient(args.url, "Double", inference_timeout_s=900) as model:
        model.wait_for_model(timeout_s=60)
        print("SENDING", flush=True)
        started = time.perf_counter()
        y = model.infer_batch(x)["y"]
        elapsed = time.perf_counter() - started
        print(f"RETURNED {elapsed:.3f}", flush=True)
    expected = 1 if args.model == "identity" else 2
    ok = y.shape == x.shape and y.dtype == np.float32
    step = 1 << 22
    for start in range(0, count, step):  # in pieces: no second GiB for the check
        ok = ok and bool(np.array_equal(y[0, start : start + step], x[0, start : start + step] * expected))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"RESULT {'ok' if ok else 'wrong'} {peak_kib * 1024}", flush=True)


# -- measuring ------------------------------------------------------------------------------------


def _status(pid: int) -> Dict[str, int]:
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("RssAnon", "RssFile", "RssShmem", "VmRSS"):
                values[key] = int(rest.split()[0]) * 1024
    return values


def reset_peaks(root: int) -> None:
    """Reset the peak RSS (VmHWM) of every process of the tree (``clear_refs`` 5)."""
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as refs:
                refs.write("5")
        except OSError:
            pass


def peak_rss_sum(root: int) -> int:
    """Σ VmHWM over the tree: each process's own peak RSS since reset_peaks, which no sampling can
    miss; an upper bound (the peaks need not coincide; shared pages count in every process)."""
    total = 0
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def _pss(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def _shared_files(pid: int, seen: Dict[tuple, int]) -> None:
    """The shared-memory files ``pid`` maps or holds open, by (device, inode), with their allocated bytes."""
    paths = []
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and ("/memfd:" in fields[5] or fields[5].startswith("/dev/shm/")):
                paths.append(f"/proc/{pid}/map_files/{fields[0]}")
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            target = os.readlink(path)
        except OSError:
            continue
        if target.startswith("/memfd:") or target.startswith("/dev/shm/"):
            paths.append(path)
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        seen[(info.st_dev, info.st_ino)] = info.st_blocks * 512


def _tree(root: int) -> List[int]:
    """``root`` and every process under it."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def measure(root: int) -> Dict[str, int]:
    """One sample of the serving tree under ``root`` (bytes)."""
    private = rss = pss = 0
    files: Dict[tuple, int] = {}
    names = {}
    for pid in _tree(root):
        try:
            status = _status(pid)
            pss += _pss(pid)
            _shared_files(pid, files)
            with open(f"/proc/{pid}/comm") as comm:
                names[pid] = comm.read().strip()
        except OSError:  # gone meanwhile
            continue
        private += status.get("RssAnon", 0) + status.get("RssFile", 0)
        rss += status.get("VmRSS", 0)
        names[pid] = (names[pid], status.get("RssAnon", 0))
    shm = sum(files.values())
    return {"total": private + shm, "private": private, "shm": shm, "pss": pss, "rss": rss,
            "anon_by_process": {f"{name}[{pid}]": anon for pid, (name, anon) in names.items()}}


class Sampler:
    """Samples :func:`measure` every ``interval_s`` in a thread; keeps the peak and the series."""

    def __init__(self, root: int, interval_s: float):
        self.root = root
        self.interval_s = interval_s
        self.samples: List[tuple] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = measure(self.root)
            with self._lock:
                self.samples.append((time.monotonic(), sample))
            self._stop.wait(self.interval_s)

    def after(self, start: float) -> List[tuple]:
        with self._lock:
            return [(at, sample) for at, sample in self.samples if at >= start]

    def between(self, start: float, end: float) -> List[Dict[str, int]]:
        with self._lock:
            return [sample for at, sample in self.samples if start <= at <= end]


def _peak(samples: List[Dict[str, int]], key: str) -> Dict[str, int]:
    return max(samples, key=lambda sample: sample[key]) if samples else {}


def _mib(value: Optional[int]) -> str:
    return "n/a" if value is None else f"{value / MIB:,.0f}"


def run_protocol(protocol: str, url: str, sampler: Sampler, args) -> Dict:
    time.sleep(1.0)
    now = time.monotonic()
    idle = sampler.between(now - 1.0, now)
    idle_total = min(sample["total"] for sample in idle)
    idle_shm = min(sample["shm"] for sample in idle)
    reset_peaks(sampler.root)
    command = [sys.executable, __file__, "--client", "--url", url, "--mib", str(args.mib), "--model", args.model]
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    lines = {}
    for line in proc.stdout:
        word, _, rest = line.strip().partition(" ")
        lines[word] = (time.monotonic(), rest)
    proc.wait()
    returned_at = lines.get("RETURNED", (time.monotonic(), "nan"))[0]
    ok = proc.returncode == 0 and lines.get("RESULT", (0, "wrong"))[1].startswith("ok")
    client_peak = int(lines["RESULT"][1].split()[1]) if "RESULT" in lines else None
    hwm = peak_rss_sum(sampler.root)
    time.sleep(args.after_s + 2 * args.interval_ms / 1000)
    window = sampler.between(lines.get("SENDING", (started, ""))[0], returned_at + 0.2)
    peak = _peak(window, "total")
    after_samples = sampler.between(returned_at + args.after_s - 0.5, returned_at + args.after_s + 0.5)
    after = after_samples[-1] if after_samples else measure(sampler.root)
    # how long after the request returned the serving processes came back within the slack of idle for good
    settled_s = None
    for at, sample in reversed(sampler.after(returned_at)):
        if sample["total"] > idle_total + args.slack_mib * MIB:
            break
        settled_s = at - returned_at
    payload = 2 * args.mib * MIB
    sent_at = lines.get("SENDING", (started, ""))[0]
    timeline = [  # (seconds since the request was sent, total MiB, shm MiB, sum Pss MiB), every sample
        (round(at - sent_at, 3), round(sample["total"] / MIB), round(sample["shm"] / MIB), round(sample["pss"] / MIB))
        for at, sample in sampler.after(started)
    ]
    return {
        "protocol": protocol,
        "ok": ok,
        "seconds": float(lines.get("RETURNED", (0, "nan"))[1]),
        "idle": idle_total,
        "peak": peak.get("total"),
        "peak_private": peak.get("private"),
        "peak_shm": peak.get("shm"),
        "peak_pss": _peak(window, "pss").get("pss"),
        "peak_rss": _peak(window, "rss").get("rss"),
        "peak_anon_by_process": peak.get("anon_by_process"),
        "sum_vmhwm": hwm,
        "after": after["total"],
        "after_shm": after["shm"],
        "after_anon_by_process": after["anon_by_process"],
        "settled_s": settled_s,
        "returned_after_s": round(returned_at - sent_at, 3),
        "timeline": timeline,
        "client_peak_rss": client_peak,
        "budget": int(args.budget * payload),
        "idle_shm": idle_shm,
        "peak_pass": peak.get("total", 1 << 62) <= args.budget * payload,
        "arenas_pass": after["shm"] <= idle_shm + args.slack_mib * MIB,
        "shrink_pass": after["total"] <= idle_total + args.slack_mib * MIB,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=1024, help="input size in MiB (the output is as large); default 1024")
    parser.add_argument("--protocols", nargs="+", default=["http", "grpc"], choices=["http", "grpc"])
    parser.add_argument("--model", default="double", choices=["double", "identity"],
                        help="double: y = 2x (a new array); identity: y = x (the input returned)")
    parser.add_argument("--interval-ms", type=float, default=50.0)
    parser.add_argument("--after-s", type=float, default=5.0, help="when to take the level after the request")
    parser.add_argument("--budget", type=float, default=3.0, help="peak allowed, times input + output")
    parser.add_argument("--slack-mib", type=float, default=64.0, help="how far above idle 'shrunk back' may be")
    parser.add_argument("--lean-grpc", action="store_true",
                        help="tritonserver keeps no gRPC request/response objects for reuse"
                        " (grpc_infer_allocation_pool_size=0) and one malloc arena (MALLOC_ARENA_MAX=1)")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args)
        return 0

    # tritonserver inherits MALLOC_ARENA_MAX; TritonConfig reads its field from PYTRITON_TRITON_CONFIG_*.
    env = {"MALLOC_ARENA_MAX": "1", "PYTRITON_TRITON_CONFIG_GRPC_INFER_ALLOCATION_POOL_SIZE": "0"} if args.lean_grpc else {}
    workdir = tempfile.TemporaryDirectory(prefix="bench-big-")
    try:
        server = servers.start_python_server(
            "pytriton_like", "pytriton_like", pathlib.Path(workdir.name), instances=1, max_batch_size=1,
            options=[f"--callable={'identity' if args.model == 'identity' else 'plain'}"], env=env,
        )
    except servers.ServerError as exc:
        print(f"the server did not start: {exc}", file=sys.stderr)
        workdir.cleanup()
        return 1
    http, grpc = server.http_port, server.grpc_port
    rows = []
    try:
        urls = {"http": f"http://127.0.0.1:{http}", "grpc": f"grpc://127.0.0.1:{grpc}"}
        with Sampler(server.tree.pid, args.interval_ms / 1000) as sampler:
            for protocol in args.protocols:
                row = run_protocol(protocol, urls[protocol], sampler, args)
                rows.append(row)
                print(
                    f"{protocol:4}: {'ok' if row['ok'] else 'WRONG ANSWER'} in {row['seconds']:.1f} s;"
                    f" serving processes idle {_mib(row['idle'])} MiB, peak {_mib(row['peak'])} MiB"
                    f" (private {_mib(row['peak_private'])} + shm {_mib(row['peak_shm'])};"
                    f" sum Pss {_mib(row['peak_pss'])}, sum Rss {_mib(row['peak_rss'])},"
                    f" sum of each process's peak RSS {_mib(row['sum_vmhwm'])}),"
                    f" {args.after_s:g} s after {_mib(row['after'])} MiB (shm {_mib(row['after_shm'])});"
                    f" client peak RSS {_mib(row['client_peak_rss'])} MiB",
                    flush=True,
                )
                print("      peak by process (anonymous memory, MiB): "
                      + ", ".join(f"{name} {_mib(value)}" for name, value in (row["peak_anon_by_process"] or {}).items()))
                print("      after by process: "
                      + ", ".join(f"{name} {_mib(value)}" for name, value in row["after_anon_by_process"].items()))
                verdict = {True: "PASS", False: "FAIL"}
                print(
                    f"      peak <= {args.budget:g} x (in + out) = {_mib(row['budget'])} MiB:"
                    f" {verdict[row['peak_pass']]}; {args.after_s:g} s after, the arenas (shm) within"
                    f" {args.slack_mib:g} MiB of idle: {verdict[row['arenas_pass']]};"
                    f" all serving processes within {args.slack_mib:g} MiB of idle: {verdict[row['shrink_pass']]}"
                    + (f" (settled {row['settled_s']:.2f} s after)" if row["settled_s"] is not None else ""),
                    flush=True,
                )
    finally:
        server.stop(grace_s=60)
        workdir.cleanup()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE,
                            check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "pytriton_like", "native"], capture_output=True,
                           text=True, cwd=HERE, check=False).stdout.strip()
    document = {
        "mib": args.mib, "model": args.model, "lean_grpc": args.lean_grpc, "interval_ms": args.interval_ms,
        "after_s": args.after_s, "slack_mib": args.slack_mib, "budget": args.budget,
        "rows": rows, "commit": commit + ("+dirty" if dirty else ""), "cpus": os.cpu_count(),
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"written {out}")
    ok = rows and all(row["ok"] and row["peak_pass"] and row["arenas_pass"] for row in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The measurements: sequential latency, wrk throughput, large tensors, peak memory, perf_analyzer,
and the CPU each process of a server spends (:class:`CpuMeter`, the one way every script measures it).

Every loop is bounded in count and in time; all traffic goes to 127.0.0.1.
"""

import contextlib
import csv
import http.client
import json
import os
import pathlib
import re
import resource
import statistics
import subprocess
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import grpc
import numpy as np
import psutil
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2

__all__ = [
    "check_answers",
    "sequential_latency",
    "wrk_throughput",
    "large_tensor_throughput",
    "MemorySampler",
    "peak_memory",
    "perf_analyzer",
    "model_stats",
    "CpuMeter",
    "process_label",
]

HERE = pathlib.Path(__file__).resolve().parent
HOST = "127.0.0.1"
MODEL = "Double"
TINY = np.arange(1, 9, dtype=np.float32).reshape(1, 8)
MB = 1e6  # throughput is reported in MB/s of payload, 1 MB = 10^6 bytes
_MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
_GRPC_OPTIONS = [("grpc.max_send_message_length", 2**31 - 1), ("grpc.max_receive_message_length", 2**31 - 1)]


class BenchError(RuntimeError):
    """A server answered wrongly or a tool failed."""


def _http_client(port: int) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(f"{HOST}:{port}", connection_timeout=30, network_timeout=120)


def _grpc_client(port: int) -> grpcclient.InferenceServerClient:
    return grpcclient.InferenceServerClient(f"{HOST}:{port}")


def _infer_http(client, x: np.ndarray) -> np.ndarray:
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    out = httpclient.InferRequestedOutput("y", binary_data=True)
    return client.infer(MODEL, [inp], outputs=[out]).as_numpy("y")


def _infer_grpc(client, x: np.ndarray) -> np.ndarray:
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    out = grpcclient.InferRequestedOutput("y")
    return client.infer(MODEL, [inp], outputs=[out], client_timeout=300).as_numpy("y")


def _check(y: Optional[np.ndarray], x: np.ndarray, what: str) -> None:
    if y is None or y.dtype != np.float32 or y.shape != x.shape or not np.array_equal(y, x * np.float32(2)):
        got = "nothing" if y is None else f"{y.dtype} {y.shape} {y.ravel()[:4]}"
        raise BenchError(f"{what}: wrong answer: expected 2x with shape {x.shape}, got {got}")


def check_answers(http_port: int, grpc_port: int) -> None:
    """One right answer over HTTP (binary and JSON) and gRPC before anything is timed."""
    with contextlib.closing(_http_client(http_port)) as client:
        _check(_infer_http(client, TINY), TINY, "HTTP")
    body = json.dumps(_json_body()).encode()
    conn = http.client.HTTPConnection(HOST, http_port, timeout=30)
    try:
        conn.request("POST", f"/v2/models/{MODEL}/infer", body, {"Content-Type": "application/json"})
        reply = conn.getresponse()
        payload = reply.read()
    finally:
        conn.close()
    if reply.status != 200:
        raise BenchError(f"HTTP JSON infer: status {reply.status}: {payload[:300]!r}")
    outputs = {o["name"]: o for o in json.loads(payload)["outputs"]}
    _check(np.asarray(outputs["y"]["data"], dtype=np.float32).reshape(outputs["y"]["shape"]), TINY, "HTTP JSON")
    with contextlib.closing(_grpc_client(grpc_port)) as client:
        _check(_infer_grpc(client, TINY), TINY, "gRPC")


def _json_body() -> Dict:
    return {"inputs": [{"name": "x", "shape": list(TINY.shape), "datatype": "FP32", "data": TINY.ravel().tolist()}]}


def sequential_latency(protocol: str, port: int, *, requests: int, warmup: int, time_limit_s: float) -> Dict:
    """One client, one tiny request at a time; latency per request in milliseconds."""
    make, infer = (_http_client, _infer_http) if protocol == "http" else (_grpc_client, _infer_grpc)
    with contextlib.closing(make(port)) as client:
        for _ in range(warmup):
            infer(client, TINY)
        samples: List[float] = []
        deadline = time.monotonic() + time_limit_s
        while len(samples) < requests and time.monotonic() < deadline:
            start = time.perf_counter()
            infer(client, TINY)
            samples.append((time.perf_counter() - start) * 1e3)
    samples.sort()
    return {
        "requests": len(samples),
        "median_ms": statistics.median(samples),
        "p99_ms": samples[min(len(samples) - 1, int(round(0.99 * (len(samples) - 1))))],
        "mean_ms": statistics.fmean(samples),
    }


def wrk_throughput(
    port: int, *, connections: int, duration_s: float, threads: int = 2, path: str = f"/v2/models/{MODEL}/infer",
    body: Optional[bytes] = None,
) -> Dict:
    """Requests per second from ``wrk`` POSTing ``body`` (default: the KServe v2 JSON infer body of
    ``Double``) to ``path`` over ``connections`` kept-alive connections; latency p50 and p99."""
    body_text = json.dumps(_json_body()) if body is None else body.decode()
    env = dict(os.environ, BENCH_BODY=body_text)
    argv = [
        "wrk",
        f"--threads={min(threads, connections)}",
        f"--connections={connections}",
        f"--duration={duration_s:g}s",
        "--timeout=10s",
        f"--script={HERE / 'wrk_infer.lua'}",
        f"http://{HOST}:{port}{path}",
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=duration_s + 60)
    match = re.search(r"^BENCH_WRK (\{.*\})$", done.stdout, re.M)
    if done.returncode != 0 or not match:
        raise BenchError(f"wrk failed (exit {done.returncode}): {done.stdout[-500:]} {done.stderr[-500:]}")
    stats = json.loads(match.group(1))
    if stats["non_2xx_3xx"]:
        raise BenchError(f"wrk with {connections} connections: {stats['non_2xx_3xx']} non-2xx/3xx responses")
    errors = sum(stats[k] for k in ("connect_errors", "read_errors", "write_errors", "timeouts"))
    return {
        "connections": connections,
        "req_per_s": stats["requests"] / (stats["duration_us"] / 1e6),
        "requests": stats["requests"],
        "socket_errors": errors,
        "latency_p50_ms": stats["latency_p50_us"] / 1e3,
        "latency_p99_ms": stats["latency_p99_us"] / 1e3,
    }


def large_input(nbytes: int) -> np.ndarray:
    return np.arange(nbytes // 4, dtype=np.float32).reshape(1, -1)


def _raw_request(x: np.ndarray) -> bytes:
    request = service_pb2.ModelInferRequest(model_name=MODEL)
    tensor = request.inputs.add(name="x", datatype="FP32")
    tensor.shape.extend(x.shape)
    request.outputs.add(name="y")
    request.raw_input_contents.append(x.tobytes())
    return request.SerializeToString()


def large_tensor_throughput(port: int, x: np.ndarray, *, requests: int, time_limit_s: float) -> Dict:
    """gRPC (binary) round trips of ``x``; MB/s of payload, input plus output.

    The request is serialized once and sent as bytes, the reply is taken as bytes: with
    tritonclient, protobuf serialization alone costs ~3 s per 256 MiB request on this machine,
    the same for every server, which would hide the servers' differences.
    """
    payload = _raw_request(x)
    with grpc.insecure_channel(f"{HOST}:{port}", options=_GRPC_OPTIONS) as channel:
        infer = channel.unary_unary(_MODEL_INFER, request_serializer=None, response_deserializer=None)
        reply = service_pb2.ModelInferResponse.FromString(infer(payload, timeout=300))  # warm-up, checked
        y = np.frombuffer(reply.raw_output_contents[0], dtype=np.float32).reshape(tuple(reply.outputs[0].shape))
        _check(y, x, f"gRPC {x.nbytes >> 20} MiB")
        del reply, y
        times = []
        deadline = time.monotonic() + time_limit_s
        while len(times) < requests and time.monotonic() < deadline:
            start = time.perf_counter()
            answer = infer(payload, timeout=300)
            times.append(time.perf_counter() - start)
            if len(answer) < x.nbytes:
                raise BenchError(f"gRPC {x.nbytes >> 20} MiB: reply of {len(answer)} bytes is too short")
            del answer
    total = sum(times)
    return {
        "tensor_mib": x.nbytes / 2**20,
        "requests": len(times),
        "mb_per_s": 2 * x.nbytes * len(times) / total / MB,
        "median_s": statistics.median(times),
    }


def _pss(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


class MemorySampler:
    """Samples RSS (and PSS) summed over a process tree every ``interval_s`` in a thread."""

    def __init__(self, processes: Callable[[], List[psutil.Process]], interval_s: float = 0.02):
        self._processes = processes
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self.peak_rss = 0
        self.peak_pss = 0
        self.samples = 0

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        procs = self._processes()
        refreshed = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - refreshed > 0.5:  # the tree rarely changes; look again now and then
                procs, refreshed = self._processes(), time.monotonic()
            rss = pss = 0
            for proc in procs:
                with contextlib.suppress(psutil.Error, OSError):
                    rss += proc.memory_info().rss
                    pss += _pss(proc.pid)
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_pss = max(self.peak_pss, pss)
            self.samples += 1
            self._stop.wait(self._interval_s)


def peak_memory(port: int, processes: Callable[[], List[psutil.Process]], x: np.ndarray) -> Dict:
    """Idle RSS of the server's tree, then its peak while one request with ``x`` is in flight."""
    with MemorySampler(processes) as idle:
        time.sleep(0.3)
    with contextlib.closing(_grpc_client(port)) as client:
        with MemorySampler(processes) as busy:
            y = _infer_grpc(client, x)
    _check(y, x, f"gRPC {x.nbytes >> 20} MiB")
    return {
        "tensor_mib": x.nbytes / 2**20,
        "idle_rss_mib": idle.peak_rss / 2**20,
        "peak_rss_mib": busy.peak_rss / 2**20,
        "peak_pss_mib": busy.peak_pss / 2**20,
        "samples": busy.samples,
    }


# -- perf_analyzer ----------------------------------------------------------------------------------

# Where `make bench` puts perf_analyzer (from the tritonclient 2.40.0 wheel, the last that ships
# it) and a libcudart.so.12 for it (a link to the one in nvidia-pytriton's libraries).
PERF_ANALYZER_DIR = pathlib.Path(__file__).resolve().parent.parent / ".venv" / "perf_analyzer"


def perf_analyzer(protocol: str, port: int, *, concurrency: int, interval_ms: int = 2000, trials: int = 10,
                  model: str = MODEL, shape: str = "x:8") -> Dict:
    """Triton's own load generator against ``model`` (``Double``): ``concurrency`` requests of a batch
    of one FP32 sample of ``shape`` (input name and sizes, "x:8") kept in flight over ``protocol``
    ("http" or "grpc") until three windows of ``interval_ms`` agree within 50% on the p50 latency
    (at most ``trials`` windows; on a busy machine they may never agree: then the last window's
    numbers are taken and ``stable`` is False). Returns req/s, latency percentiles in ms and the CPU
    seconds perf_analyzer itself spent (``cpu_s``: the load generator's share of the machine)."""
    binary = PERF_ANALYZER_DIR / "perf_analyzer"
    if not binary.exists():
        raise FileNotFoundError(f"{binary} is missing: `make bench` installs it")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(PERF_ANALYZER_DIR / "lib"), env.get("LD_LIBRARY_PATH")]))
    with tempfile.TemporaryDirectory(prefix="perf-analyzer-") as tmp:
        csv_path = os.path.join(tmp, "result.csv")
        argv = [
            str(binary), "-m", model, "-x", "1", "-u", f"127.0.0.1:{port}", "-i", protocol, "--shape", shape,
            f"--concurrency-range={concurrency}", f"--measurement-interval={interval_ms}",
            f"--max-trials={trials}", "--stability-percentage=50", "--percentile=50", "-v", "-f", csv_path,
        ]
        children_before = _children_cpu_s()
        try:
            completed = subprocess.run(argv, env=env, capture_output=True, text=True,
                                       timeout=30 + trials * interval_ms / 1000 * 3)
            returncode, output = completed.returncode, completed.stdout + completed.stderr
        except subprocess.TimeoutExpired as exc:
            # Seen at HTTP c32 against every server, the native floor included: a few of
            # perf_analyzer's connections stop moving and it never ends its window. The passes it
            # finished are still measurements (the output is bytes here, whatever `text` says).
            returncode = "a timeout"
            output = b"".join(part or b"" for part in (exc.stdout, exc.stderr)).decode("utf-8", "replace")
        cpu_s = _children_cpu_s() - children_before
        stable = returncode == 0 and os.path.exists(csv_path)
        if stable:
            with open(csv_path, encoding="utf-8") as file:
                row = list(csv.DictReader(file))[0]
            numbers = {"req_per_s": float(row["Inferences/Second"]), "p50_ms": float(row["p50 latency"]) / 1000,
                       "p90_ms": float(row["p90 latency"]) / 1000, "p99_ms": float(row["p99 latency"]) / 1000}
        else:
            passes = re.findall(r"Pass \[\d+\] throughput: ([\d.]+) infer/sec\. p50 latency: (\d+) usec", output)
            if not passes:
                tail = "\n".join(output.splitlines()[-5:])
                raise RuntimeError(f"perf_analyzer ended with {returncode}: {tail}")
            numbers = {"req_per_s": float(passes[-1][0]), "p50_ms": int(passes[-1][1]) / 1000}
    return {"concurrency": concurrency, **numbers, "command": " ".join(argv[:-2]), "stable": stable,
            "cpu_s": round(cpu_s, 4)}


def _children_cpu_s() -> float:
    """CPU seconds (user and system) of this process's children that ended and were waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def model_stats(http_port: int, model: str = MODEL) -> Dict[str, int]:
    """Triton's counts for ``model`` so far: requests, batches (executions), the time in the
    model (compute_infer: for pytriton_like the round trip to the worker) and the requests' time in
    Triton's core (success: queued, run, answered); {} if unreadable."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{HOST}:{http_port}/v2/models/{model}/stats", timeout=10) as response:
            stats = json.load(response)["model_stats"][0]
    except (OSError, KeyError, IndexError, ValueError):
        return {}
    infer, success = stats["inference_stats"]["compute_infer"], stats["inference_stats"]["success"]
    return {"requests": int(stats["inference_count"]), "batches": int(stats["execution_count"]),
            "infer_ns": int(infer["ns"]), "infer_count": int(infer["count"]),
            "success_ns": int(success["ns"]), "success_count": int(success["count"])}


# -- CPU per process --------------------------------------------------------------------------------


def process_label(proc: psutil.Process) -> str:
    """What a process is, for tables: its executable (tritonserver, the Python-backend stub), its
    script or ``-m`` module, Ray's process title, or multiprocessing's child."""
    try:
        name, cmd = proc.name(), proc.cmdline()
    except psutil.Error:
        return "?"
    if name in ("tritonserver", "triton_python_backend_stub", "raylet", "gcs_server"):
        return name
    if cmd and cmd[0].startswith("ray::"):
        return cmd[0].split()[0]
    for index, arg in enumerate(cmd):
        if arg == "-m" and index + 1 < len(cmd):
            return cmd[index + 1]
        if arg.endswith(".py"):
            return os.path.basename(arg)
    command = " ".join(cmd)
    if "multiprocessing.resource_tracker" in command:
        return "multiprocessing's resource tracker"
    if "multiprocessing" in command:
        return "python (a multiprocessing child)"
    return name


def _context_switches(pid: int) -> int:
    """Voluntary and involuntary context switches of all the process's threads so far (0 once gone)."""
    total = 0
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/status") as status:
                for line in status:
                    if "ctxt_switches:" in line:  # voluntary_ and nonvoluntary_
                        total += int(line.split()[1])
    return total


def _threads(proc: psutil.Process) -> Dict[Tuple[int, str], float]:
    """{(thread id, name): CPU seconds} of one process."""
    found = {}
    with contextlib.suppress(psutil.Error):
        for thread in proc.threads():
            with contextlib.suppress(OSError), open(f"/proc/{proc.pid}/task/{thread.id}/comm") as comm:
                found[(thread.id, comm.read().strip())] = thread.user_time + thread.system_time
    return found


class CpuMeter:
    """CPU time and context switches each process spent inside a ``with`` block, summed by label.

    ``processes`` returns the processes to count (a server's ``tree.refresh``, perhaps with this
    process added); it is called on entry and on exit, and a process that appeared meanwhile counts
    from zero. After the block, :attr:`by_label` holds per label ``cpu_s`` (user + system),
    ``system_s`` (the part in the kernel), ``switches`` and ``processes`` (how many); with
    ``threads_of`` (labels), :attr:`threads` holds CPU seconds per thread name of those processes.

    Example:
        with CpuMeter(server.tree.refresh) as cpu:
            ...load...
        cpu.per(requests)  # {label: microseconds of CPU per request}
    """

    def __init__(self, processes: Callable[[], List[psutil.Process]], threads_of: Sequence[str] = ()):
        self._processes = processes
        self._threads_of = set(threads_of)
        self._before: Dict[Tuple[int, float], Tuple[float, float, int, Dict]] = {}
        self.by_label: Dict[str, Dict[str, float]] = {}
        self.threads: Dict[str, Dict[str, float]] = {}
        self.seconds = 0.0

    def _sample(self) -> Dict[Tuple[int, float], Tuple[str, float, float, int, Dict]]:
        out = {}
        for proc in self._processes():
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                label = process_label(proc)
                threads = _threads(proc) if label in self._threads_of else {}
                out[(proc.pid, proc.create_time())] = (label, times.user + times.system, times.system,
                                                       _context_switches(proc.pid), threads)
        return out

    def __enter__(self) -> "CpuMeter":
        self._before = {key: value[1:] for key, value in self._sample().items()}
        self._started = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.monotonic() - self._started
        for key, (label, cpu, system, switches, threads) in self._sample().items():
            cpu_then, system_then, switches_then, threads_then = self._before.get(key, (0.0, 0.0, 0, {}))
            row = self.by_label.setdefault(label, {"cpu_s": 0.0, "system_s": 0.0, "switches": 0, "processes": 0})
            row["cpu_s"] += cpu - cpu_then
            row["system_s"] += system - system_then
            row["switches"] += switches - switches_then
            row["processes"] += 1
            for (tid, name), spent in threads.items():
                used = spent - threads_then.get((tid, name), 0.0)
                per_thread = self.threads.setdefault(label, {})
                per_thread[name] = per_thread.get(name, 0.0) + used

    def per(self, count: float, key: str = "cpu_s", scale: float = 1e6) -> Dict[str, float]:
        """Each label's ``key`` divided by ``count`` (requests, pieces), times ``scale`` (µs)."""
        return {label: round(row[key] / count * scale, 1) for label, row in self.by_label.items()} if count else {}

    def share(self) -> Dict[str, float]:
        """Each label's CPU as a share of one core over the block's wall time."""
        return {label: round(row["cpu_s"] / self.seconds, 2) for label, row in self.by_label.items()}

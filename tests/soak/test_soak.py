"""Soak: 32 concurrent clients (HTTP and gRPC, good and bad requests) on loopback: 30 s of
warm-up, then 60 s measured.

Run with `make soak` (not part of `make test`). Every good request must be answered correctly,
every bad one rejected, and the serving process's memory must end within 10% of its value
after warm-up. The numbers go to tests/soak/results/latest.json.
"""

import json
import os
import pathlib
import random
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.functional.conftest import free_ports, leftovers, server_processes, shm_segments

pytestmark = pytest.mark.soak

DURATION_S = float(os.environ.get("SOAK_DURATION_S", "60"))
# Warm-up, before the measured minute: the serving process's memory climbs to a plateau over the
# first ~20-30 s (allocator high-water marks for 1.2 MB tensors, arena pages touched).
WARMUP_S = float(os.environ.get("SOAK_WARMUP_S", "30"))
CLIENTS = 32
LARGEST = 300_000  # floats: 1.2 MB, through shared memory
HERE = pathlib.Path(__file__).resolve().parent


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {"good_ok": 0, "good_wrong": 0, "good_failed": 0, "bad_rejected": 0, "bad_accepted": 0}
        self.failures = []

    def add(self, key, detail=None):
        with self.lock:
            self.counts[key] += 1
            if detail and len(self.failures) < 20:
                self.failures.append(detail)


def bad_request(module, rng):
    """A request the server must refuse, and why."""
    kind = rng.choice(["dtype", "shape", "model", "callable"])
    if kind == "dtype":
        tensor = module.InferInput("x", [1, 4], "INT32")
        tensor.set_data_from_numpy(np.ones((1, 4), np.int32))
        return "Double", tensor
    if kind == "shape":
        tensor = module.InferInput("x", [1, 2, 2], "FP32")
        tensor.set_data_from_numpy(np.ones((1, 2, 2), np.float32))
        return "Double", tensor
    tensor = module.InferInput("x", [1, 4], "FP32")
    tensor.set_data_from_numpy(-np.ones((1, 4), np.float32))
    return ("NoSuchModel" if kind == "model" else "Picky"), tensor


def client_loop(protocol, ports, deadline, tally, seed):
    rng = random.Random(seed)
    module = httpclient if protocol == "http" else grpcclient
    url = f"127.0.0.1:{ports[0] if protocol == 'http' else ports[1]}"
    client = module.InferenceServerClient(url)
    try:
        while time.monotonic() < deadline:
            if rng.random() < 0.2:
                model, tensor = bad_request(module, rng)
                try:
                    client.infer(model, [tensor])
                    tally.add("bad_accepted", f"{protocol} {model} accepted a bad request")
                except InferenceServerException:
                    tally.add("bad_rejected")
                continue
            # Mostly small; now and then past the 64 KiB shared-memory threshold.
            size = rng.choice([1, 7, 64, 1000, 40_000]) if rng.random() < 0.95 else LARGEST
            x = np.random.default_rng(rng.randrange(1 << 30)).random((1, size), dtype=np.float32)
            tensor = module.InferInput("x", [1, size], "FP32")
            tensor.set_data_from_numpy(x)
            model = rng.choice(["Double", "Picky"])
            try:
                y = client.infer(model, [tensor]).as_numpy("y")
            except InferenceServerException as error:
                tally.add("good_failed", f"{protocol} {model}: {error}")
                continue
            if np.array_equal(y, x * 2):
                tally.add("good_ok")
            else:
                tally.add("good_wrong", f"{protocol} {model}: wrong answer for size {size}")
    finally:
        client.close()


def rss_of(process: psutil.Process) -> int:
    return process.memory_info().rss


def prime_arenas(ports):
    """Send the largest tensors to every model over both protocols, so that every relay arena has
    grown to its final size before the warm-up value is taken (arenas grow by doubling)."""
    x = np.ones((1, LARGEST), np.float32)
    for module, port in ((httpclient, ports[0]), (grpcclient, ports[1])):
        client = module.InferenceServerClient(f"127.0.0.1:{port}")
        for model in ("Double", "Picky"):
            for _ in range(10):  # Triton spreads them over the instances
                tensor = module.InferInput("x", [1, LARGEST], "FP32")
                tensor.set_data_from_numpy(x)
                client.infer(model, [tensor])
        client.close()


def test_soak():
    ports = free_ports(3)
    processes_before, segments_before = server_processes(), shm_segments()
    # glibc raises its mmap threshold after freeing large blocks, so a server handling 1.2 MB
    # tensors grows its heap to a plateau over a few minutes (measured: +12-21 % in 60 s, and
    # tracemalloc saw no Python-level growth). A fixed threshold makes RSS measure leaks, not
    # the allocator's high-water mark.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=os.environ.get("MALLOC_MMAP_THRESHOLD_", "131072"))
    server = subprocess.Popen(
        [sys.executable, str(HERE / "soak_server.py"), *map(str, ports)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=HERE.parents[1],
        env=env,
    )
    try:
        assert server.stdout.readline().strip() == "READY"
        user_process = psutil.Process(server.pid)
        prime_arenas(ports)
        tally = Tally()
        started = time.monotonic()
        deadline = started + WARMUP_S + DURATION_S
        threads = [
            threading.Thread(target=client_loop, args=("http" if i % 2 else "grpc", ports, deadline, tally, i))
            for i in range(CLIENTS)
        ]
        for thread in threads:
            thread.start()
        time.sleep(WARMUP_S)
        rss_after_warmup = rss_of(user_process)
        samples = []
        while any(thread.is_alive() for thread in threads):
            samples.append(rss_of(user_process))
            time.sleep(1)
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        rss_at_end = rss_of(user_process)
    finally:
        server.stdin.close()
        server.wait(120)
        server.stdout.close()
    result = {
        "duration_s": round(elapsed, 1),
        "warmup_s": WARMUP_S,
        "clients": CLIENTS,
        "counts": tally.counts,
        "requests_per_s": round(sum(tally.counts.values()) / elapsed, 1),
        "rss_after_warmup_mib": round(rss_after_warmup / 2**20, 1),
        "rss_peak_mib": round(max(samples, default=rss_at_end) / 2**20, 1),
        "rss_at_end_mib": round(rss_at_end / 2**20, 1),
        "rss_growth": round(rss_at_end / rss_after_warmup - 1, 4),
        "rss_every_5_s_mib": [round(sample / 2**20, 1) for sample in samples[::5]],
        "failures": tally.failures,
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "latest.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    assert server.returncode == 0
    assert tally.counts["good_ok"] > 0 and tally.counts["bad_rejected"] > 0
    assert tally.counts["good_wrong"] == 0 and tally.counts["good_failed"] == 0, tally.failures
    assert tally.counts["bad_accepted"] == 0, tally.failures
    assert rss_at_end <= 1.10 * rss_after_warmup, result
    assert leftovers(processes_before, segments_before, ports) == {}

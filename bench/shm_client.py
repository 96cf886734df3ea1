#!/usr/bin/env python3
"""Client tensors through registered system shared memory against the socket, side by side in one run.

One server (bench/serve_double.py through bench/servers.py: model Double, y = 2x without @batch,
FP32 [-1], max_batch_size 1); for 16 MiB and 256 MiB tensors (in and out), over
HTTP and gRPC, a ModelClient with use_shared_memory=True and one without take turns, request by
request, after warm-up calls. Prints the median time of a request per way and the ratio (how
many times faster shared memory is); writes bench/results/shm_client.json.

Usage: .venv/bin/python bench/shm_client.py [--requests N]        (docs/performance.md)
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

import numpy as np

import servers
from pytriton_like.client import ModelClient

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "shm_client.json"
SIZES_MIB = (16, 256)
WARM_UP = 2


def timed(client: ModelClient, x: np.ndarray) -> float:
    start = time.perf_counter()
    y = client.infer_batch(x)["y"]
    elapsed = time.perf_counter() - start
    assert y.shape == x.shape and y[0, -1] == x[0, -1] * 2
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=6, help="timed requests per way and size (default 6)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES_MIB), help="MiB in and out (default 16 256)")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-shm-") as workdir, servers.start_python_server(
        "pytriton_like", "pytriton_like", pathlib.Path(workdir), instances=1, max_batch_size=1, options=["--callable=plain"]
    ) as server:
        urls = {"http": f"http://127.0.0.1:{server.http_port}", "grpc": f"grpc://127.0.0.1:{server.grpc_port}"}
        for protocol, url in urls.items():
            for mib in args.sizes:
                x = np.random.default_rng(0).random((1, mib << 18), dtype=np.float32)
                with ModelClient(url, "Double", inference_timeout_s=300) as plain, ModelClient(
                    url, "Double", inference_timeout_s=300, use_shared_memory=True
                ) as shared:
                    for _ in range(WARM_UP):  # connections, regions, the relay's arenas
                        timed(plain, x)
                        timed(shared, x)
                    times = {"socket": [], "shared memory": []}
                    for _ in range(args.requests):  # alternating: a slow moment hits both ways
                        times["socket"].append(timed(plain, x))
                        times["shared memory"].append(timed(shared, x))
                medians = {way: statistics.median(values) * 1000 for way, values in times.items()}
                row = {
                    "protocol": protocol,
                    "mib": mib,
                    "socket_ms": round(medians["socket"], 1),
                    "shm_ms": round(medians["shared memory"], 1),
                    "speedup": round(medians["socket"] / medians["shared memory"], 2),
                }
                rows.append(row)
                print(
                    f"{protocol:4} {mib:3} MiB in and out: socket {row['socket_ms']:8.1f} ms, "
                    f"shared memory {row['shm_ms']:8.1f} ms, {row['speedup']:.2f}x faster",
                    flush=True,
                )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=RESULTS.parent, check=False
    ).stdout.strip()
    document = {
        "requests": args.requests,
        "rows": rows,
        "commit": commit,
        "cpus": os.cpu_count(),
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()

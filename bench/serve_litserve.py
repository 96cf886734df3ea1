#!/usr/bin/env python3
"""Serve bench/peers.py's workloads with LitServe (run in .venv-peers, `make bench-peers`).

- ``tiny``: ``POST /predict`` ``{"x": [16 floats]}`` -> ``{"y": 2x}``, numpy in between;
- ``busy``: the same after ``busy_work.busy_double``'s ~0.6 ms of pure Python per request, in
  ``--workers`` inference processes (``workers_per_device`` on one CPU device);
- ``stream``: ``/v1/chat/completions`` through ``ls.OpenAISpec()``, ``--pieces`` pieces of text
  (`` t0``, `` t1``...) after ``--piece-ms`` each, from a plain generator or, with
  ``--callable async``, an async generator (``enable_async=True``).

No batching (``max_batch_size=1``, LitServe's default): its batcher waits ``batch_timeout`` for a
batch to fill. LitServe says itself when it is ready (``GET /health``); stopped by SIGINT.
"""

import argparse
import asyncio
import pathlib
import sys
import time

import litserve as ls
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from busy_work import busy_double  # noqa: E402


class Double(ls.LitAPI):
    def setup(self, device):
        pass

    def decode_request(self, request):
        return np.asarray(request["x"], dtype=np.float32)

    def predict(self, x):
        return x * np.float32(2)

    def encode_response(self, output):
        return {"y": output.tolist()}


class BusyDouble(Double):
    def predict(self, x):
        return busy_double(x.reshape(1, -1)).reshape(-1)


class Chat(ls.LitAPI):
    def __init__(self, pieces: int, piece_ms: float, **kwargs):
        super().__init__(spec=ls.OpenAISpec(), **kwargs)
        self.pieces, self.delay = pieces, piece_ms / 1000

    def setup(self, device):
        pass

    def predict(self, request):
        for index in range(self.pieces):
            if self.delay:
                time.sleep(self.delay)
            yield f" t{index}"


class AsyncChat(Chat):
    def __init__(self, pieces: int, piece_ms: float):
        super().__init__(pieces, piece_ms, enable_async=True)

    async def decode_request(self, request):
        return request

    async def predict(self, request):
        for index in range(self.pieces):
            await asyncio.sleep(self.delay)
            yield f" t{index}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--workload", choices=("tiny", "busy", "stream"), required=True)
    parser.add_argument("--workers", type=int, default=1, help="inference processes (workers_per_device)")
    parser.add_argument("--callable", choices=("sync", "async"), default="sync")
    parser.add_argument("--pieces", type=int, default=64)
    parser.add_argument("--piece-ms", type=float, default=0.0)
    args = parser.parse_args()
    if args.workload == "stream":
        api = (AsyncChat if args.callable == "async" else Chat)(args.pieces, args.piece_ms)
    else:
        api = Double() if args.workload == "tiny" else BusyDouble()
    server = ls.LitServer(api, accelerator="cpu", devices=1, workers_per_device=args.workers)
    server.run(host="127.0.0.1", port=args.http_port, log_level="warning", generate_client_file=False)


if __name__ == "__main__":
    main()

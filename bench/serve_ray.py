#!/usr/bin/env python3
"""Serve bench/peers.py's workloads with Ray Serve (run in .venv-peers, `make bench-peers`).

- ``tiny``: ``POST /`` ``{"x": [16 floats]}`` -> ``{"y": 2x}``, numpy in between;
- ``busy``: the same after ``busy_work.busy_double``'s ~0.6 ms of pure Python per request, in
  ``--workers`` replicas (``num_replicas``);
- ``stream``: ``POST /v1/chat/completions`` answered with OpenAI-style server-sent events
  (``chat.completion.chunk`` objects, then ``data: [DONE]``): ``--pieces`` pieces of text
  (`` t0``, `` t1``...) after ``--piece-ms`` each, from a plain generator or, with
  ``--callable async``, an async generator, in a Starlette ``StreamingResponse``. Ray Serve has
  no OpenAI front end for a plain Python callable (``ray.serve.llm`` wraps vLLM), so the events
  are written here, as a user would.

A local Ray cluster (``ray.init``) on this machine's CPUs, no dashboard, its files under
``--temp-dir``; Serve's HTTP proxy on 127.0.0.1. Each replica takes up to 16 requests at a time
(``max_ongoing_requests``, 5 by default: the most the bench keeps in flight, so that no request
waits for a slot in Ray's router). No ``@serve.batch``: it waits for a batch to fill.

Prints ``BENCH_START``/``BENCH_READY <unix time>`` (ready once ``serve.run`` returned); serves until
SIGINT or SIGTERM, then shuts Serve and Ray down.
"""

import argparse
import asyncio
import json
import os
import pathlib
import signal
import sys
import time

# No usage report leaves this machine (Ray sends one by default when a cluster starts).
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np  # noqa: E402
import ray  # noqa: E402
from ray import serve  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import StreamingResponse  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from busy_work import busy_double  # noqa: E402

MAX_ONGOING_REQUESTS = 16


class Double:
    async def __call__(self, request: Request):
        x = np.asarray((await request.json())["x"], dtype=np.float32)
        return {"y": self.compute(x).tolist()}

    def compute(self, x):
        return x * np.float32(2)


class BusyDouble(Double):
    def compute(self, x):
        return busy_double(x.reshape(1, -1)).reshape(-1)


def _event(model: str, index: int, content: str, finish_reason=None) -> str:
    chunk = {"id": f"chatcmpl-{index}", "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": content},
                          "finish_reason": finish_reason}]}
    return f"data: {json.dumps(chunk)}\n\n"


class Chat:
    def __init__(self, pieces: int, piece_ms: float, use_async: bool):
        self.pieces, self.delay, self.use_async = pieces, piece_ms / 1000, use_async

    def events(self, model: str):
        for index in range(self.pieces):
            if self.delay:
                time.sleep(self.delay)
            yield _event(model, index, f" t{index}")
        yield _event(model, self.pieces, "", "stop") + "data: [DONE]\n\n"

    async def events_async(self, model: str):
        for index in range(self.pieces):
            await asyncio.sleep(self.delay)
            yield _event(model, index, f" t{index}")
        yield _event(model, self.pieces, "", "stop") + "data: [DONE]\n\n"

    async def __call__(self, request: Request):
        model = (await request.json()).get("model", "")
        events = self.events_async(model) if self.use_async else self.events(model)
        return StreamingResponse(events, media_type="text/event-stream")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--workload", choices=("tiny", "busy", "stream"), required=True)
    parser.add_argument("--workers", type=int, default=1, help="replicas (num_replicas)")
    parser.add_argument("--callable", choices=("sync", "async"), default="sync")
    parser.add_argument("--pieces", type=int, default=64)
    parser.add_argument("--piece-ms", type=float, default=0.0)
    parser.add_argument("--temp-dir", required=True, help="Ray's session files (an absolute, short path)")
    args = parser.parse_args()
    # Ray's environment has no pytriton_like (and its SignalSafeEvent): the handler only appends,
    # and the main thread looks every 0.1 s (a threading.Event set by a handler can hang the process)
    stopping = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda signum, _: stopping.append(signum))
    print(f"BENCH_START {time.time():.6f}", flush=True)
    ray.init(include_dashboard=False, _temp_dir=args.temp_dir, log_to_driver=False,
             object_store_memory=100 * 2**20)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": args.http_port})
        if args.workload == "stream":
            cls, init = Chat, (args.pieces, args.piece_ms, args.callable == "async")
        else:
            cls, init = (Double if args.workload == "tiny" else BusyDouble), ()
        deployment = serve.deployment(cls, num_replicas=args.workers, max_ongoing_requests=MAX_ONGOING_REQUESTS)
        serve.run(deployment.bind(*init), route_prefix="/", blocking=False)
        print(f"BENCH_READY {time.time():.6f}", flush=True)
        while not stopping:
            time.sleep(0.1)
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()

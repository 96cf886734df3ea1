#!/usr/bin/env python3
"""Try to break the server, and count what survived (docs/reliability.md).

Each run serves bench/serve_chat.py with ``--probe`` (a streaming chat model of 64 pieces sent as
fast as it can, and the plain models ``probe`` and ``slow``), started and stopped through
bench/servers.py. A prober calls ``probe`` over HTTP every 20 ms through the whole run; the share
of 100 ms slots in which a call was answered is the share of time served, and each span without
an answer is an outage, its length the seconds to serve again.

- ``storm endpoint``: ``--clients`` clients stream chat completions through the OpenAI endpoint,
  a share ``--cut`` of them closing the connection after 5 pieces (a user closing a browser tab).
- ``storm grpc``: the same as raw gRPC ``ModelStreamInfer`` calls to Triton, cancelled to cut
  (RST_STREAM): what makes tritonserver 2.51 abort (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS).
- ``storm deadlines``: unary gRPC ``ModelInfer`` calls to ``slow`` (20 ms) with deadlines of 1 to
  40 ms (``--deadline-ms``), many expiring. With 16 clients or more they expire while the calls wait
  in ``slow``'s queue; with ``--clients 8 --deadline-ms 15 45`` many expire just as the calls
  complete, which crashes tritonserver 2.51 now and then (docs/known_issues.md).
- ``storm nested``: unary gRPC calls to ``pipeline`` and ``pipeline_workers`` (the same callable in
  two worker processes), whose callable calls another model inside the server for each
  (docs/pipelines.md): ``slow`` with a timeout of 1 s or of 5 ms (most of those
  withdrawn from Triton), or ``ticks``' stream, left after 3 pieces; a share ``--cut`` of the calls
  with a deadline of 2 to 30 ms, cancelled while their nested call runs. Each answer is checked,
  and tritonserver's open descriptors, threads and memory are measured before and after.
- ``kill tritonserver|endpoint|worker``: ``--times`` times, SIGKILL of that process (a worker:
  one of ``probe``'s two worker processes) while the prober runs; prints the seconds until the
  server answered again (the endpoint: until ``/health`` answered 200).

Each run prints one JSON line: tritonserver's restarts (the ``pytriton_like_server_restarts``
metric; for ``storm`` they are aborts), whether the serving process survived, the outages, the
share served and, for the storms, the streams whole / cut / short (``nested``: the calls by
outcome, and tritonserver's descriptors, threads and resident MiB). Exits 1 when the serving
process died, a stream that was not cut ended short, or (``nested``) an answer was wrong or
tritonserver kept more than 16 descriptors beyond those it had before the storm.

Usage:
    .venv/bin/python bench/reliability.py storm endpoint|grpc|deadlines|nested [--runs 1] [--seconds 15] [--clients 16]
        [--cut 0.3] [--deadline-ms 1 40]
    .venv/bin/python bench/reliability.py kill tritonserver|endpoint|worker [--times 3]
"""

import argparse
import asyncio
import http.client
import json
import os
import pathlib
import random
import re
import signal
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from typing import Dict, List, Optional

import psutil

import servers
import streams
from openai_endpoint import MODEL, TOKENS, grpc_request_message, grpc_stream_once, stream_once
from serve_chat import LATE, LEFT_AFTER, WITHDRAWN

HERE = pathlib.Path(__file__).resolve().parent
STOP_GRACE_S = 30
_PROBE_BODY = json.dumps({
    "inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}],
}).encode()
_SLOT_S = 0.1


class Prober:
    """Calls ``probe`` every 20 ms on a thread; records when calls were answered."""

    def __init__(self, port: int):
        self._port = port
        self._headers = {"Content-Type": "application/json"}
        self._answered: List[float] = []
        self._stop = threading.Event()
        self.started = time.monotonic()
        self.stopped = self.started
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        connection = None
        while not self._stop.wait(0.02):
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", self._port, timeout=1)
                connection.request("POST", "/v2/models/probe/infer", _PROBE_BODY, self._headers)
                answer = connection.getresponse()
                answer.read()
                if answer.status == 200:
                    self._answered.append(time.monotonic())
            except (OSError, http.client.HTTPException):
                if connection is not None:
                    connection.close()
                connection = None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.stopped = time.monotonic()

    def answered_since(self, moment: float) -> Optional[float]:
        """The first time after ``moment`` a call was answered."""
        return next((at for at in self._answered if at > moment), None)

    def report(self) -> Dict[str, object]:
        """The share of 100 ms slots with an answer, and each span of 0.3 s or more without one."""
        slots = max(1, int((self.stopped - self.started) / _SLOT_S))
        served = {int((at - self.started) / _SLOT_S) for at in self._answered}
        outages, last = [], self.started
        for at in self._answered + [self.stopped]:
            if at - last >= 0.3:
                outages.append(round(at - last, 2))
            last = at
        return {"share_served": round(len(served & set(range(slots))) / slots, 3), "outages_s": outages}


def start(workdir: pathlib.Path, probe_workers: int = 1) -> servers.Server:
    options = ["--probe", f"--probe-workers={probe_workers}", f"--pieces={TOKENS}"]
    return servers.start_script(
        HERE / "serve_chat.py", options, "reliability", "pytriton_like under a storm", workdir,
        port_names=("http", "grpc", "metrics", "openai"),
    )


def restarts(server: servers.Server) -> Optional[int]:
    """tritonserver's restarts, from the relay backend's metric (None: the metrics endpoint is down)."""
    try:
        with urllib.request.urlopen(server.url("/metrics", port="metrics"), timeout=2) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    found = re.search(r"^pytriton_like_server_restarts (\d+)", text, re.M)
    return int(found.group(1)) if found else None


def serving_alive(server: servers.Server) -> bool:
    return server.tree.popen.poll() is None


async def deadline_once(stub, request, deadline_ms) -> str:
    import grpc  # noqa: PLC0415

    try:
        await stub.ModelInfer(request, timeout=random.uniform(*deadline_ms) / 1000)
        return "answered"
    except grpc.aio.AioRpcError as exc:
        return "expired" if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED else f"error {exc.code().name}"


# descriptors tritonserver may hold after the storm beyond those before it: the connections to the call
# socket that a process's pool keeps idle (at most 16, relay/calls.py); a leak of one per call would be
# thousands
_POOL_SLACK = 16


async def nested_once(stub, cut: bool) -> str:
    """One call of ``pipeline`` or ``pipeline_workers``: the outcome, checked against what its nested
    call must give."""
    import grpc  # noqa: PLC0415
    from tritonclient.grpc import service_pb2  # noqa: PLC0415

    mode, value = random.randrange(3), float(random.randrange(1000))
    tensor = service_pb2.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=[1, 2])
    tensor.contents.fp32_contents.extend([mode, value])
    request = service_pb2.ModelInferRequest(model_name=random.choice(("pipeline", "pipeline_workers")), inputs=[tensor])
    try:
        answer = await stub.ModelInfer(request, timeout=random.uniform(0.002, 0.03) if cut else 10.0)
    except grpc.aio.AioRpcError as exc:
        return "cut" if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and cut else f"error {exc.code().name}"
    y = struct.unpack("<2f", answer.raw_output_contents[0])
    if mode == 2:
        return "left a stream early" if y == (mode + LEFT_AFTER - 1, value + LEFT_AFTER - 1) else "WRONG"
    if y == (mode, value):
        return "answered"
    if y == (WITHDRAWN,) * 2 and mode == 1:
        return "withdrawn"
    return "late" if y == (LATE,) * 2 and mode == 0 else "WRONG"


async def storm_load(server: servers.Server, kind: str, args) -> Counter:
    import aiohttp  # noqa: PLC0415
    import grpc  # noqa: PLC0415
    from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: PLC0415

    counts: Counter = Counter()
    deadline = time.monotonic() + args.seconds
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    if kind == "grpc":
        request = grpc_request_message()

        def once():
            return grpc_stream_once(stub, request, random.random() < args.cut)
    elif kind == "endpoint":
        url, body = server.url("/v1/chat/completions", port="openai"), streams.chat_body(MODEL)

        def once():
            return stream_once(session, url, body, random.random() < args.cut)
    elif kind == "nested":

        def once():
            return nested_once(stub, random.random() < args.cut)
    else:
        tensor = service_pb2.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=[1, 1])
        tensor.contents.fp32_contents.append(1.0)
        request = service_pb2.ModelInferRequest(model_name="slow", inputs=[tensor])

        def once():
            return deadline_once(stub, request, args.deadline_ms)

    async def client():
        while time.monotonic() < deadline:
            try:
                counts[await asyncio.wait_for(once(), 5.0)] += 1
            except asyncio.TimeoutError:
                counts["timed out"] += 1
            except (aiohttp.ClientError, grpc.aio.AioRpcError) as exc:  # the server restarting: counted, go on
                counts[f"connection error ({type(exc).__name__})"] += 1
                await asyncio.sleep(0.05)

    try:
        await asyncio.gather(*(client() for _ in range(args.clients)))
    finally:
        await channel.close()
        await session.close()
    return counts


def storm(args) -> int:
    failed = 0
    for number in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-reliability-") as tmp:
            server = start(pathlib.Path(tmp))
            try:
                prober = Prober(server.http_port)
                if args.kind == "nested":
                    warm_nested_calls(server)
                    before = held_by_tritonserver(server)
                counts = asyncio.run(storm_load(server, args.kind, args))
                ended = time.monotonic()
                while prober.answered_since(ended) is None and time.monotonic() - ended < 30:
                    time.sleep(0.1)  # a restart under way ends (its back-off is 4 s at most), for the count
                prober.stop()
                report = {"run": number + 1, "load": args.kind, "seconds": args.seconds, "clients": args.clients,
                          "restarts": restarts(server), "serving_process_alive": serving_alive(server),
                          **prober.report(), "calls": dict(counts)}
                bad = not report["serving_process_alive"] or counts.get("short", 0) > 0 or counts.get("WRONG", 0) > 0
                if args.kind == "nested":
                    time.sleep(2)  # the last withdrawn calls and left streams end
                    after = held_by_tritonserver(server)
                    report["tritonserver_fds_threads_mib"] = {"before": before, "after": after}
                    bad = bad or after[0] > before[0] + _POOL_SLACK
            finally:
                server.stop(STOP_GRACE_S)
        failed += bad
        print(json.dumps(report), flush=True)
    return 1 if failed else 0


def warm_nested_calls(server: servers.Server) -> None:
    """Calls of each of ``pipeline``'s kinds, 16 at a time: the connections and threads nested calls
    need are made by the end."""
    async def each_kind():
        import grpc  # noqa: PLC0415
        from tritonclient.grpc import service_pb2_grpc  # noqa: PLC0415

        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            for _ in range(8):  # calls at once: as many connections to the call socket as the storm's
                await asyncio.gather(*(nested_once(stub, cut=False) for _ in range(16)))

    asyncio.run(each_kind())
    time.sleep(1)


def held_by_tritonserver(server: servers.Server) -> List[int]:
    """tritonserver's open descriptors, threads and resident MiB."""
    process = psutil.Process(child_pid(server, "tritonserver"))
    return [process.num_fds(), process.num_threads(), process.memory_info().rss >> 20]


def child_pid(server: servers.Server, what: str) -> int:
    """The pid of tritonserver, the endpoint's process, or one of probe's worker processes."""
    for process in psutil.Process(server.tree.pid).children(recursive=True):
        try:
            cmdline = " ".join(process.cmdline())
        except psutil.Error:
            continue
        if what == "tritonserver" and process.name() == "tritonserver":
            return process.pid
        if what == "endpoint" and "pytriton_like.openai.service" in cmdline:
            return process.pid
        if what == "worker" and "spawn_main" in cmdline and process.ppid() == server.tree.pid:
            return process.pid
    raise RuntimeError(f"no {what} process under {server.tree.pid}")


def endpoint_answers(server: servers.Server) -> bool:
    try:
        with urllib.request.urlopen(server.url("/health", port="openai"), timeout=1) as answer:
            return answer.status == 200
    except OSError:
        return False


def kill(args) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-reliability-") as tmp:
        server = start(pathlib.Path(tmp), probe_workers=2)
        try:
            prober = Prober(server.http_port)
            back_after = []
            for _ in range(args.times):
                time.sleep(2)
                pid = child_pid(server, args.what)
                killed = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                if args.what == "endpoint":
                    time.sleep(0.05)
                    while not endpoint_answers(server) and time.monotonic() - killed < 60:
                        time.sleep(0.02)
                    back = time.monotonic()
                else:
                    time.sleep(0.2)  # the death seen
                    deadline = killed + 60
                    while time.monotonic() < deadline and prober.answered_since(killed + 0.2) is None:
                        time.sleep(0.02)
                    back = prober.answered_since(killed + 0.2) or float("nan")
                back_after.append(round(back - killed, 2))
            time.sleep(1)
            prober.stop()
            report = {"killed": args.what, "times": args.times, "served_again_after_s": back_after,
                      "restarts": restarts(server), "serving_process_alive": serving_alive(server), **prober.report()}
        finally:
            server.stop(STOP_GRACE_S)
    print(json.dumps(report), flush=True)
    return 0 if report["serving_process_alive"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("storm", help="a load that tries to make tritonserver abort; what was served")
    one.add_argument("kind", choices=("endpoint", "grpc", "deadlines", "nested"))
    one.add_argument("--runs", type=int, default=1, help="runs, each with a server of its own")
    one.add_argument("--seconds", type=float, default=15.0)
    one.add_argument("--clients", type=int, default=16)
    one.add_argument("--deadline-ms", type=float, nargs=2, default=(1.0, 40.0), metavar=("LOW", "HIGH"),
                     help="deadlines: the range they are drawn from, in ms")
    one.add_argument("--cut", type=float, default=0.3,
                     help="share of streams closed after 5 pieces (nested: of calls given a short deadline)")
    two = commands.add_parser("kill", help="SIGKILL one process of the server, and time until it serves again")
    two.add_argument("what", choices=("tritonserver", "endpoint", "worker"))
    two.add_argument("--times", type=int, default=3)
    args = parser.parse_args()
    return storm(args) if args.command == "storm" else kill(args)


if __name__ == "__main__":
    sys.exit(main())

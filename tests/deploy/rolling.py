"""Rolling restarts behind a real load balancer: three replicas, HAProxy, clients, restarts, a kill.

Each replica is ``examples/deployment/server.py`` (a real ``serve()`` process with its own
tritonserver) on loopback ports. HAProxy (Debian's package, `make test-deploy` installs it)
balances over them and checks ``/v2/health/ready`` every 500 ms (two failures mark a replica
down, two successes up again); it retries a request on another replica only when the
connection failed or closed with no answer (``retry-on conn-failure empty-response``), so an
error answer from a replica (a 404, a 503) reaches the client and counts as a failure.

While clients keep calling through HAProxy, every replica in turn gets SIGTERM (it drains:
reports not ready, serves on for ``drain_secs``, stops) and is started again once it exited;
then one replica is killed with SIGKILL and started again. Every request is checked
(y = 2x + 1) and counted in the phase it started in, or in the SIGKILL's if it was in flight then.

Run by tests/deploy/test_rolling_restart.py (``make test-deploy``), or by hand:
``.venv/bin/python -m tests.deploy.rolling [--drain-secs 0]`` (0 shows what happens without a drain).
"""

import argparse
import contextlib
import http.client
import json
import os
import pathlib
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

from pytriton_like.server.process import free_ports

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "deployment" / "server.py"
RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "latest.json"

REPLICAS = 3
CLIENTS = 4
MAX_REQUESTS_PER_CLIENT = 200_000  # a bound on the load besides the time
STEADY_S = 1.5
START_TIMEOUT_S = 120
# The replicas' drain: HAProxy takes a replica out after 2 failed checks 500 ms apart (~1 s), so
# 3 s leave it 2 s to spare, and keep the load within a minute (the library's default of 5 s
# passes as well: `python -m tests.deploy.rolling --drain-secs 5`).
DRAIN_SECS = 3.0
# Errors a client may retry (the load balancer answered for a replica that died, or the
# connection dropped): allowed while a replica is SIGKILLed, never otherwise.
RETRYABLE = {"http 502", "http 503", "http 504", "connection"}

HAPROXY_CONFIG = """
global
    maxconn 512
    stats socket {socket} mode 600 level admin

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout check 2s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response

frontend replicas_in
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /v2/health/ready
    http-check expect status 200
    default-server check inter 500ms fall 2 rise 2
{servers}
"""


class Replica:
    """One ``serve()`` process on fixed loopback ports; started again on the same ports."""

    def __init__(self, name: str, ports: List[int], folder: pathlib.Path, drain_secs: Optional[float]):
        self.name, self.ports, self.folder = name, ports, folder
        self.env = dict(os.environ)
        settings = dict(http_port=ports[0], grpc_port=ports[1], metrics_port=ports[2], http_address="127.0.0.1",
                        grpc_address="127.0.0.1", metrics_address="127.0.0.1")
        if drain_secs is not None:
            settings["drain_secs"] = drain_secs
        self.env.update({f"PYTRITON_TRITON_CONFIG_{key.upper()}": str(value) for key, value in settings.items()})
        self.process: Optional[subprocess.Popen] = None
        self.starts = 0
        self.pids: List[int] = []

    def start(self) -> None:
        self.starts += 1
        log = open(self.folder / f"{self.name}.{self.starts}.log", "w")  # noqa: SIM115 - the child keeps it
        with log:
            self.process = subprocess.Popen([sys.executable, str(SERVER)], env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.pids.append(self.process.pid)

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout_s: float) -> int:
        return self.process.wait(timeout_s)

    def stop(self) -> None:
        """SIGINT (no drain), then SIGKILL if it does not exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self, lines: int = 15) -> str:
        text = (self.folder / f"{self.name}.{self.starts}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])


class HAProxy:
    """haproxy in the foreground with a generated config and a stats socket."""

    def __init__(self, folder: pathlib.Path, port: int, replicas: List[Replica]):
        self.port, self.socket = port, folder / "haproxy.sock"
        servers = "\n".join(f"    server {r.name} 127.0.0.1:{r.ports[0]}" for r in replicas)
        self.config = folder / "haproxy.cfg"
        self.config.write_text(HAPROXY_CONFIG.format(socket=self.socket, port=port, servers=servers))
        self.log = folder / "haproxy.log"
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> None:
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        subprocess.run([binary, "-c", "-q", "-f", str(self.config)], check=True)
        with open(self.log, "w") as log:
            self.process = subprocess.Popen([binary, "-db", "-f", str(self.config)], stdout=log, stderr=subprocess.STDOUT)

    def states(self) -> Dict[str, str]:
        """Each replica's status as HAProxy sees it (UP, DOWN, "UP 1/2"...)."""
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(5)
            conn.connect(str(self.socket))
            conn.sendall(b"show stat\n")
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
        lines = data.decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        rows = [dict(zip(header, line.split(","))) for line in lines[1:] if line]
        return {row["svname"]: row["status"] for row in rows if row["pxname"] == "replicas" and row["svname"] != "BACKEND"}

    def wait_state(self, name: str, state: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(OSError, IndexError):
                if self.states().get(name) == state:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"HAProxy did not see {name} {state} within {timeout_s:.0f} s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


class Load:
    """Client threads calling through the load balancer; each request recorded under the phase it started in."""

    def __init__(self, port: int, clients: int, max_per_client: int):
        self.port, self.clients, self.max_per_client = port, clients, max_per_client
        self.phase = "start"
        self.records: List[tuple] = []  # (phase, latency_s, outcome); list.append is atomic
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def _client(self, index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            for i in range(self.max_per_client):
                if self._stop.is_set():
                    return
                x = index * 1_000_000 + i % 1_000_000  # 2x + 1 stays exact in FP32
                body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [x]}]})
                phase, started = self.phase, time.monotonic()
                try:
                    conn.request("POST", "/v2/models/Linear/infer", body, {"Content-Type": "application/json"})
                    response = conn.getresponse()
                    answer = response.read()
                    if response.status != 200:
                        outcome = f"http {response.status}"
                        detail = answer[:200]
                    else:
                        y = json.loads(answer)["outputs"][0]["data"][0]
                        outcome = "ok" if y == 2 * x + 1 else "wrong"
                        detail = None if outcome == "ok" else f"x={x} y={y}"
                except (OSError, http.client.HTTPException) as exc:
                    outcome, detail = "connection", repr(exc)
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                if "SIGKILL" in self.phase:  # in flight when the replica was killed: the kill's
                    phase = self.phase
                self.records.append((phase, time.monotonic() - started, outcome, detail))
        finally:
            conn.close()


def summarize(records: List[tuple], phases: List[str]) -> List[dict]:
    """Per phase: requests, failures by kind, latency percentiles in ms."""
    summary = []
    for phase in phases:
        rows = [r for r in records if r[0] == phase]
        latencies = sorted(r[1] * 1000 for r in rows)
        failures: Dict[str, int] = {}
        for row in rows:
            if row[2] != "ok":
                failures[row[2]] = failures.get(row[2], 0) + 1
        summary.append({
            "phase": phase,
            "requests": len(rows),
            "failures": failures,
            "examples": sorted({str(r[3]) for r in rows if r[2] != "ok"})[:3],
            "latency_ms": {
                "p50": round(statistics.median(latencies), 2) if latencies else None,
                "p99": round(latencies[int(len(latencies) * 0.99)], 2) if latencies else None,
                "max": round(latencies[-1], 2) if latencies else None,
            },
        })
    return summary


def run(drain_secs: Optional[float] = DRAIN_SECS, clients: int = CLIENTS, results: pathlib.Path = RESULTS) -> dict:
    """Run the whole scenario; returns (and writes to ``results``) what happened.

    Args:
        drain_secs: the replicas' ``TritonConfig.drain_secs`` (None: the library's default).
    """
    folder = pathlib.Path(tempfile.mkdtemp(prefix="rolling-restart-"))
    ports = free_ports(REPLICAS * 3 + 1)
    replicas = [Replica(f"r{i}", ports[3 * i : 3 * i + 3], folder, drain_secs) for i in range(REPLICAS)]
    balancer = HAProxy(folder, ports[-1], replicas)
    load = Load(balancer.port, clients, MAX_REQUESTS_PER_CLIENT)
    phases: List[str] = []
    events: List[dict] = []
    began = time.monotonic()

    def phase(name: str) -> None:
        phases.append(name)
        load.phase = name
        events.append({"at_s": round(time.monotonic() - began, 2), "phase": name})

    try:
        for replica in replicas:
            replica.start()
        balancer.start()
        for replica in replicas:
            balancer.wait_state(replica.name, "UP", START_TIMEOUT_S)
        load_began = time.monotonic()
        phase("steady")
        load.start()
        time.sleep(STEADY_S)
        for replica in replicas:
            phase(f"{replica.name} SIGTERM: draining and stopping")
            replica.signal(signal.SIGTERM)
            code = replica.wait(120)
            events.append({"replica": replica.name, "exit_code": code})
            if code != 0:
                raise AssertionError(f"{replica.name} exited with {code} after SIGTERM:\n{replica.log_tail()}")
            phase(f"{replica.name} starting again")
            replica.start()
            balancer.wait_state(replica.name, "UP", START_TIMEOUT_S)
            phase(f"steady after {replica.name}")
            time.sleep(STEADY_S)
        victim = replicas[1]
        phase(f"{victim.name} SIGKILL")
        victim.signal(signal.SIGKILL)
        victim.wait(30)
        balancer.wait_state(victim.name, "DOWN", 30)
        phase(f"{victim.name} starting again after the kill")
        victim.start()
        balancer.wait_state(victim.name, "UP", START_TIMEOUT_S)
        phase("steady at the end")
        time.sleep(STEADY_S)
        load.stop()
        load_s = time.monotonic() - load_began
    finally:
        load.stop()
        for replica in replicas:
            replica.stop()
        balancer.stop()
    outcomes = [r[2] for r in load.records]
    kill_phases = {name for name in phases if "SIGKILL" in name}
    result = {
        "replicas": REPLICAS,
        "clients": clients,
        "drain_secs": drain_secs,
        "load_balancer": "HAProxy " + subprocess.run([shutil.which("haproxy") or "/usr/sbin/haproxy", "-v"],
                                                     capture_output=True, text=True).stdout.split()[2],
        "load_seconds": round(load_s, 1),
        "requests": len(outcomes),
        "failures": len(outcomes) - outcomes.count("ok"),
        "failures_outside_sigkill": sum(1 for r in load.records if r[2] != "ok" and r[0] not in kill_phases),
        "non_retryable_failures": sum(1 for r in load.records if r[2] not in RETRYABLE | {"ok"}),
        "phases": summarize(load.records, phases),
        "events": events,
        "logs": str(folder),
        "ports": ports,
    }
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(result, indent=1) + "\n")
    return result


def report(result: dict) -> str:
    lines = [
        f"{result['requests']} requests in {result['load_seconds']} s through {result['load_balancer']} to "
        f"{result['replicas']} replicas (drain_secs={result['drain_secs']}), {result['clients']} clients: "
        f"{result['failures']} failed ({result['failures_outside_sigkill']} outside the SIGKILL phases)",
        f"{'phase':48} {'requests':>9} {'failed':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}",
    ]
    for row in result["phases"]:
        latency = row["latency_ms"]
        lines.append(
            f"{row['phase']:48} {row['requests']:>9} {sum(row['failures'].values()):>7} "
            f"{latency['p50'] or 0:>8} {latency['p99'] or 0:>8} {latency['max'] or 0:>8}"
            + (f"  {row['failures']} {row['examples']}" if row["failures"] else "")
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drain-secs", type=float, default=DRAIN_SECS, help=f"the replicas' drain time (default {DRAIN_SECS})")
    parser.add_argument("--results", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args()
    print(report(run(args.drain_secs, results=args.results)))


if __name__ == "__main__":
    main()

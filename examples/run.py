#!/usr/bin/env python3
"""Run an example: start its server.py on free ports, call it with client.py over HTTP and gRPC, stop it.

Usage: python examples/run.py EXAMPLE [--protocols http,grpc]    (EXAMPLE: a folder of examples/)
`make demo` runs `python examples/run.py add_sub`.

Each client gets ``--url``; a client that also scrapes the metrics endpoint finds its url in the
environment variable PYTRITON_EXAMPLE_METRICS_URL.
"""

import argparse
import os
import pathlib
import signal
import socket
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def free_ports(count: int) -> list:
    """``count`` different free ports (the probes stay open together, so none is picked twice)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("example", help="folder under examples/ with server.py and client.py")
    parser.add_argument("--protocols", default="http,grpc", help="comma-separated: http, grpc")
    args = parser.parse_args()
    folder = HERE / args.example
    http_port, grpc_port, metrics_port = free_ports(3)
    env = dict(
        os.environ,
        PYTRITON_TRITON_CONFIG_HTTP_PORT=str(http_port),
        PYTRITON_TRITON_CONFIG_GRPC_PORT=str(grpc_port),
        PYTRITON_TRITON_CONFIG_METRICS_PORT=str(metrics_port),
    )
    urls = {"http": f"http://127.0.0.1:{http_port}", "grpc": f"grpc://127.0.0.1:{grpc_port}"}
    print(f"starting examples/{args.example}/server.py (HTTP {http_port}, gRPC {grpc_port})", flush=True)
    server = subprocess.Popen([sys.executable, str(folder / "server.py")], env=env)
    try:
        for protocol in args.protocols.split(","):
            subprocess.run(
                [sys.executable, str(folder / "client.py"), "--url", urls[protocol]],
                check=True,
                env=dict(os.environ, PYTRITON_EXAMPLE_METRICS_URL=f"http://127.0.0.1:{metrics_port}/metrics"),
            )
    finally:
        server.send_signal(signal.SIGINT)
        try:
            code = server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            code = server.wait()
    print(f"server stopped (exit code {code})", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())

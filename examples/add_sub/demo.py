#!/usr/bin/env python3
"""`make demo`: start the AddSub server, call it over HTTP and gRPC, print the answers, stop it."""

import os
import pathlib
import signal
import socket
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> int:
    http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    env = dict(
        os.environ,
        PYTRITON_TRITON_CONFIG_HTTP_PORT=str(http_port),
        PYTRITON_TRITON_CONFIG_GRPC_PORT=str(grpc_port),
        PYTRITON_TRITON_CONFIG_METRICS_PORT=str(metrics_port),
    )
    print(f"starting examples/add_sub/server.py (HTTP {http_port}, gRPC {grpc_port})", flush=True)
    server = subprocess.Popen([sys.executable, str(HERE / "server.py")], env=env)
    try:
        for url in (f"http://127.0.0.1:{http_port}", f"grpc://127.0.0.1:{grpc_port}"):
            subprocess.run([sys.executable, str(HERE / "client.py"), "--url", url], check=True)
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

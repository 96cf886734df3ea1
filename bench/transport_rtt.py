#!/usr/bin/env python3
"""Round trip of a small two-frame message between two processes: ZeroMQ ipc (what the relay
uses) against a plain AF_UNIX SOCK_SEQPACKET socket. 200 warm-up, then 3,000 round trips each.

Usage: .venv/bin/python bench/transport_rtt.py
"""

import multiprocessing
import os
import socket
import tempfile
import time

import zmq

ROUND_TRIPS, WARM_UP = 3000, 200
FRAMES = [b"h" * 100, b"t" * 32]  # about a tiny request: a JSON header and one tensor


def zmq_echo(address: str) -> None:
    with zmq.Context() as context, context.socket(zmq.ROUTER) as router:
        router.bind(address)
        for _ in range(ROUND_TRIPS + WARM_UP):
            router.send_multipart(router.recv_multipart())


def unix_echo(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as server:
        server.bind(path)
        server.listen(1)
        connection, _ = server.accept()
        with connection:
            for _ in range(ROUND_TRIPS + WARM_UP):
                connection.send(connection.recv(65536))


def median_us(round_trip) -> float:
    for _ in range(WARM_UP):
        round_trip()
    times = []
    for _ in range(ROUND_TRIPS):
        started = time.perf_counter()
        round_trip()
        times.append(time.perf_counter() - started)
    return sorted(times)[ROUND_TRIPS // 2] * 1e6


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        address = f"ipc://{folder}/zmq.sock"
        echo = multiprocessing.Process(target=zmq_echo, args=(address,))
        echo.start()
        with zmq.Context() as context, context.socket(zmq.DEALER) as dealer:
            dealer.connect(address)
            zmq_us = median_us(lambda: (dealer.send_multipart(FRAMES), dealer.recv_multipart()))
        echo.join()
        path = os.path.join(folder, "unix.sock")
        echo = multiprocessing.Process(target=unix_echo, args=(path,))
        echo.start()
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as client:
            while True:
                try:
                    client.connect(path)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    time.sleep(0.01)
            message = b"".join(FRAMES)
            unix_us = median_us(lambda: (client.send(message), client.recv(65536)))
        echo.join()
    print(f"ZeroMQ ipc round trip, median:            {zmq_us:7.1f} us")
    print(f"AF_UNIX SOCK_SEQPACKET round trip, median: {unix_us:7.1f} us")


if __name__ == "__main__":
    main()

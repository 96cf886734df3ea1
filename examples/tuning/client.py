#!/usr/bin/env python3
"""Call the Sleepy model that server.py serves from 32 threads at once, check every answer, and say
which batching the tune gave it."""

import argparse
import threading

import numpy as np

from pytriton_like.client import ModelClient

CLIENTS = 32
CALLS = 5  # per client


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    args = parser.parse_args()

    with ModelClient(args.url, "Sleepy", init_timeout_s=180) as client:  # the tune runs first: about 10 s
        config = client.model_config
    print(f"[{args.url}] Sleepy serves with max_batch_size {config.max_batch_size}, "
          f"queue delay {config.batcher.max_queue_delay_microseconds} µs")

    wrong = []

    def calls(index):
        with ModelClient(args.url, "Sleepy") as client:
            for call in range(CALLS):
                x = np.full((1, 1), index * CALLS + call, np.float32)
                if not np.array_equal(client.infer_batch(x=x)["y"], x * 2):
                    wrong.append(index)

    threads = [threading.Thread(target=calls, args=(index,)) for index in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"[{args.url}] {CLIENTS} clients, {CLIENTS * CALLS} calls: {CLIENTS * CALLS - len(wrong)} answers y = 2x")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Run three sequences side by side against RunningSum and print each running sum as it comes back.

At each step the three sequences send their next value concurrently; every answer is the sum
of that sequence's values so far, whichever instance serves it.
"""

import argparse
import asyncio

import numpy as np

from pytriton_like.client import AsyncioModelClient

# sequence id (an int or a str) -> the values it sends, one per step
SEQUENCES = {"alice": [1, 2, 3, 4, 5], 42: [10, 20, 30, 40, 50], "bob": [100, 100, 100, 100, 100]}


async def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://localhost:8000", help="url of the server")
    args = parser.parse_args()
    async with AsyncioModelClient(args.url, "RunningSum", init_timeout_s=60) as client:

        async def step(sequence_id, values, index):
            return await client.infer_sample(
                np.array([values[index]], dtype=np.int64),
                sequence_id=sequence_id,
                sequence_start=index == 0,
                sequence_end=index == len(values) - 1,
            )

        steps = len(next(iter(SEQUENCES.values())))
        served_by = {}
        for index in range(steps):
            answers = await asyncio.gather(*(step(sid, values, index) for sid, values in SEQUENCES.items()))
            sums = []
            for sequence_id, answer in zip(SEQUENCES, answers):
                sums.append(f"{sequence_id}={int(answer['sum'][0])}")
                served_by.setdefault(sequence_id, set()).add(int(answer["instance"][0]))
            print(f"[{args.url}] step {index + 1}: {' '.join(sums)}")
        for sequence_id, instances in served_by.items():
            print(f"[{args.url}] sequence {sequence_id!r} was served by instance(s) {sorted(instances)}")


if __name__ == "__main__":
    asyncio.run(main())

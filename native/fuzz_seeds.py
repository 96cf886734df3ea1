"""Seed inputs for native/fuzz_wire.c: well-formed RESULT messages made with the reference encoder
(pytriton_like/relay/protocol.py), each behind the fuzzer's two length bytes and an arena."""

import pathlib
import sys

import numpy as np

from pytriton_like.relay.protocol import encode_result, failed_result
from pytriton_like.relay.shm import Arena


def seeds():
    arrays = {
        "y": np.arange(6, dtype=np.float32).reshape(2, 3),
        "s": np.array([b"ab", b""], dtype=object),
        "b": np.array([True, False]),
        "z": np.zeros((0, 4), np.int64),
    }
    yield b"", b"".join(bytes(memoryview(p)) for p in encode_result(1, 0, [arrays, "an error"])[0])
    yield b"", failed_result(2, 1, "ValueError: boom")
    arena = Arena()
    parts, _ = encode_result(3, 0, [{"big": np.arange(300, dtype=np.uint8)}], arena=arena, threshold=100)
    yield bytes(arena._map[:320]), b"".join(bytes(memoryview(p)) for p in parts)  # noqa: SLF001
    arena.close()


def main(folder: str) -> None:
    path = pathlib.Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    for index, (arena, message) in enumerate(seeds()):
        (path / f"seed-{index}").write_bytes(len(arena).to_bytes(2, "little") + arena + message)


if __name__ == "__main__":
    main(sys.argv[1])

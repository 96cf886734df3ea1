"""Seed inputs for the fuzzers: well-formed messages made with the reference encoders, each behind
the fuzzer's two length bytes and an arena: RESULTs (pytriton_like/relay/protocol.py) for
native/fuzz_wire.c, CALLs (pytriton_like/relay/call_codec.py) for native/fuzz_call.c."""

import pathlib
import sys

import numpy as np

from pytriton_like.proxy.types import Request
from pytriton_like.relay.call_codec import encode_call
from pytriton_like.relay.protocol import encode_result, failed_result
from pytriton_like.relay.shm import Arena


def joined(parts) -> bytes:
    return b"".join(bytes(memoryview(part)) for part in parts)


def result_seeds():
    arrays = {
        "y": np.arange(6, dtype=np.float32).reshape(2, 3),
        "s": np.array([b"ab", b""], dtype=object),
        "b": np.array([True, False]),
        "z": np.zeros((0, 4), np.int64),
    }
    yield b"", joined(encode_result(1, 0, [arrays, "an error"])[0])
    yield b"", failed_result(2, 1, "ValueError: boom")
    arena = Arena()
    parts, _ = encode_result(3, 0, [{"big": np.arange(300, dtype=np.uint8)}], arena=arena, threshold=100)
    yield bytes(arena._map[:320]), joined(parts)  # noqa: SLF001
    arena.close()


def call_seeds():
    request = Request({"x": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.array([[b"ab"], [b""]], dtype=object)},
                      {"add": 5, "name": "text", "flag": True, "scale": 0.5}, ["y"])
    yield b"", joined(encode_call(1, "Inner", "", "0", request)[0])
    yield b"", joined(encode_call(4, "Inner", "", "2", Request({"x": np.ones(4, np.float32)}), trace=12345)[0])
    sequence = Request({"x": np.zeros((1, 2), np.int64)})
    sequence.sequence_id, sequence.sequence_start, sequence.sequence_end = "session", True, True
    yield b"", joined(encode_call(2, "Counter", "3", "17", sequence, stream=True)[0])
    arena = Arena()
    parts, _ = encode_call(3, "Inner", "", "1", Request({"big": np.arange(300, dtype=np.uint8)}), arena=arena,
                           threshold=100)
    yield bytes(arena._map[:320]), joined(parts)  # noqa: SLF001
    arena.close()


def main(folder: str) -> None:
    for name, seeds in (("fuzz_wire", result_seeds()), ("fuzz_call", call_seeds())):
        path = pathlib.Path(folder) / name
        path.mkdir(parents=True, exist_ok=True)
        for index, (arena, message) in enumerate(seeds):
            (path / f"seed-{index}").write_bytes(len(arena).to_bytes(2, "little") + arena + message)


if __name__ == "__main__":
    main(sys.argv[1])

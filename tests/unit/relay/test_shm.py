"""Arenas hold memory for what a batch uses, and give it back."""

import os

import numpy as np

from pytriton_like.relay.shm import ARENA_KEEP_BYTES, Arena, give_back, map_received

MIB = 1 << 20


def allocated(mapping) -> int:
    """Bytes of memory behind the arena ``mapping`` maps (this process's view of it)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].startswith("/memfd:pytriton_like-arena"):
                start = int(fields[0].split("-")[0], 16)
                if start == np.frombuffer(mapping, np.uint8).ctypes.data:
                    return os.stat(f"/proc/self/map_files/{fields[0]}").st_blocks * 512
    raise LookupError("the mapping is not an arena")


def test_an_arena_allocates_what_a_message_needs_not_its_whole_size():
    arena = Arena()
    try:
        arena.reserve(3 * MIB)
        arena.reserve(3 * MIB + 1)  # replaced: twice the size, only what is needed allocated
        mapping = map_received(os.dup(arena.pending_fd))
        assert arena.size == 6 * MIB
        assert 3 * MIB <= allocated(mapping) < 4 * MIB
        del mapping
    finally:
        arena.close()


def test_pages_given_back_beyond_what_an_arena_keeps_are_allocated_again_before_reuse():
    arena = Arena()
    try:
        needed = ARENA_KEEP_BYTES + 8 * MIB
        arena.reserve(needed)
        mapping = map_received(os.dup(arena.pending_fd))
        arena.write(0, memoryview(b"\x01" * needed))
        give_back(mapping, needed)  # what the backend does once it has read them
        assert allocated(mapping) == ARENA_KEEP_BYTES
        assert mapping[needed - 1] == 0 and mapping[ARENA_KEEP_BYTES - 1] == 1
        assert not arena.reserve(needed)  # the same arena, its pages allocated again
        assert allocated(mapping) >= needed
        del mapping
    finally:
        arena.close()

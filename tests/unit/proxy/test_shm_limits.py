"""Arenas that cannot grow: a configured limit, or a full /dev/shm."""

import errno
import os

import pytest

from pytriton_like.proxy import shm
from pytriton_like.proxy.shm import SEGMENT_PREFIX, SHM_DIR, ArenaWriter


def ours():
    return {name for name in os.listdir(SHM_DIR) if name.startswith(f"{SEGMENT_PREFIX}{os.getpid()}-limits")}


def test_limit_names_the_size_needed_and_the_arena_stays_usable():
    writer = ArenaWriter(os.getpid(), "limits-a", limit=2 << 20)
    try:
        with pytest.raises(MemoryError, match=r"needs 3145728 bytes .* limit of 2097152 bytes"):
            writer.reset(3 << 20)
        writer.reset(2 << 20)  # exactly the limit is fine
        assert os.path.getsize(os.path.join(SHM_DIR, writer.name)) == 2 << 20
    finally:
        writer.close()
    assert ours() == set()


def test_growth_is_capped_at_the_limit():
    writer = ArenaWriter(os.getpid(), "limits-b", limit=3 << 20)
    try:
        writer.reset(1 << 20)
        writer.reset((1 << 20) + 1)  # would double to 2 MiB: within the limit
        assert os.path.getsize(os.path.join(SHM_DIR, writer.name)) == 2 << 20
        writer.reset((2 << 20) + 1)  # would double to 4 MiB: capped at 3 MiB
        assert os.path.getsize(os.path.join(SHM_DIR, writer.name)) == 3 << 20
    finally:
        writer.close()


def test_full_dev_shm_is_a_memory_error_naming_the_size(monkeypatch):
    def no_space(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(shm.os, "posix_fallocate", no_space)
    writer = ArenaWriter(os.getpid(), "limits-c")
    with pytest.raises(MemoryError, match=r"needs 5000000 bytes of shared memory .* No space left on device"):
        writer.reset(5_000_000)
    writer.close()
    assert ours() == set()


def test_falls_back_to_the_exact_size_when_the_doubled_one_does_not_fit(monkeypatch):
    real = os.posix_fallocate

    def only_small(fd, offset, length):
        if length > (3 << 20):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, offset, length)

    writer = ArenaWriter(os.getpid(), "limits-d")
    try:
        writer.reset(2 << 20)
        monkeypatch.setattr(shm.os, "posix_fallocate", only_small)
        writer.reset(3 << 20)  # doubling wants 4 MiB; 3 MiB is what fits
        assert os.path.getsize(os.path.join(SHM_DIR, writer.name)) == 3 << 20
    finally:
        writer.close()

#!/usr/bin/env python3
"""What it costs to write a large tensor into an arena whose pages were given back, in one process.

A memfd of ``--mib`` MiB mapped like an arena; the median of ``--repeat`` writes of the whole of it
(a copy, as the relay makes), when its pages are still there, and after a hole was punched in it
(what the relay does after a large batch) with the pages allocated again by MADV_POPULATE_WRITE
(what the relay does), by posix_fallocate (what it did before), or by the write's own page faults.

Usage: .venv/bin/python bench/arena_pages.py [--mib 256] [--repeat 5]        (docs/performance.md)
"""

import argparse
import ctypes
import mmap
import os
import statistics
import time

_PUNCH_HOLE_KEEP_SIZE = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    size = args.mib << 20
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.memfd_create("arena-pages", os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    arena = mmap.mmap(fd, size)
    source = bytearray(os.urandom(1 << 20)) * args.mib

    def punch() -> float:
        started = time.perf_counter()
        if libc.fallocate(fd, _PUNCH_HOLE_KEEP_SIZE, ctypes.c_long(0), ctypes.c_long(size)) != 0:
            raise OSError(ctypes.get_errno(), "fallocate")
        return time.perf_counter() - started

    ways = {
        "pages still there": lambda: None,
        "given back, MADV_POPULATE_WRITE": lambda: arena.madvise(_MADV_POPULATE_WRITE, 0, size),
        "given back, posix_fallocate": lambda: os.posix_fallocate(fd, 0, size),
        "given back, page faults": lambda: None,
    }
    arena[:] = source
    for name, allocate in ways.items():
        times, punches = [], []
        for _ in range(args.repeat):
            if name != "pages still there":
                punches.append(punch())
            started = time.perf_counter()
            allocate()
            arena[:] = source
            times.append(time.perf_counter() - started)
        line = f"{name:34} write {args.mib} MiB: {statistics.median(times) * 1000:7.1f} ms"
        if punches:
            line += f"  (giving them back took {statistics.median(punches) * 1000:.1f} ms)"
        print(line, flush=True)
    arena.close()
    os.close(fd)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Idle memory of each serving process, for PyTriton and pytriton_like serving ``Double``.

Starts ``serve_double.py`` with each package in turn (as ``make bench`` does), waits until it is
ready, lets it settle for a second, and prints the RSS of every process of its tree (your process,
tritonserver, the stubs, the reaper) and their sum; no request is sent. ``make bench``'s idle RSS
is the same sum measured after its tiny-request phases.

Example:
    .venv/bin/python bench/idle_memory.py                       # both packages
    .venv/bin/python bench/idle_memory.py --packages pytriton_like
"""

import argparse
import contextlib
import pathlib
import tempfile
import time

import psutil
from servers import start_python_server

SETTLE_S = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packages", nargs="+", choices=("pytriton", "pytriton_like"), default=["pytriton", "pytriton_like"])
    args = parser.parse_args()
    for package in args.packages:
        with tempfile.TemporaryDirectory(prefix="bench-idle-") as workdir:
            server = start_python_server(package, package, pathlib.Path(workdir), instances=1, max_batch_size=64)
            try:
                time.sleep(SETTLE_S)
                rows = []
                for proc in server.tree.refresh():
                    with contextlib.suppress(psutil.Error):
                        rows.append((proc.memory_info().rss / 2**20, proc.pid, " ".join(proc.cmdline())[:90]))
            finally:
                server.stop(grace_s=15)
        print(f"{package}:")
        for rss, pid, cmdline in sorted(rows, reverse=True):
            print(f"  {rss:6.1f} MiB  pid {pid:<7} {cmdline}")
        print(f"  {sum(rss for rss, _, _ in rows):6.1f} MiB  in all")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Tune models.sleepy, then serve it with what the tune recommends, as you would type it in this folder:

    pytriton_like tune models:sleepy --max-batch-size 1 --concurrency 32 --report report \
        --search-max-batch-size 1,32 --search-queue-delay-microseconds 0,50000 --search-instances 1 --search-workers 1
    pytriton_like serve models:sleepy --model-name Sleepy --settings report/report.json

The search is kept small here (three trials, about 10 s); without the --search-* flags tune searches
batch sizes, queue delays, instances and worker processes within --time-budget-s. Open
report/report.html to see why it chose what it chose. Ports come from TritonConfig's defaults or
from PYTRITON_TRITON_CONFIG_HTTP_PORT and friends, as for any server.
"""

import os
import pathlib
import subprocess
import sys

TUNE = ["tune", "models:sleepy", "--max-batch-size", "1", "--concurrency", "32", "--report", "report",
        "--search-max-batch-size", "1,32", "--search-queue-delay-microseconds", "0,50000",
        "--search-instances", "1", "--search-workers", "1", "--no-progress"]
SERVE = ["serve", "models:sleepy", "--model-name", "Sleepy", "--settings", "report/report.json"]

if __name__ == "__main__":
    os.chdir(pathlib.Path(__file__).resolve().parent)  # where models.py is
    subprocess.run([sys.executable, "-m", "pytriton_like", *TUNE], check=True)
    os.execv(sys.executable, [sys.executable, "-m", "pytriton_like", *SERVE])

#!/usr/bin/env python3
"""Serve models.normalize with the command line, as you would type it in this folder:

    pytriton_like serve models:normalize --model-name Normalize --max-batch-size 16

(`python -m pytriton_like` is the same command.) Ports come from TritonConfig's defaults or
from PYTRITON_TRITON_CONFIG_HTTP_PORT and friends, as for any server.
"""

import os
import pathlib
import sys

ARGV = ["serve", "models:normalize", "--model-name", "Normalize", "--max-batch-size", "16"]

if __name__ == "__main__":
    os.chdir(pathlib.Path(__file__).resolve().parent)  # where models.py is
    os.execv(sys.executable, [sys.executable, "-m", "pytriton_like", *ARGV])

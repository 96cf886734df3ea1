"""Copied as ``model.py`` into each bound model's version folder: the file Triton's Python backend loads.

The stub's ``sys.path`` is the base interpreter's, not the user's environment (it ignores
PYTHONPATH), so the user's paths go first before anything imports numpy or zmq.
"""

import json
import os
import sys

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "relay.json"), encoding="utf-8") as _file:
    _SETTINGS = json.load(_file)
sys.path[:0] = [path for path in _SETTINGS["sys_path"] if path and path not in sys.path]

from _pytriton_like_proxy.model import TritonPythonModel  # noqa: E402,F401

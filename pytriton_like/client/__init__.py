"""Clients of models served by Triton Inference Server.

``ModelClient`` (synchronous), ``FuturesModelClient`` (a thread pool over it) and
``AsyncioModelClient`` (coroutines) share one core: the same url rules, input checks,
batch-axis handling, result parsing and errors. See docs/clients.md.
"""

from .aio import AsyncioModelClient
from .futures import FuturesModelClient
from .sync import ModelClient

__all__ = ["AsyncioModelClient", "FuturesModelClient", "ModelClient"]

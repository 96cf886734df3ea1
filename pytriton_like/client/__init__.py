"""Clients of models served by Triton Inference Server.

``ModelClient`` (synchronous), ``FuturesModelClient`` (a thread pool over it) and
``AsyncioModelClient`` (coroutines) share one core: the same url rules, input checks,
batch-axis handling, result parsing and errors. ``DecoupledModelClient`` (iterators) and
``AsyncioDecoupledModelClient`` (async iterators) stream the responses of decoupled
models over gRPC on the same core. See docs/clients.md.
"""

from .aio import AsyncioModelClient
from .aio_decoupled import AsyncioDecoupledModelClient
from .decoupled import DecoupledModelClient
from .futures import FuturesModelClient
from .sync import ModelClient

__all__ = [
    "AsyncioDecoupledModelClient",
    "AsyncioModelClient",
    "DecoupledModelClient",
    "FuturesModelClient",
    "ModelClient",
]

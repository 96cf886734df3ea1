"""The client classes under PyTriton's module path ``pytriton.client.client``.

They live in :mod:`.sync`, :mod:`.futures`, :mod:`.aio`, :mod:`.decoupled` and
:mod:`.aio_decoupled`; this module only makes ``from pytriton_like.client.client import
ModelClient`` work as it does in PyTriton.
"""

from .aio import AsyncioModelClient
from .core import DEFAULT_INFERENCE_TIMEOUT_S, DEFAULT_INIT_TIMEOUT_S
from .aio_decoupled import AsyncioDecoupledModelClient
from .decoupled import DecoupledModelClient
from .futures import FuturesModelClient
from .sync import ModelClient

__all__ = [
    "DEFAULT_INFERENCE_TIMEOUT_S",
    "DEFAULT_INIT_TIMEOUT_S",
    "AsyncioDecoupledModelClient",
    "AsyncioModelClient",
    "DecoupledModelClient",
    "FuturesModelClient",
    "ModelClient",
]

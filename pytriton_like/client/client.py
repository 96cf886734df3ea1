"""The client classes under PyTriton's module path ``pytriton.client.client``.

They live in :mod:`.sync`, :mod:`.futures` and :mod:`.aio`; this module only makes
``from pytriton_like.client.client import ModelClient`` work as it does in PyTriton.
"""

from .aio import AsyncioModelClient
from .futures import FuturesModelClient
from .sync import ModelClient

__all__ = ["AsyncioModelClient", "FuturesModelClient", "ModelClient"]

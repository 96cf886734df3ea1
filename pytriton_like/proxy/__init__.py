"""PyTriton's public path of the request types (``pytriton.proxy.types``): :mod:`.types`.

The relay itself lives in :mod:`pytriton_like.relay`.
"""

"""Warnings of the clients, as PyTriton's ``pytriton.client.warnings``."""

__all__ = ["PyTritonWarning", "NotSupportedTimeoutWarning"]


class PyTritonWarning(UserWarning):
    """Root of the warnings of pytriton_like's clients."""


class NotSupportedTimeoutWarning(PyTritonWarning):
    """A timeout was asked of a tritonclient call that does not take one (gRPC management calls)."""

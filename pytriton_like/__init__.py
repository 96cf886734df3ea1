"""pytriton_like: serve Python callables through NVIDIA Triton Inference Server.

Public modules, as in PyTriton: ``pytriton_like.triton`` (Triton, TritonConfig),
``pytriton_like.model_config`` (Tensor, ModelConfig, DynamicBatcher...),
``pytriton_like.decorators`` (batch, sample...), ``pytriton_like.client`` (ModelClient...).
"""

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # __version__ is read from the installed metadata when asked for: importlib.metadata costs
    # every process that imports the package (the server's reaper too) ~5 MiB and ~35 ms
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("pytriton_like")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0"

"""pytriton_like: serve Python callables through NVIDIA Triton Inference Server.

Public modules, as in PyTriton: ``pytriton_like.triton`` (Triton, TritonConfig),
``pytriton_like.model_config`` (Tensor, ModelConfig, DynamicBatcher...),
``pytriton_like.decorators`` (batch, sample...), ``pytriton_like.client`` (ModelClient...).
"""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("pytriton_like")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

"""A runner for services: every model of a Triton server as an attribute (see docs/runner.md).

``TritonRunner(url)`` (or ``Triton.runner()``) gives ``runner.my_model.run(x)`` and
``await runner.my_model.async_run(x)``, returning a :class:`RunResult`, ``stream_infer`` for
decoupled models, plus the server's calls (model management, health, metadata, log and trace
settings, shared memory), sync and ``async_``.
"""

from .model import ModelRunner
from .result import RunResult
from .runner import TritonRunner

__all__ = ["ModelRunner", "RunResult", "TritonRunner"]

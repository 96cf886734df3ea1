"""``Triton``'s model management: load, unload, index, readiness, config, statistics (docs/model_management.md).

A part of :class:`pytriton_like.triton.Triton` (it inherits :class:`ModelManagement`), on the
running server's :class:`~pytriton_like.server.management.ServerModels`, which turns the server's
refusals into ``PyTritonServerError``.
"""

import logging
import threading
from typing import Any, Dict, List, Optional

from .exceptions import PyTritonInvalidOperationError
from .model_config.names import check_model_name
from .models.bindings import Bindings
from .server.lifecycle import TritonState
from .server.management import ServerModels
from .server.management import no_control
from .startup import ServerRun

__all__ = ["ModelManagement"]

logger = logging.getLogger("pytriton_like.triton")  # the logger of Triton, which these methods are part of


class ModelManagement:
    """The model-management methods of ``Triton`` (a mixin: ``Triton`` sets the attributes below)."""

    _state: TritonState
    _changed: threading.Condition
    _bindings: Bindings
    _run: Optional[ServerRun]

    # -- model management (see docs/model_management.md) -------------------------------------
    # Answers are Triton's JSON documents, as its HTTP endpoint and ModelClient return them.

    def load_model(self, model_name: str) -> None:
        """Load (or reload) a model: one of the model repository, or a bound one that was unloaded.

        A model of the repository has its config.pbtxt checked first.

        Args:
            model_name: the model's name.

        Raises:
            PyTritonModelConfigError: the model's config.pbtxt is missing or broken (the message
                names the model, the file and the line).
            PyTritonInvalidOperationError: the server is not running, or has no HTTP endpoint.
            PyTritonServerError: the server failed to load the model (with the end of its log).
        """
        check_model_name(model_name)
        models = self._server_models(f"load model {model_name!r}")
        with self._changed:
            repository = self._bindings.repository
            if repository is not None and model_name not in self._bindings.models and model_name in repository:
                repository.check(model_name)
            models.load(model_name)
        self._run.lines.ready("model", model_name, None)

    def unload_model(self, model_name: str) -> None:
        """Unload a model (every version); returns once Triton has unloaded it.

        A bound model keeps its relay servers while unloaded and can be loaded again.

        Args:
            model_name: the model's name.

        Raises:
            PyTritonInvalidOperationError: the server is not running, or has no HTTP endpoint.
            PyTritonServerError: the server refused.
        """
        check_model_name(model_name)
        models = self._server_models(f"unload model {model_name!r}")
        with self._changed:
            models.unload(model_name)
        logger.info("model %s unloaded", model_name)

    def get_model_repository_index(self) -> List[Dict[str, Any]]:
        """Every model of the bound and the user's repository: ``name``, and once loaded (or
        unloaded) ``version``, ``state`` (``READY``, ``UNAVAILABLE``, ``LOADING``...) and ``reason``.

        Raises:
            PyTritonInvalidOperationError: the server is not running, or has no HTTP endpoint.
            PyTritonServerError: the server refused.
        """
        return self._server_models("read the repository index").repository_index()

    def is_model_ready(self, model_name: str, version: Optional[int] = None) -> bool:
        """Whether the model (``version``; by default its highest ready one) is ready for requests.

        Args:
            model_name: the model's name.
            version: the version to ask about; ``None``: the model's highest ready version.

        Raises:
            PyTritonInvalidOperationError: the server is not running, or has no HTTP endpoint.
        """
        return self._server_models("check model readiness").model_ready(model_name, version)

    def get_model_config(self, model_name: str, version: Optional[int] = None) -> Dict[str, Any]:
        """The configuration of a loaded model as Triton holds it (JSON, as ``config.pbtxt`` fields).

        Args:
            model_name: the model's name.
            version: the version to read; ``None``: the model's highest ready version.

        Raises:
            PyTritonInvalidOperationError: the server is not running, or has no HTTP endpoint.
            PyTritonServerError: the model is not loaded.
        """
        return self._server_models("read a model config").model_config(model_name, version)

    def get_inference_statistics(self, model_name: Optional[str] = None) -> Dict[str, Any]:
        """Triton's inference statistics: ``{"model_stats": [...]}`` for one model (all its versions) or all.

        Args:
            model_name: the model whose statistics to read; ``None``: every loaded model.

        Raises:
            PyTritonInvalidOperationError: the server is not running, or has no HTTP endpoint.
            PyTritonServerError: the server refused (e.g. an unknown model).
        """
        return self._server_models("read inference statistics").statistics(model_name)

    def _server_models(self, operation: str) -> ServerModels:
        if self._state is not TritonState.RUNNING:
            raise PyTritonInvalidOperationError(f"cannot {operation}: this Triton is not running; call run() first")
        if self._run.models is None:
            raise no_control(operation)
        return self._run.models

    def _load_polled(self, model_name: str) -> None:
        if model_name in self._bindings.models:
            raise PyTritonInvalidOperationError(f"a bound model has the name {model_name!r}; Triton needs unique names")
        self.load_model(model_name)

    def _unload_polled(self, model_name: str) -> None:
        if model_name not in self._bindings.models:
            self.unload_model(model_name)

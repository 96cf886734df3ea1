"""What one ``Triton`` has bound: its models (by name and version) and ensembles, checked as they come.

``bind()`` and ``bind_ensemble()`` build their specs here; names must not clash with each other
or with the models of the user's model repository (Triton needs unique names).
"""

import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ..exceptions import PyTritonInvalidOperationError, PyTritonValidationError
from ..model_config import ModelConfig, Tensor
from ..model_config.ensemble import EnsembleConfig, EnsembleStep, validate_ensemble
from ..model_config.names import check_model_name
from ..model_config.triton_model_config import TritonModelConfig, resolve_tensors
from ..tracing import model_tracer
from ..worker.hints import signature_warning
from ..worker.options import WorkerOptions
from .binding import bound_model_config
from .model import Model
from .registry import BoundModels

__all__ = ["Bindings"]

logger = logging.getLogger(__name__)


class Bindings:
    """The bound models and ensembles of one ``Triton``.

    Args:
        repository: the user's model repository (``None``: none); its names cannot be bound.
    """

    def __init__(self, repository: Any = None):
        self.models = BoundModels()
        self.ensembles: Dict[str, EnsembleConfig] = {}
        self.repository = repository

    def new_model(
        self,
        model_name: str,
        infer_func: Union[Callable, Sequence[Callable]],
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        model_version: int,
        config: Optional[ModelConfig],
        *,
        strict: bool,
        trace_config: Optional[List[str]],
        cache_configured: bool,
        tag: str,
        workers: int = 1,
        worker_options: Optional[WorkerOptions] = None,
    ) -> Model:
        """The model ``bind()``'s arguments describe, checked (not added yet: see :meth:`add_model`).

        Args:
            cache_configured: the server has a response cache (``TritonConfig.cache_config``).
            tag: names the model's shared-memory segments.
        """
        model_config, funcs = bound_model_config(
            model_name, infer_func, inputs, outputs, model_version, config, workers=workers
        )
        problem = signature_warning(funcs[0])  # the instances' callables are alike
        if problem is not None:
            logger.warning("model %s: %s", model_name, problem)
        if model_config.response_cache is not None and not cache_configured:
            raise PyTritonValidationError(
                f"model {model_name!r}: response_cache=True needs a cache in TritonConfig, e.g. "
                "TritonConfig(cache_config=['local,size=1048576']); without one Triton ignores it"
            )
        return Model(
            model_config,
            funcs,
            strict=strict,
            tag=tag,
            tracer=model_tracer(trace_config),
            workers=workers,
            worker_options=worker_options,
            trace_config=trace_config,
        )

    def add_model(self, model: Model, stopped: bool) -> None:
        """Add a model (another version of a bound one is fine); ``stopped``: the Triton is stopped."""
        self.check_bindable("model", model.name, stopped)
        self.models.add(model)

    def new_ensemble(
        self,
        model_name: str,
        steps: Sequence[EnsembleStep],
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        max_batch_size: int,
        model_version: int,
    ) -> EnsembleConfig:
        """The ensemble ``bind_ensemble()``'s arguments describe (not added yet: see :meth:`add_ensemble`)."""
        check_model_name(model_name, "ensemble")
        bad = [step for step in steps if not isinstance(step, EnsembleStep)]
        if bad:
            raise PyTritonValidationError(f"ensemble {model_name!r}: steps must be EnsembleStep, got {bad[0]!r}")
        try:
            return EnsembleConfig(
                model_name=model_name,
                steps=tuple(steps),
                inputs=resolve_tensors(inputs, "INPUT"),
                outputs=resolve_tensors(outputs, "OUTPUT"),
                max_batch_size=max_batch_size,
                model_version=model_version,
            )
        except TypeError as exc:
            raise PyTritonValidationError(f"ensemble {model_name!r}: {exc}") from None

    def add_ensemble(self, config: EnsembleConfig, stopped: bool) -> None:
        """Add an ensemble, checked against the specs known so far."""
        self.check_bindable("ensemble", config.model_name, stopped)
        if config.model_name in self.models:
            raise PyTritonInvalidOperationError(f"a model named {config.model_name!r} is bound already")
        validate_ensemble(config, self.known_configs())
        self.ensembles[config.model_name] = config

    def check_bindable(self, what: str, model_name: str, stopped: bool) -> None:
        """Raise unless a ``what`` ("model" or "ensemble") may be bound as ``model_name`` now."""
        if stopped:
            raise PyTritonInvalidOperationError(f"cannot bind {what} {model_name!r}: this Triton is stopped")
        if self.repository is not None and model_name in self.repository:
            raise PyTritonInvalidOperationError(
                f"cannot bind {what} {model_name!r}: the model repository {self.repository.path} has a model"
                " of that name; Triton needs unique names"
            )
        if model_name in self.ensembles:
            raise PyTritonInvalidOperationError(f"a model named {model_name!r} is bound already (an ensemble)")

    def known_configs(self) -> Dict[str, TritonModelConfig]:
        """Specs of every bound model and ensemble, by name: what ensembles are checked against."""
        known = {model.name: model.config for model in self.models}  # the versions share one config
        known.update((name, ensemble.as_model_config()) for name, ensemble in self.ensembles.items())
        return known

    def names(self) -> List[str]:
        """Every bound name, ensembles first (they use the models: unloaded before them)."""
        return [*self.ensembles, *self.models.names()]

    def startup_repository_models(self, control_mode: Optional[str], load_model: Optional[Sequence[str]]) -> List[str]:
        """The models of the user's repository to load at start, checked (names, config.pbtxt)."""
        if self.repository is None:
            return []
        names = self.repository.names()
        clashes = [name for name in self.models.names() if name in names]
        if clashes:
            raise PyTritonInvalidOperationError(
                f"the model repository {self.repository.path} has models named like bound ones: "
                f"{', '.join(clashes)}; Triton needs unique names"
            )
        if control_mode != "explicit":
            startup = names
        else:
            startup = list(load_model or ())
            missing = [name for name in startup if name not in names]
            if missing:
                raise PyTritonValidationError(
                    f"TritonConfig.load_model names models that are not in {self.repository.path}: "
                    f"{', '.join(missing)} (it has: {', '.join(names) or 'none'})"
                )
        for name in startup:
            self.repository.check(name)
        return startup

"""What one ``Triton`` has bound: its models (by name and version) and ensembles, checked as they come.

``bind()`` and ``bind_ensemble()`` build their specs here (:func:`bound_model_config` turns
``bind()``'s arguments into a checked config, which ``RemoteTriton`` uses too); names must not
clash with each other or with the models of the user's model repository (Triton needs unique
names). :class:`BoundModels` keeps the models by name and version, and writes the config.pbtxt
their versions share.
"""

import copy
import dataclasses
import logging
import pathlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..exceptions import PyTritonInvalidOperationError, PyTritonValidationError
from ..model_config import ModelConfig, Tensor
from ..model_config.ensemble import EnsembleConfig, EnsembleStep, validate_ensemble
from ..model_config.names import check_model_name
from ..model_config.common import DeviceKind
from ..model_config.triton_model_config import ResponseCache, TritonModelConfig, resolve_tensors
from ..model_config.validation import validate_config
from ..tracing import model_tracer
from ..relay_server.hints import signature_warning
from .model import Model
from .repository import remove_model_entry, write_model_config
from .worker_options import WorkerOptions, check_workers

__all__ = ["Bindings", "BoundModels", "bound_model_config"]

logger = logging.getLogger(__name__)


def bound_model_config(
    model_name: str,
    infer_func: Union[Callable, Sequence[Callable]],
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor],
    model_version: int,
    config: Optional[ModelConfig],
    workers: int = 1,
) -> Tuple[TritonModelConfig, List[Callable]]:
    """The checked configuration of a model bound with these arguments, and its callables (one per
    instance: with ``workers`` > 1 the one callable, once per worker process).

    Raises:
        PyTritonValidationError: a bad name, tensor spec, callable or configuration.
    """
    check_model_name(model_name)
    funcs = list(infer_func) if isinstance(infer_func, (list, tuple)) else [infer_func]
    if not funcs:
        raise PyTritonValidationError(f"model {model_name!r}: infer_func is an empty list")
    for func in funcs:
        if not callable(func):
            raise PyTritonValidationError(
                f"model {model_name!r}: infer_func must be callable, got {type(func).__name__}: {func!r}"
            )
    check_workers(model_name, workers, tuple(funcs))
    funcs = funcs * workers
    config = config or ModelConfig()
    try:
        model_config = TritonModelConfig(
            model_name=model_name,
            model_version=model_version,
            max_batch_size=config.max_batch_size if config.batching else 0,
            batching=config.batching,
            # a copy: DynamicBatcher is mutable (as PyTriton's), the bound model's must not change
            batcher=copy.deepcopy(config.batcher) if config.batching and config.sequence_batcher is None else None,
            instance_group={DeviceKind.KIND_CPU: len(funcs)},
            decoupled=config.decoupled,
            inputs=resolve_tensors(inputs, "INPUT"),
            outputs=resolve_tensors(outputs, "OUTPUT"),
            response_cache=ResponseCache(enable=True) if config.response_cache else None,
            sequence_batcher=config.sequence_batcher,
            model_warmup=copy.deepcopy(config.model_warmup) or None,
        )
    except TypeError as exc:
        raise PyTritonValidationError(f"model {model_name!r}: {exc}") from None
    validate_config(model_config)
    return model_config, funcs


class BoundModels:
    """Every bound :class:`Model` (one per name and version).

    The versions of one name share one config.pbtxt (Triton has one per model), so they must
    agree on everything in it but the version; its ``version_policy`` serves every bound version.
    """

    def __init__(self):
        self._models: Dict[str, Dict[int, Model]] = {}

    def __iter__(self) -> Iterator[Model]:
        return (model for versions in self._models.values() for model in versions.values())

    def __contains__(self, name: str) -> bool:
        return name in self._models

    def names(self) -> List[str]:
        """The bound model names, in binding order."""
        return list(self._models)

    def versions(self, name: str) -> List[Model]:
        """The bound versions of model ``name`` (none if it is not bound)."""
        return list(self._models.get(name, {}).values())

    def cancel(self, name: str, key: str) -> None:
        """Cancel the streamed request of model ``name`` tagged with ``key`` (relay_server/cancel_keys.py):
        the relay servers of every bound version are told, and the one that has it ends it."""
        for model in self.versions(name):
            model.cancel(key)

    def busy(self) -> bool:
        """Whether a relay server of any bound model handles a batch."""
        return any(model.busy() for model in self)

    def idle(self, name: str) -> bool:
        """Whether model ``name`` is bound and none of its relay servers handles a batch."""
        versions = self.versions(name)
        return bool(versions) and not any(model.busy() for model in versions)

    def check(self, model: Model) -> None:
        """Raise if ``model`` cannot be added: its name and version are bound, or its config differs.

        Raises:
            PyTritonInvalidOperationError: this name and version are bound already.
            PyTritonValidationError: another version of the name has another configuration.
        """
        versions = self._models.get(model.name)
        if not versions:
            return
        if model.version in versions:
            raise PyTritonInvalidOperationError(f"model {model.name!r} version {model.version} is bound already")
        bound = next(iter(versions.values()))
        differences = _differences(bound, model)
        if differences:
            raise PyTritonValidationError(
                f"model {model.name!r} version {model.version}: the versions of a model share one config.pbtxt, "
                f"so they must be bound with the same inputs, outputs, config and number of callables; "
                f"version {bound.version} differs in {', '.join(differences)}"
            )

    def add(self, model: Model) -> None:
        """Add ``model`` (see :meth:`check`)."""
        self.check(model)
        self._models.setdefault(model.name, {})[model.version] = model

    def remove(self, model: Model) -> None:
        """Forget ``model``; the caller tears it down."""
        versions = self._models.get(model.name, {})
        versions.pop(model.version, None)
        if not versions:
            self._models.pop(model.name, None)

    def write_config(self, repository: pathlib.Path, name: str) -> None:
        """Write ``name``'s config.pbtxt for its bound versions, or remove its folder if none is left."""
        versions = self._models.get(name)
        if not versions:
            remove_model_entry(repository, name)
            return
        write_model_config(repository, next(iter(versions.values())).config, sorted(versions))


def _differences(bound: Model, new: Model) -> List[str]:
    """Names of the config fields in which ``new`` differs from ``bound``, the version aside."""
    return [
        field.name
        for field in dataclasses.fields(bound.config)
        if field.name != "model_version" and getattr(bound.config, field.name) != getattr(new.config, field.name)
    ]


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
        cache_configured: Optional[bool],
        tag: str,
        workers: int = 1,
        worker_options: Optional[WorkerOptions] = None,
    ) -> Model:
        """The model ``bind()``'s arguments describe, checked (not added yet: see :meth:`add_model`).

        Args:
            cache_configured: the server has a response cache (``TritonConfig.cache_config``); None: not
                known here (another process's server), not checked.
            tag: names the model's shared-memory segments.
        """
        model_config, funcs = bound_model_config(
            model_name, infer_func, inputs, outputs, model_version, config, workers=workers
        )
        problem = signature_warning(funcs[0])  # the instances' callables are alike
        if problem is not None:
            logger.warning("model %s: %s", model_name, problem)
        if model_config.response_cache is not None and cache_configured is False:
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

"""The bound models of one ``Triton``, by name and version, and their shared config.pbtxt."""

import dataclasses
import pathlib
from typing import Dict, Iterator, List

from ..exceptions import PyTritonInvalidOperationError, PyTritonValidationError
from .model import Model
from .repository import remove_model_entry, write_model_config

__all__ = ["BoundModels"]


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

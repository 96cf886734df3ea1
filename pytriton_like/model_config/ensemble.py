"""Ensembles: a pipeline of served models that Triton runs as one model.

:class:`EnsembleStep` is the public spec of one step; :class:`EnsembleConfig` is the resolved
ensemble (internal), and :func:`validate_ensemble` checks it against the models whose specs are
known before Triton sees it, so that a mistake is an error naming the step and the tensor
rather than a failed load.
"""

import dataclasses
from typing import Mapping, Optional, Tuple

from ..exceptions import PyTritonValidationError
from .validation import dtype_to_triton, validate_config
from .triton_model_config import TensorSpec, TritonModelConfig

__all__ = ["EnsembleStep", "EnsembleConfig", "validate_ensemble"]


@dataclasses.dataclass(frozen=True)
class EnsembleStep:
    """One step of an ensemble: a served model and how its tensors map to the ensemble's.

    Args:
        model_name: the model this step calls (a bound model, an ensemble, or a model Triton
            has from a model repository).
        input_map: the step model's input name -> the ensemble tensor fed to it (an ensemble
            input or an earlier step's output).
        output_map: the step model's output name -> the ensemble tensor it produces (a new name,
            or one of the ensemble's outputs).
        model_version: the version to call; ``-1``: the latest.

    Example:
        >>> EnsembleStep("Tokenizer", input_map={"text": "TEXT"}, output_map={"ids": "token_ids"})
        ... # doctest: +ELLIPSIS
        EnsembleStep(model_name='Tokenizer', ...)
    """

    model_name: str
    input_map: Mapping[str, str]
    output_map: Mapping[str, str]
    model_version: int = -1

    def __post_init__(self):
        if not isinstance(self.model_name, str) or not self.model_name:
            raise PyTritonValidationError(f"EnsembleStep: model_name must be a non-empty str, got {self.model_name!r}")
        for field in ("input_map", "output_map"):
            mapping = getattr(self, field)
            if not isinstance(mapping, Mapping) or not all(
                isinstance(key, str) and isinstance(value, str) for key, value in mapping.items()
            ):
                raise PyTritonValidationError(
                    f"EnsembleStep {self.model_name!r}: {field} must map str to str, got {mapping!r}"
                )
            object.__setattr__(self, field, dict(mapping))
        if not self.output_map:
            raise PyTritonValidationError(f"EnsembleStep {self.model_name!r}: output_map is empty")
        if not isinstance(self.model_version, int) or (self.model_version < 1 and self.model_version != -1):
            raise PyTritonValidationError(
                f"EnsembleStep {self.model_name!r}: model_version must be -1 (latest) or 1 or more,"
                f" got {self.model_version!r}"
            )


@dataclasses.dataclass(frozen=True)
class EnsembleConfig:
    """Everything an ensemble's config.pbtxt says, with tensor names resolved (internal)."""

    model_name: str
    steps: Tuple[EnsembleStep, ...]
    inputs: Tuple[TensorSpec, ...]
    outputs: Tuple[TensorSpec, ...]
    max_batch_size: int = 0
    model_version: int = 1

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 0

    def as_model_config(self) -> TritonModelConfig:
        """The ensemble seen as a model: what a later ensemble or a client checks its steps against."""
        return TritonModelConfig(
            model_name=self.model_name,
            model_version=self.model_version,
            max_batch_size=self.max_batch_size,
            batching=self.batching,
            inputs=self.inputs,
            outputs=self.outputs,
        )


@dataclasses.dataclass(frozen=True)
class _Tensor:
    """An ensemble tensor as far as it is known: who makes it, its spec if a known model says."""

    origin: str
    spec: Optional[TensorSpec]
    batched: bool  # whether a batch axis comes before spec.shape


def validate_ensemble(config: EnsembleConfig, known: Mapping[str, TritonModelConfig]) -> None:
    """Raise :class:`PyTritonValidationError` naming what is wrong in ``config``.

    Checks that can be made without the step models: every tensor a step reads is an ensemble
    input or an earlier step's output, each tensor is written once, every ensemble input is read
    and every ensemble output written. For steps whose model is in ``known`` also: the mapped
    input and output names exist, every required input is fed, data types and shapes agree, and
    the ensemble's max_batch_size fits the model's. Steps naming other models (e.g. from a model
    repository) skip those checks; Triton makes them when it loads the ensemble.

    Args:
        config: the ensemble.
        known: specs of the models the steps may name, by model name.
    """
    where = f"ensemble {config.model_name!r}"
    if config.max_batch_size < 0:
        raise PyTritonValidationError(
            f"{where}: max_batch_size must be 0 (no batching) or more, got {config.max_batch_size}"
        )
    validate_config(config.as_model_config())
    if not config.steps:
        raise PyTritonValidationError(f"{where}: an ensemble needs at least one step")
    tensors = {spec.name: _Tensor("an ensemble input", spec, config.batching) for spec in config.inputs}
    written_later = {tensor for step in config.steps for tensor in step.output_map.values()}
    for index, step in enumerate(config.steps, start=1):
        step_where = f"{where}, step {index} ({step.model_name!r})"
        if step.model_name == config.model_name:
            raise PyTritonValidationError(f"{step_where}: an ensemble cannot call itself")
        model = known.get(step.model_name)
        if model is not None:
            _check_model_fits(step_where, config, step, model)
        for model_input, tensor in step.input_map.items():
            source = tensors.get(tensor)
            if source is None:
                later = ""
                if tensor in written_later:
                    later = " (a later step writes it: list the steps in the order they run)"
                raise PyTritonValidationError(
                    f"{step_where}: input {model_input!r} reads tensor {tensor!r}, which is neither an ensemble"
                    f" input nor an output of an earlier step{later}; known tensors: {', '.join(sorted(tensors))}"
                )
            if model is not None:
                what = f"input {model_input!r} reads tensor {tensor!r}"
                _check_tensor(step_where, what, source, _spec(model.inputs, model_input), model.batching)
        for model_output, tensor in step.output_map.items():
            if tensor in tensors:
                raise PyTritonValidationError(
                    f"{step_where}: output {model_output!r} writes tensor {tensor!r}, which is {tensors[tensor].origin}"
                    " already; each ensemble tensor is written once"
                )
            origin = f"output {model_output!r} of step {index} ({step.model_name!r})"
            if model is None:
                tensors[tensor] = _Tensor(origin, None, config.batching)
            else:
                tensors[tensor] = _Tensor(origin, _spec(model.outputs, model_output), model.batching)
    for output in config.outputs:
        source = tensors.get(output.name)
        if source is None:
            raise PyTritonValidationError(
                f"{where}: no step writes ensemble output {output.name!r}; name it as a value in a step's output_map"
            )
        _check_tensor(where, f"ensemble output {output.name!r}", source, output, config.batching)
    read = {tensor for step in config.steps for tensor in step.input_map.values()}
    unused = [spec.name for spec in config.inputs if spec.name not in read]
    if unused:
        raise PyTritonValidationError(f"{where}: no step reads ensemble input(s) {', '.join(map(repr, unused))}")


def _check_model_fits(where: str, config: EnsembleConfig, step: EnsembleStep, model: TritonModelConfig) -> None:
    inputs = {spec.name: spec for spec in model.inputs}
    outputs = {spec.name for spec in model.outputs}
    for kind, names, declared in (("input", step.input_map, inputs), ("output", step.output_map, outputs)):
        for name in names:
            if name not in declared:
                raise PyTritonValidationError(
                    f"{where}: model {model.model_name!r} has no {kind} {name!r}; its {kind}s: {', '.join(declared)}"
                )
    missing = [name for name, spec in inputs.items() if not spec.optional and name not in step.input_map]
    if missing:
        raise PyTritonValidationError(
            f"{where}: input_map does not feed required input(s) {', '.join(map(repr, missing))}"
            f" of model {model.model_name!r}"
        )
    if config.batching:
        if not model.batching:
            raise PyTritonValidationError(
                f"{where}: the ensemble batches (max_batch_size {config.max_batch_size}) but model"
                f" {model.model_name!r} does not; Triton needs every step model to batch then"
            )
        if config.max_batch_size > model.max_batch_size:
            raise PyTritonValidationError(
                f"{where}: the ensemble's max_batch_size {config.max_batch_size} is larger than model"
                f" {model.model_name!r}'s ({model.max_batch_size})"
            )


def _check_tensor(where: str, what: str, source: _Tensor, target: Optional[TensorSpec], batched: bool) -> None:
    """Data type and shape of ``source`` against ``target``, as far as both are known."""
    if source.spec is None or target is None:
        return
    have, want = dtype_to_triton(source.spec.dtype), dtype_to_triton(target.dtype)
    if have != want:
        raise PyTritonValidationError(f"{where}: {what}: {source.origin} is {have}, but {want} is expected there")
    # With the batch axis on one side only Triton compares full shapes its own way; leave it that.
    if source.batched == batched and not _shapes_agree(source.spec.shape, target.shape):
        raise PyTritonValidationError(
            f"{where}: {what}: {source.origin} has shape {source.spec.shape}, but {target.shape} is expected there"
            " (-1 matches any size)"
        )


def _shapes_agree(one: Tuple[int, ...], other: Tuple[int, ...]) -> bool:
    return len(one) == len(other) and all(a == b or -1 in (a, b) for a, b in zip(one, other))


def _spec(specs, name: str) -> Optional[TensorSpec]:
    return next((spec for spec in specs if spec.name == name), None)

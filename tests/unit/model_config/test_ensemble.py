"""Ensemble specs: validation against known models, and config.pbtxt rendering (parsed back as protobuf)."""

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.model_config import EnsembleStep
from pytriton_like.model_config.ensemble import EnsembleConfig, validate_ensemble
from pytriton_like.model_config.generator import render_ensemble_config
from pytriton_like.model_config.triton_model_config import TensorSpec, TritonModelConfig


def spec(name, dtype=np.float32, shape=(1,), optional=False) -> TensorSpec:
    return TensorSpec(name=name, shape=shape, dtype=dtype, optional=optional)


def model(name, inputs, outputs, max_batch_size=8) -> TritonModelConfig:
    return TritonModelConfig(
        model_name=name, max_batch_size=max_batch_size, batching=max_batch_size > 0, inputs=inputs, outputs=outputs
    )


KNOWN = {
    "Preprocess": model("Preprocess", [spec("raw", np.bytes_)], [spec("tokens", np.int64)]),
    "Model": model("Model", [spec("x", np.int64)], [spec("y", np.float32)], max_batch_size=4),
    "Postprocess": model("Postprocess", [spec("logits"), spec("bias", optional=True)], [spec("label", np.bytes_)]),
    "Unbatched": model("Unbatched", [spec("x", np.int64)], [spec("y", np.float32)], max_batch_size=0),
}

STEPS = (
    EnsembleStep("Preprocess", input_map={"raw": "TEXT"}, output_map={"tokens": "tokens"}),
    EnsembleStep("Model", input_map={"x": "tokens"}, output_map={"y": "logits"}),
    EnsembleStep("Postprocess", input_map={"logits": "logits"}, output_map={"label": "LABEL"}),
)


def ensemble(steps=STEPS, inputs=(spec("TEXT", np.bytes_),), outputs=(spec("LABEL", np.bytes_),), max_batch_size=4):
    return EnsembleConfig(
        model_name="Pipeline", steps=tuple(steps), inputs=tuple(inputs), outputs=tuple(outputs),
        max_batch_size=max_batch_size,
    )


def test_a_valid_pipeline_renders_to_triton_ensemble_scheduling():
    config = ensemble()
    validate_ensemble(config, KNOWN)
    parsed = text_format.Parse(render_ensemble_config(config), model_config_pb2.ModelConfig())
    assert parsed.name == "Pipeline"
    assert parsed.platform == "ensemble"
    assert parsed.max_batch_size == 4
    assert [(t.name, t.data_type, list(t.dims)) for t in parsed.input] == [("TEXT", model_config_pb2.TYPE_STRING, [1])]
    assert [t.name for t in parsed.output] == ["LABEL"]
    steps = parsed.ensemble_scheduling.step
    assert [(s.model_name, s.model_version) for s in steps] == [("Preprocess", -1), ("Model", -1), ("Postprocess", -1)]
    assert dict(steps[0].input_map) == {"raw": "TEXT"}
    assert dict(steps[1].output_map) == {"y": "logits"}


def test_a_step_names_its_model_version_and_quoted_names_survive():
    steps = [EnsembleStep('We"ird', input_map={'in "x"': "A"}, output_map={"out": "B"}, model_version=3)]
    config = ensemble(steps, inputs=[spec("A")], outputs=[spec("B")])
    validate_ensemble(config, {})  # an unknown model: only the tensor flow is checked
    step = text_format.Parse(render_ensemble_config(config), model_config_pb2.ModelConfig()).ensemble_scheduling.step[0]
    assert (step.model_name, step.model_version, dict(step.input_map)) == ('We"ird', 3, {'in "x"': "A"})


@pytest.mark.parametrize(
    "config, message",
    [
        (
            ensemble([STEPS[1], STEPS[0], STEPS[2]]),
            "step 1 ('Model'): input 'x' reads tensor 'tokens', which is neither an ensemble input nor an output of"
            " an earlier step (a later step writes it",
        ),
        (ensemble(outputs=[spec("LABEL", np.bytes_), spec("SCORE")]), "no step writes ensemble output 'SCORE'"),
        (ensemble(inputs=[spec("TEXT", np.bytes_), spec("EXTRA")]), "no step reads ensemble input(s) 'EXTRA'"),
        (
            ensemble([*STEPS, EnsembleStep("Model", input_map={"x": "tokens"}, output_map={"y": "logits"})]),
            "step 4 ('Model'): output 'y' writes tensor 'logits', which is output 'y' of step 2 ('Model') already",
        ),
        (
            ensemble([EnsembleStep("Preprocess", input_map={"text": "TEXT"}, output_map={"tokens": "tokens"}), *STEPS[1:]]),
            "step 1 ('Preprocess'): model 'Preprocess' has no input 'text'; its inputs: raw",
        ),
        (
            ensemble([*STEPS[:2], EnsembleStep("Postprocess", input_map={"logits": "logits"}, output_map={"lbl": "LABEL"})]),
            "step 3 ('Postprocess'): model 'Postprocess' has no output 'lbl'; its outputs: label",
        ),
        (
            ensemble([EnsembleStep("Preprocess", input_map={}, output_map={"tokens": "tokens"}), *STEPS[1:]],
                     inputs=[spec("TEXT", np.bytes_)]),
            "input_map does not feed required input(s) 'raw' of model 'Preprocess'",
        ),
        (
            ensemble(inputs=[spec("TEXT", np.float32)]),
            "step 1 ('Preprocess'): input 'raw' reads tensor 'TEXT': an ensemble input is FP32, but STRING is expected",
        ),
        (
            ensemble(outputs=[spec("LABEL", np.int32)]),
            "ensemble output 'LABEL': output 'label' of step 3 ('Postprocess') is STRING, but INT32 is expected",
        ),
        (
            ensemble(inputs=[spec("TEXT", np.bytes_, shape=(2,))]),
            "input 'raw' reads tensor 'TEXT': an ensemble input has shape (2,), but (1,) is expected",
        ),
        (ensemble(max_batch_size=8), "the ensemble's max_batch_size 8 is larger than model 'Model''s (4)"),
        (
            ensemble([EnsembleStep("Unbatched", input_map={"x": "X"}, output_map={"y": "Y"})],
                     inputs=[spec("X", np.int64)], outputs=[spec("Y")]),
            "the ensemble batches (max_batch_size 4) but model 'Unbatched' does not",
        ),
        (ensemble(steps=[]), "an ensemble needs at least one step"),
        (ensemble(max_batch_size=-1), "max_batch_size must be 0 (no batching) or more, got -1"),
        (
            ensemble([EnsembleStep("Pipeline", input_map={"a": "TEXT"}, output_map={"b": "LABEL"})]),
            "step 1 ('Pipeline'): an ensemble cannot call itself",
        ),
    ],
)
def test_mistakes_are_named_before_triton_sees_them(config, message):
    with pytest.raises(PyTritonValidationError) as caught:
        validate_ensemble(config, KNOWN)
    assert message in str(caught.value)
    assert "ensemble 'Pipeline'" in str(caught.value)


def test_checks_that_need_a_model_are_skipped_for_unknown_models():
    steps = [
        EnsembleStep("FromRepository", input_map={"anything": "TEXT"}, output_map={"out": "mid"}),
        EnsembleStep("Postprocess", input_map={"logits": "mid"}, output_map={"label": "LABEL"}),
    ]
    # 'mid' comes from a model not known here: its dtype and shape cannot be checked against Postprocess's
    validate_ensemble(ensemble(steps), KNOWN)


def test_an_unbatched_ensemble_may_use_batching_models_and_an_ensemble_output_may_be_an_input():
    config = ensemble(
        [EnsembleStep("Model", input_map={"x": "X"}, output_map={"y": "Y"})],
        inputs=[spec("X", np.int64, shape=(-1, 1))], outputs=[spec("Y"), spec("X", np.int64, shape=(-1, 1))],
        max_batch_size=0,
    )
    validate_ensemble(config, KNOWN)  # Triton loads both (measured with tritonserver 2.51)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"model_name": "", "input_map": {}, "output_map": {"a": "b"}}, "model_name must be a non-empty str"),
        ({"model_name": "M", "input_map": {"a": 1}, "output_map": {"a": "b"}}, "input_map must map str to str"),
        ({"model_name": "M", "input_map": {}, "output_map": {}}, "output_map is empty"),
        ({"model_name": "M", "input_map": {}, "output_map": {"a": "b"}, "model_version": 0}, "model_version must be -1"),
    ],
)
def test_a_bad_step_is_refused_when_made(kwargs, message):
    with pytest.raises(PyTritonValidationError, match=message):
        EnsembleStep(**kwargs)

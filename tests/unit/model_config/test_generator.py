"""Model config specs, their validation, and config.pbtxt rendering (parsed back as protobuf)."""

import dataclasses
import re

import numpy as np
import pytest

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.model_config import DeviceKind, DynamicBatcher, QueuePolicy, Tensor, TimeoutAction
from pytriton_like.model_config.generator import (
    dtype_to_triton,
    BOUND_MODEL_BACKEND,
    render_config,
    triton_to_dtype,
    validate_config,
)
from pytriton_like.model_config.triton_model_config import TensorSpec, TritonModelConfig, resolve_tensors

try:  # protobuf's own parser checks the rendered text; tritonclient[grpc] ships Triton's schema
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2
except ImportError:  # pragma: no cover - both are dependencies of the project
    text_format = model_config_pb2 = None

NUMERIC = [
    (np.bool_, "BOOL"),
    (np.int8, "INT8"),
    (np.int16, "INT16"),
    (np.int32, "INT32"),
    (np.int64, "INT64"),
    (np.uint8, "UINT8"),
    (np.uint16, "UINT16"),
    (np.uint32, "UINT32"),
    (np.uint64, "UINT64"),
    (np.float16, "FP16"),
    (np.float32, "FP32"),
    (np.float64, "FP64"),
]


def spec(name="x", shape=(-1,), dtype=np.float32, optional=False) -> TensorSpec:
    return TensorSpec(name=name, shape=shape, dtype=dtype, optional=optional)


def config(**fields) -> TritonModelConfig:
    fields.setdefault("model_name", "Model")
    fields.setdefault("inputs", (spec("x"),))
    fields.setdefault("outputs", (spec("y"),))
    return TritonModelConfig(**fields)


def parsed(cfg: TritonModelConfig):
    """The rendered config.pbtxt parsed by protobuf's own text-format parser."""
    return parsed_text(render_config(cfg))


def parsed_text(text: str):
    """config.pbtxt text parsed by protobuf's own text-format parser."""
    if model_config_pb2 is None:
        pytest.skip("google.protobuf or tritonclient.grpc is not installed")
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def type_name(message) -> str:
    return model_config_pb2.DataType.Name(message.data_type)


# -- Tensor ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [np.float32, np.dtype("float32"), "float32", "f4", "<f4", np.single],
    ids=["type", "np.dtype", "name", "code", "str", "alias"],
)
def test_tensor_dtype_normalised_to_numpy_scalar_type(given):
    assert Tensor(shape=(1,), dtype=given).dtype is np.float32


@pytest.mark.parametrize(
    ("given", "expected"),
    [(bytes, np.bytes_), (np.bytes_, np.bytes_), ("S", np.bytes_), (np.dtype("S7"), np.bytes_), (str, np.str_),
     (object, object), (bool, np.bool_), (int, np.int64), (float, np.float64)],
)
def test_tensor_dtype_python_types(given, expected):
    assert Tensor(shape=(1,), dtype=given).dtype is expected


def test_tensor_shape_becomes_tuple_of_ints():
    tensor = Tensor(shape=[np.int64(2), 3.0, -1], dtype=np.int8)
    assert tensor.shape == (2, 3, -1)
    assert all(type(dim) is int for dim in tensor.shape)
    assert Tensor(shape=np.array([4, 5]), dtype=np.int8).shape == (4, 5)
    assert Tensor(shape=(), dtype=np.int8).shape == ()


def test_tensor_is_frozen_and_keeps_name_and_optional():
    tensor = Tensor(name="x", shape=(1,), dtype=np.float32, optional=True)
    assert (tensor.name, tensor.optional) == ("x", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tensor.name = "y"


# -- resolve_tensors ---------------------------------------------------------------------------


def test_resolve_tensors_names_unnamed_by_position():
    tensors = [Tensor(shape=(1,), dtype=np.int8), Tensor(name="b", shape=(2,), dtype=np.int8),
               Tensor(shape=(3,), dtype=bytes, optional=True)]
    specs = resolve_tensors(tensors, "INPUT")
    assert [s.name for s in specs] == ["INPUT_1", "b", "INPUT_3"]
    assert specs[2] == TensorSpec(name="INPUT_3", shape=(3,), dtype=np.bytes_, optional=True)
    assert [s.name for s in resolve_tensors(tensors[:1], "OUTPUT")] == ["OUTPUT_1"]
    assert isinstance(specs, tuple)


def test_resolve_tensors_rejects_non_tensor():
    with pytest.raises(TypeError, match=r"expected a Tensor, got dict"):
        resolve_tensors([{"shape": (1,)}], "INPUT")


# -- dtype names -------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "triton"), NUMERIC, ids=[t for _, t in NUMERIC])
def test_dtype_round_trip(dtype, triton):
    assert dtype_to_triton(dtype) == triton
    assert triton_to_dtype(triton) is dtype
    assert triton_to_dtype("TYPE_" + triton) is dtype


@pytest.mark.parametrize("dtype", [np.bytes_, np.str_, object])
def test_bytes_like_dtypes_are_string(dtype):
    assert dtype_to_triton(dtype) == "STRING"


@pytest.mark.parametrize("name", ["STRING", "TYPE_STRING", "BYTES"])
def test_string_maps_back_to_bytes(name):
    assert triton_to_dtype(name) is np.bytes_


def test_unsupported_dtypes_are_named():
    with pytest.raises(PyTritonValidationError, match=r"unsupported dtype .*complex64.*supported: .*float32"):
        dtype_to_triton(np.complex64)
    with pytest.raises(PyTritonValidationError, match=r"unsupported Triton data type 'TYPE_BF16'"):
        triton_to_dtype("TYPE_BF16")


@pytest.mark.parametrize("given", [np.object_, np.dtype(object), "object"], ids=["np.object_", "np.dtype", "name"])
def test_object_dtype_spellings_render_as_string(given):
    tensor = Tensor(shape=(-1,), dtype=given)
    cfg = config(inputs=resolve_tensors([tensor], "INPUT"))
    assert type_name(parsed(cfg).input[0]) == "TYPE_STRING"


# -- validate_config ---------------------------------------------------------------------------


def test_valid_config_passes():
    assert validate_config(config(model_name="a-b.c_1")) is None


@pytest.mark.parametrize("name", ["", "-x", ".x", "a b", "a/b", 'a"b', "é"])
def test_bad_model_name(name):
    with pytest.raises(PyTritonValidationError, match=r"a model name may hold letters, digits"):
        validate_config(config(model_name=name))


@pytest.mark.parametrize("kind", ["input", "output"])
@pytest.mark.parametrize("name", ["a b", "a/b", 'q"uote', "", "-x"])
def test_bad_tensor_name(kind, name):
    cfg = config(**{kind + "s": (spec(name),)})
    message = rf"{kind} name {re.escape(repr(name))} is not a valid tensor name"
    with pytest.raises(PyTritonValidationError, match=message):
        validate_config(cfg)


@pytest.mark.parametrize("kind", ["input", "output"])
def test_duplicate_tensor_name(kind):
    cfg = config(**{kind + "s": (spec("x"), spec("x", shape=(2,)))})
    with pytest.raises(PyTritonValidationError, match=rf"model 'Model': {kind} name 'x' is used twice"):
        validate_config(cfg)


@pytest.mark.parametrize("shape", [(0,), (-2,), (3, 0), (-1, -5)])
def test_bad_dims(shape):
    with pytest.raises(PyTritonValidationError, match=r"input 'x' has shape .*each dimension must be -1 or positive"):
        validate_config(config(inputs=(spec("x", shape=shape),)))


def test_optional_output_rejected_optional_input_accepted():
    with pytest.raises(PyTritonValidationError, match=r"output 'y' cannot be optional"):
        validate_config(config(outputs=(spec("y", optional=True),)))
    validate_config(config(inputs=(spec("x", optional=True),)))


def test_unsupported_tensor_dtype_rejected():
    with pytest.raises(PyTritonValidationError, match=r"unsupported dtype"):
        validate_config(config(inputs=(spec("x", dtype=np.complex128),)))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"model_version": 0}, r"model_version must be 1 or more, got 0"),
        ({"max_batch_size": 0}, r"max_batch_size must be 1 or more when batching is on, got 0"),
    ],
)
def test_model_level_errors(fields, message):
    with pytest.raises(PyTritonValidationError, match=message):
        validate_config(config(**fields))


def test_a_model_without_inputs_or_outputs_is_fine():
    # Triton loads it, and PyTriton binds such models (its remote-mode tests do)
    validate_config(config(inputs=(), outputs=()))
    text = render_config(config(inputs=(), outputs=()))
    assert "input" not in text and "output" not in text and 'name: "Model"' in text


def test_no_batching_allows_max_batch_size_zero():
    validate_config(config(batching=False, max_batch_size=0))


@pytest.mark.parametrize("size", [0, 9, -1])
def test_preferred_batch_size_out_of_range(size):
    cfg = config(max_batch_size=8, batcher=DynamicBatcher(preferred_batch_size=[2, size]))
    message = rf"preferred_batch_size {size} is outside 1..max_batch_size \(8\)"
    with pytest.raises(PyTritonValidationError, match=message):
        validate_config(cfg)


def test_preferred_batch_size_bounds_are_inclusive():
    validate_config(config(max_batch_size=8, batcher=DynamicBatcher(preferred_batch_size=[1, 8])))


@pytest.mark.parametrize("default", [0, 4])
def test_default_priority_level_must_be_within_levels(default):
    cfg = config(batcher=DynamicBatcher(priority_levels=3, default_priority_level=default))
    message = rf"default_priority_level must be within 1..priority_levels \(3\), got {default}"
    with pytest.raises(PyTritonValidationError, match=message):
        validate_config(cfg)


@pytest.mark.parametrize(("levels", "level"), [(2, 3), (2, 0), (0, 1)])
def test_priority_queue_policy_level_out_of_range(levels, level):
    batcher = DynamicBatcher(
        priority_levels=levels, default_priority_level=min(levels, 1), priority_queue_policy={level: QueuePolicy()}
    )
    message = rf"priority_queue_policy has level {level}, outside 1..priority_levels \({levels}\)"
    with pytest.raises(PyTritonValidationError, match=message):
        validate_config(config(batcher=batcher))


def test_render_validates_first():
    with pytest.raises(PyTritonValidationError, match="used twice"):
        render_config(config(inputs=(spec("x"), spec("x"))))


# -- render_config -----------------------------------------------------------------------------


def test_render_minimal_batching_model():
    text = render_config(config(max_batch_size=16))
    assert text.endswith("\n")
    assert 'name: "Model"\n' in text and "max_batch_size: 16\n" in text
    model = parsed(config(max_batch_size=16))
    assert model.name == "Model"
    assert model.backend == BOUND_MODEL_BACKEND == "pytriton_like"
    assert not model.HasField("version_policy")
    assert model.max_batch_size == 16
    assert not model.HasField("dynamic_batching")
    assert [(i.name, type_name(i), list(i.dims)) for i in model.input] == [("x", "TYPE_FP32", [-1])]
    assert [(o.name, type_name(o), list(o.dims)) for o in model.output] == [("y", "TYPE_FP32", [-1])]
    assert [(g.kind, g.count) for g in model.instance_group] == [(model_config_pb2.ModelInstanceGroup.KIND_CPU, 1)]
    assert not model.HasField("model_transaction_policy")
    assert not model.HasField("response_cache")
    assert len(model.parameters) == 0


def test_render_non_batching_model_drops_batcher():
    cfg = config(batching=False, max_batch_size=8, batcher=DynamicBatcher(max_queue_delay_microseconds=100))
    model = parsed(cfg)
    assert model.max_batch_size == 0
    assert not model.HasField("dynamic_batching")


def test_render_default_dynamic_batcher():
    batching = parsed(config(batcher=DynamicBatcher())).dynamic_batching
    assert batching.max_queue_delay_microseconds == 0
    assert list(batching.preferred_batch_size) == []
    assert batching.preserve_ordering is False
    assert batching.priority_levels == 0
    assert not batching.HasField("default_queue_policy")
    assert len(batching.priority_queue_policy) == 0


def test_render_every_dynamic_batcher_field():
    batcher = DynamicBatcher(
        max_queue_delay_microseconds=250,
        preferred_batch_size=[2, 8],
        priority_levels=3,
        default_priority_level=2,
        default_queue_policy=QueuePolicy(
            timeout_action=TimeoutAction.DELAY,
            default_timeout_microseconds=1000,
            allow_timeout_override=True,
            max_queue_size=7,
        ),
        priority_queue_policy={
            3: QueuePolicy(max_queue_size=1),
            1: QueuePolicy(timeout_action=TimeoutAction.REJECT, default_timeout_microseconds=5),
        },
    )
    batching = parsed(config(max_batch_size=8, batcher=batcher)).dynamic_batching
    policy_type = model_config_pb2.ModelQueuePolicy
    assert batching.max_queue_delay_microseconds == 250
    assert list(batching.preferred_batch_size) == [2, 8]
    assert batching.preserve_ordering is False
    assert batching.priority_levels == 3
    assert batching.default_priority_level == 2
    default = batching.default_queue_policy
    assert default.timeout_action == policy_type.DELAY
    assert default.default_timeout_microseconds == 1000
    assert default.allow_timeout_override is True
    assert default.max_queue_size == 7
    assert sorted(batching.priority_queue_policy) == [1, 3]
    assert batching.priority_queue_policy[3].max_queue_size == 1
    assert batching.priority_queue_policy[3].timeout_action == policy_type.REJECT
    assert batching.priority_queue_policy[1].default_timeout_microseconds == 5
    assert batching.priority_queue_policy[1].allow_timeout_override is False


@pytest.mark.parametrize("levels", [0, 1])
def test_render_preserve_ordering(levels):
    batcher = DynamicBatcher(preserve_ordering=True, priority_levels=levels, default_priority_level=levels)
    batching = parsed(config(batcher=batcher)).dynamic_batching
    assert batching.preserve_ordering is True
    assert batching.priority_levels == levels


def test_preserve_ordering_with_several_priority_levels_rejected():
    batcher = DynamicBatcher(preserve_ordering=True, priority_levels=2, default_priority_level=1)
    with pytest.raises(PyTritonValidationError, match=r"preserve_ordering only with at most one priority level"):
        validate_config(config(batcher=batcher))


def test_render_decoupled_response_cache_instances_and_parameters():
    cfg = config(decoupled=True, instance_group={DeviceKind.KIND_CPU: 3}, backend_parameters={"b": "2", "a": "1"})
    model = parsed(cfg)
    assert model.model_transaction_policy.decoupled is True
    assert model.response_cache.enable is False
    assert parsed(config(response_cache=True)).response_cache.enable is True
    assert [g.count for g in model.instance_group] == [3]
    assert {key: value.string_value for key, value in model.parameters.items()} == {"a": "1", "b": "2"}


def test_render_optional_input():
    cfg = config(inputs=(spec("x"), spec("maybe", optional=True)))
    model = parsed(cfg)
    assert [(i.name, i.optional) for i in model.input] == [("x", False), ("maybe", True)]


def test_render_scalar_shape_as_dims_one_reshaped_to_scalar():
    cfg = config(inputs=(spec("s", shape=()), spec("v", shape=(1,))), outputs=(spec("o", shape=()),))
    model = parsed(cfg)
    scalar, vector = model.input
    assert list(scalar.dims) == [1]
    assert scalar.HasField("reshape") and list(scalar.reshape.shape) == []
    assert list(vector.dims) == [1]
    assert not vector.HasField("reshape")
    assert list(model.output[0].dims) == [1] and model.output[0].HasField("reshape")


def test_render_multi_dim_shape():
    model = parsed(config(inputs=(spec("img", shape=(-1, 224, 3), dtype=np.uint8),)))
    assert list(model.input[0].dims) == [-1, 224, 3]
    assert type_name(model.input[0]) == "TYPE_UINT8"


@pytest.mark.parametrize("dtype", [np.bytes_, np.str_, object, bytes])
def test_render_bytes_dtypes_as_type_string(dtype):
    tensor = Tensor(name="text", shape=(-1,), dtype=dtype)
    model = parsed(config(inputs=resolve_tensors([tensor], "INPUT"), outputs=resolve_tensors([tensor], "OUTPUT")))
    assert type_name(model.input[0]) == "TYPE_STRING"
    assert type_name(model.output[0]) == "TYPE_STRING"


@pytest.mark.parametrize(("dtype", "triton"), NUMERIC, ids=[t for _, t in NUMERIC])
def test_render_every_numeric_dtype(dtype, triton):
    model = parsed(config(inputs=(spec("x", dtype=dtype),)))
    assert type_name(model.input[0]) == "TYPE_" + triton


def test_render_unnamed_tensors_resolved():
    inputs = resolve_tensors([Tensor(shape=(1,), dtype=np.int32), Tensor(shape=(2,), dtype=np.int32)], "INPUT")
    outputs = resolve_tensors([Tensor(shape=(1,), dtype=np.int32)], "OUTPUT")
    model = parsed(config(inputs=inputs, outputs=outputs))
    assert [i.name for i in model.input] == ["INPUT_1", "INPUT_2"]
    assert [o.name for o in model.output] == ["OUTPUT_1"]


def test_render_names_are_quoted_strings():
    text = render_config(config(model_name="my.model-1", inputs=(spec("in.put-1"),)))
    assert 'name: "my.model-1"' in text
    assert 'name: "in.put-1"' in text
    assert parsed(config(model_name="my.model-1", inputs=(spec("in.put-1"),))).input[0].name == "in.put-1"


@pytest.mark.parametrize(
    "text",
    ['quote"inside', "back\\slash", "new\nline\ttab", "ctrl\x01\x7f", "caf\u00e9 \u4e2d\u6587", "{ } [ ] : #", ""],
    ids=["quote", "backslash", "newline", "control", "unicode", "syntax", "empty"],
)
def test_render_escapes_strings(text):
    cfg = config(backend_parameters={text: text, "k": text})
    values = {key: value.string_value for key, value in parsed(cfg).parameters.items()}
    assert values == {text: text, "k": text}


def test_response_cache_with_decoupled_rejected():
    # Triton itself refuses to load such a model and then exits at start.
    with pytest.raises(PyTritonValidationError, match=r"response cache does not support decoupled models"):
        validate_config(config(decoupled=True, response_cache=True))


# -- render_version_policy ---------------------------------------------------------------------


def test_version_policy_serves_every_bound_version():
    text = render_config(config(), [3, 1, 2, 3])
    assert list(parsed_text(text).version_policy.specific.versions) == [1, 2, 3]
    assert list(parsed_text(render_config(config(), [1])).version_policy.specific.versions) == [1]


def test_version_policy_needs_positive_versions():
    for versions in ([], [0, 1]):
        with pytest.raises(PyTritonValidationError, match="version numbers of 1 or more"):
            render_config(config(), versions)


def test_rendered_text_is_protobufs_own_printing():
    # Built as Triton's ModelConfig message and printed by text_format: printing the parsed
    # message again gives the same text, whatever the config holds.
    cfg = config(
        batcher=DynamicBatcher(preferred_batch_size=[2], default_queue_policy=QueuePolicy(max_queue_size=3)),
        inputs=(spec("x"), spec("s", shape=(), optional=True)),
        backend_parameters={"k": 'v"\n'},
    )
    text = render_config(cfg, [2, 1])
    assert text == text_format.MessageToString(parsed_text(text))

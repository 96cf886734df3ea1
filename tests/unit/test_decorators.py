"""Tests of pytriton_like.decorators: every decorator alone, in stacks, on methods and on async callables."""

import asyncio
import contextlib
import functools
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytriton_like import decorators, nested_trace
from pytriton_like.decorators import (
    ConstantPadder,
    TritonContext,
    attach_triton_context,
    batch,
    convert_output,
    fill_optionals,
    first_value,
    get_inference_request_batch_size,
    get_model_config,
    get_triton_context,
    group_by_keys,
    group_by_values,
    pad_batch,
    sample,
    triton_context,
)
from pytriton_like.exceptions import PyTritonBadParameterError, PyTritonRuntimeError, PyTritonValidationError
from pytriton_like.model_config.common import DynamicBatcher
from pytriton_like.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton_like.proxy.types import Request


def make_config(inputs=(), outputs=(), **kwargs) -> TritonModelConfig:
    """A model config; tensors given as (name, shape, dtype) or TensorSpec."""

    def spec(tensor):
        return tensor if isinstance(tensor, TensorSpec) else TensorSpec(*tensor)

    kwargs.setdefault("model_name", "model")
    return TritonModelConfig(
        inputs=tuple(spec(t) for t in inputs), outputs=tuple(spec(t) for t in outputs), **kwargs
    )


def attach(infer_func, **config_kwargs):
    config = make_config(**config_kwargs)
    attach_triton_context(infer_func, TritonContext(model_config=config))
    return config


def req(**data) -> Request:
    return Request(data={name: np.asarray(value) for name, value in data.items()})


def col(*values, dtype=np.float32) -> np.ndarray:
    """A batch of one-element rows, shape (n, 1)."""
    return np.array(values, dtype=dtype).reshape(-1, 1)


def run(awaitable):
    return asyncio.run(awaitable)


# --------------------------------------------------------------------------- module surface


def test_exported_names():
    assert set(decorators.__all__) == {
        "ConstantPadder",
        "InferenceRequest",
        "InferenceRequests",
        "InferenceResult",
        "InferenceResults",
        "InputNames",
        "ModelConfigDict",
        "TRITON_CONTEXT_FIELD_NAME",
        "TritonContext",
        "attach_triton_context",
        "batch",
        "convert_output",
        "fill_optionals",
        "first_value",
        "get_inference_request_batch_size",
        "get_model_config",
        "get_triton_context",
        "group_by_keys",
        "group_by_values",
        "pad_batch",
        "sample",
        "triton_context",
    }
    for name in decorators.__all__:
        assert hasattr(decorators, name)


@pytest.mark.parametrize(
    "name",
    [n for n in decorators.__all__ if not n.startswith(("Inference", "InputNames"))],
)
def test_public_names_have_docstrings(name):
    assert inspect.getdoc(getattr(decorators, name))


# --------------------------------------------------------------------------- batch


def test_batch_concatenates_inputs_and_splits_outputs():
    seen = {}

    @batch
    def infer(a, b):
        seen.update(a=a, b=b)
        return {"sum": a + b, "a": a}

    requests = [req(a=col(1), b=col(10)), req(a=col(2, 3), b=col(20, 30))]
    responses = infer(requests)

    np.testing.assert_array_equal(seen["a"], col(1, 2, 3))
    np.testing.assert_array_equal(seen["b"], col(10, 20, 30))
    assert len(responses) == 2
    np.testing.assert_array_equal(responses[0]["sum"], col(11))
    np.testing.assert_array_equal(responses[1]["sum"], col(22, 33))
    np.testing.assert_array_equal(responses[1]["a"], col(2, 3))


def test_batch_single_request_passes_arrays_without_copy():
    x = col(1, 2)
    seen = {}

    @batch
    def infer(x):
        seen["x"] = x
        return {"y": x}

    (response,) = infer([req(x=x)])
    assert seen["x"] is x
    assert response["y"] is x


def test_batch_accepts_plain_dict_requests_and_passes_extra_arguments():
    @batch
    def infer(scale, x, flag=None):
        return {"y": x * scale, "flag": np.full((len(x), 1), flag)}

    responses = infer([{"x": col(1)}, {"x": col(2)}], 3, flag=7)
    np.testing.assert_array_equal(responses[1]["y"], col(6))
    np.testing.assert_array_equal(responses[0]["flag"], [[7]])


def test_batch_empty_request_list_returns_empty_list_without_calling():
    calls = []

    @batch
    def infer(**inputs):
        calls.append(inputs)
        return {}

    assert infer([]) == []
    assert calls == []


def test_batch_list_outputs_are_named_by_model_config():
    @batch
    def infer(x):
        return [x, x * 2]

    attach(infer, inputs=[("x", (1,), np.float32)], outputs=[("y", (1,), np.float32), ("z", (1,), np.float32)])
    responses = infer([req(x=col(1)), req(x=col(2))])
    assert set(responses[1]) == {"y", "z"}
    np.testing.assert_array_equal(responses[1]["z"], col(4))


def test_batch_list_outputs_of_wrong_length_raise():
    @batch
    def infer(x):
        return (x,)

    attach(infer, inputs=[("x", (1,), np.float32)], outputs=[("y", (1,), np.float32), ("z", (1,), np.float32)])
    with pytest.raises(PyTritonValidationError, match=r"returned 1 outputs.*declares 2"):
        infer([req(x=col(1))])


def test_batch_list_outputs_without_context_explain_how_to_attach():
    @batch
    def unbound_infer(x):
        return [x]

    with pytest.raises(PyTritonValidationError, match="attach_triton_context"):
        unbound_infer([req(x=col(1))])


def test_batch_unsupported_output_type_raises():
    @batch
    def infer(x):
        return x

    with pytest.raises(PyTritonValidationError, match="Unsupported output type ndarray"):
        infer([req(x=col(1))])


def test_batch_requests_with_different_inputs_raise():
    @batch
    def infer(**inputs):
        return inputs

    with pytest.raises(PyTritonValidationError, match=r"same inputs.*\['a'\].*\['a', 'b'\].*group_by_keys"):
        infer([req(a=col(1)), req(a=col(1), b=col(2))])


def test_batch_incompatible_shapes_raise_naming_the_input():
    @batch
    def infer(**inputs):
        return inputs

    requests = [req(tokens=np.zeros((1, 3)), x=col(1)), req(tokens=np.zeros((1, 4)), x=col(1))]
    with pytest.raises(PyTritonValidationError, match=r"input 'tokens'.*\(1, 3\), \(1, 4\)"):
        infer(requests)


def test_batch_inputs_disagreeing_on_batch_size_raise():
    @batch
    def infer(**inputs):
        return inputs

    with pytest.raises(PyTritonValidationError, match=r"request 0.*batch size.*'a': 1.*'b': 2"):
        infer([req(a=col(1), b=col(1, 2))])


def test_batch_input_without_batch_axis_raises():
    @batch
    def infer(**inputs):
        return inputs

    with pytest.raises(PyTritonValidationError, match=r"input 'a' has no batch axis"):
        infer([req(a=np.float32(1))])


def test_batch_outputs_of_wrong_batch_size_raise_naming_the_output():
    @batch
    def infer(x):
        return {"good": x, "bad": x[:1], "scalar": np.float32(1)}

    with pytest.raises(PyTritonValidationError, match=r"batch size 3.*\[1, 2\].*'bad' has shape \(1, 1\).*'scalar'"):
        infer([req(x=col(1)), req(x=col(2, 3))])


def test_batch_converts_array_likes_to_arrays():
    @batch
    def infer(x):
        return {"y": x.ravel().tolist()}

    responses = infer([req(x=col(1)), req(x=col(2))])
    assert isinstance(responses[1]["y"], np.ndarray)
    np.testing.assert_array_equal(responses[1]["y"], [2])


def test_batch_generator_outputs_are_split_per_step():
    @batch
    def infer(x):
        for step in range(3):
            yield {"y": x + step}

    stream = infer([req(x=col(1)), req(x=col(10))])
    assert inspect.isgenerator(stream)
    steps = list(stream)
    assert len(steps) == 3
    np.testing.assert_array_equal(steps[2][1]["y"], col(12))


def test_batch_on_async_function_stays_awaitable():
    @batch
    async def infer(x):
        await asyncio.sleep(0)
        return {"y": x * 2}

    assert inspect.iscoroutinefunction(infer)
    responses = run(infer([req(x=col(1)), req(x=col(2))]))
    np.testing.assert_array_equal(responses[1]["y"], col(4))
    assert run(infer([])) == []


def test_batch_on_async_generator_splits_each_item():
    @batch
    async def infer(x):
        for step in range(2):
            yield {"y": x + step}

    async def collect():
        return [item async for item in infer([req(x=col(1)), req(x=col(5))])]

    steps = run(collect())
    np.testing.assert_array_equal(steps[1][1]["y"], col(6))


def test_batch_on_callable_returning_awaitable():
    async def compute(x):
        return {"y": x + 1}

    @batch
    def infer(x):
        return compute(x)

    responses = run(infer([req(x=col(1)), req(x=col(2))]))
    np.testing.assert_array_equal(responses[0]["y"], col(2))


class Doubler:
    def __init__(self, factor):
        self.factor = factor

    @batch
    def infer(self, x):
        return {"y": x * self.factor}

    @batch
    async def ainfer(self, x):
        return {"y": x * self.factor}

    @sample
    def __call__(self, x):
        return {"y": x * self.factor}


def test_batch_on_methods():
    model = Doubler(3)
    responses = model.infer([req(x=col(1)), req(x=col(2))])
    np.testing.assert_array_equal(responses[1]["y"], col(6))
    responses = run(model.ainfer([req(x=col(1))]))
    np.testing.assert_array_equal(responses[0]["y"], col(3))


def test_batch_on_an_already_bound_method():
    class Model:
        def infer(self, x):
            return {"y": x + 1}

    infer = batch(Model().infer)
    np.testing.assert_array_equal(infer([req(x=col(1))])[0]["y"], col(2))


def test_batch_requires_list_of_requests():
    @batch
    def infer(x):
        return {"y": x}

    with pytest.raises(PyTritonValidationError, match=r"@batch expects the list of requests.*got no positional"):
        infer(x=col(1))
    with pytest.raises(PyTritonValidationError, match=r"got ndarray"):
        infer(col(1))


@settings(max_examples=50, deadline=None)
@given(sizes=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=6))
def test_batch_split_restores_each_request(sizes):
    @batch
    def infer(x):
        return {"y": x * 2, "i": np.arange(len(x))}

    rng = np.random.default_rng(len(sizes))
    requests = [req(x=rng.normal(size=(size, 2))) for size in sizes]
    responses = infer(requests)
    assert len(responses) == len(requests)
    for request, response in zip(requests, responses):
        np.testing.assert_array_equal(response["y"], request["x"] * 2)
        assert len(response["i"]) == len(request["x"])


# --------------------------------------------------------------------------- sample


def test_sample_calls_once_per_request_with_its_inputs():
    calls = []

    @sample
    def infer(sequence, flag=None):
        calls.append((sequence, flag))
        return {"length": np.array([sequence.shape[0]])}

    requests = [req(sequence=np.arange(3)), req(sequence=np.arange(5))]
    responses = infer(requests, flag="f")
    assert [len(c[0]) for c in calls] == [3, 5]
    assert calls[0][1] == "f"
    assert [r["length"][0] for r in responses] == [3, 5]


def test_sample_does_not_change_shapes():
    @sample
    def infer(x):
        return {"shape": np.array(x.shape)}

    (response,) = infer([req(x=np.zeros((2, 3)))])
    np.testing.assert_array_equal(response["shape"], [2, 3])


def test_sample_list_outputs_use_model_config():
    @sample
    def infer(x):
        return [x + 1]

    attach(infer, inputs=[("x", (-1,), np.int64)], outputs=[("y", (-1,), np.int64)], max_batch_size=0, batching=False)
    (response,) = infer([req(x=np.arange(2))])
    np.testing.assert_array_equal(response["y"], [1, 2])


def test_sample_on_callable_instance_and_async():
    assert Doubler(2)([req(x=np.array([3]))])[0]["y"][0] == 6

    @sample
    async def infer(x):
        return {"y": x * 2}

    responses = run(infer([req(x=np.array([1])), req(x=np.array([2]))]))
    assert [r["y"][0] for r in responses] == [2, 4]


def test_sample_streams_one_request():
    @sample
    def infer(x):
        yield {"y": x}
        yield {"y": x + 1}

    steps = list(infer([req(x=np.array([1]))]))
    assert [step[0]["y"][0] for step in steps] == [1, 2]
    with pytest.raises(PyTritonValidationError, match="one request per call, got 2"):
        infer([req(x=np.array([1])), req(x=np.array([2]))])


# --------------------------------------------------------------------------- group_by_keys


def test_group_by_keys_groups_by_input_names_and_restores_order():
    groups = []

    @group_by_keys
    @batch
    def infer(a, b=None):
        groups.append((len(a), b is None))
        out = a if b is None else a + b
        return {"out": out}

    requests = [req(a=col(1)), req(a=col(2), b=col(10)), req(a=col(3)), req(b=col(20), a=col(4))]
    responses = infer(requests)
    assert sorted(groups) == [(2, False), (2, True)]
    assert [r["out"][0, 0] for r in responses] == [1, 12, 3, 24]


def test_group_by_keys_single_group_passes_the_list():
    seen = []

    @group_by_keys
    def infer(requests):
        seen.append(requests)
        return [{} for _ in requests]

    requests = [req(a=col(1)), req(a=col(2))]
    infer(requests)
    assert seen[0] == requests


def test_group_by_keys_checks_response_count():
    @group_by_keys
    def infer(requests):
        return [{}]

    with pytest.raises(PyTritonValidationError, match=r"one response per request \(2\), got 1 responses"):
        infer([req(a=col(1)), req(a=col(2))])


def test_group_by_keys_async():
    @group_by_keys
    @batch
    async def infer(a, b=None):
        return {"out": a if b is None else a + b}

    responses = run(infer([req(a=col(1)), req(a=col(2), b=col(3))]))
    assert [r["out"][0, 0] for r in responses] == [1, 5]


# --------------------------------------------------------------------------- group_by_values


def test_group_by_values_below_batch_splits_rows_and_restores_order():
    calls = []

    @batch
    @group_by_values("temperature")
    def infer(prompt, temperature):
        calls.append(temperature.ravel().tolist())
        return {"out": prompt * temperature}

    requests = [
        req(prompt=col(1, 2), temperature=col(0.5, 1.0)),
        req(prompt=col(3), temperature=col(0.5)),
    ]
    responses = infer(requests)
    assert calls == [[0.5, 0.5], [1.0]]
    np.testing.assert_allclose(responses[0]["out"], col(0.5, 2.0))
    np.testing.assert_allclose(responses[1]["out"], col(1.5))


def test_group_by_values_single_group_passes_arrays_through():
    seen = {}

    @group_by_values("t")
    def infer(x, t):
        seen.update(x=x, t=t)
        return {"y": x}

    x, t = col(1, 2), col(3, 3)
    result = infer(x=x, t=t)
    assert seen["x"] is x and seen["t"] is t
    assert result["y"] is x


def test_group_by_values_compares_whole_rows():
    calls = []

    @group_by_values("params")
    def infer(x, params):
        calls.append(params.tolist())
        return {"y": x}

    params = np.array([[1, 2], [1, 3], [1, 2]])
    result = infer(x=col(0, 1, 2), params=params)
    assert calls == [[[1, 2], [1, 2]], [[1, 3]]]
    np.testing.assert_array_equal(result["y"], col(0, 1, 2))


def test_group_by_values_on_bytes_and_several_keys():
    calls = []

    @group_by_values("lang", "beam")
    def infer(text, lang, beam):
        calls.append((lang[0, 0], int(beam[0, 0]), len(text)))
        return {"echo": text}

    lang = np.array([[b"en"], [b"de"], [b"en"], [b"en"]], dtype=object)
    beam = col(1, 1, 2, 1, dtype=np.int32)
    text = np.array([[b"a"], [b"b"], [b"c"], [b"d"]], dtype=object)
    result = infer(text=text, lang=lang, beam=beam)
    assert calls == [(b"de", 1, 1), (b"en", 1, 2), (b"en", 2, 1)]  # in the order of the values, as PyTriton
    np.testing.assert_array_equal(result["echo"], text)


def test_group_by_values_missing_key_is_one_group():
    @group_by_values("absent")
    def infer(x):
        return {"y": x + 1}

    np.testing.assert_array_equal(infer(x=col(1, 2))["y"], col(2, 3))


def test_group_by_values_outputs_of_different_shapes_need_pad_fn():
    def infer(x, n):
        width = int(n[0, 0])
        return {"y": np.ones((len(x), width), dtype=np.float32)}

    plain = batch(group_by_values("n")(infer))
    requests = [req(x=col(1, 2), n=col(1, 3, dtype=np.int64))]
    with pytest.raises(PyTritonValidationError, match=r"output 'y'.*\(1, 1\), \(1, 3\).*ConstantPadder"):
        plain(requests)

    padded = batch(group_by_values("n", pad_fn=ConstantPadder(-1))(infer))
    (response,) = padded(requests)
    np.testing.assert_array_equal(response["y"], [[1, -1, -1], [1, 1, 1]])


def test_group_by_values_passes_triton_context_to_every_group():
    @triton_context
    @batch
    @group_by_values("t")
    def infer(x, t, triton_context):
        return {"y": np.full((len(x), 1), triton_context.model_config.max_batch_size)}

    attach(infer, max_batch_size=8)
    responses = infer([req(x=col(1), t=col(1)), req(x=col(2), t=col(2))])
    assert [r["y"][0, 0] for r in responses] == [8, 8]


def test_group_by_values_group_outputs_must_match_group_size():
    @group_by_values("t")
    def infer(x, t):
        return {"y": x[:1]}

    with pytest.raises(PyTritonValidationError, match=r"output 'y' of a group of 2 rows"):
        infer(x=col(1, 2, 3), t=col(1, 1, 2))


def test_group_by_values_groups_must_return_same_outputs():
    @group_by_values("t")
    def infer(x, t):
        return {"y": x} if t[0, 0] == 1 else {"z": x}

    with pytest.raises(PyTritonValidationError, match="different outputs"):
        infer(x=col(1, 2), t=col(1, 2))


def test_group_by_values_above_batch_is_refused_as_in_pytriton():
    @group_by_values("t")
    @batch
    def above_batch(x, t):
        return {"y": x * t}

    @group_by_values("t")
    def on_requests(requests):
        return [{"y": r["x"]} for r in requests]

    for infer in (above_batch, on_requests):
        with pytest.raises(PyTritonRuntimeError, match="must be used after the @batch decorator. Put it below"):
            infer([req(x=col(1, 2), t=col(2, 3))])


def test_group_by_values_async():
    @batch
    @group_by_values("t")
    async def infer(x, t):
        await asyncio.sleep(0)
        return {"y": x * t}

    responses = run(infer([req(x=col(1, 2), t=col(1, 2))]))
    np.testing.assert_array_equal(responses[0]["y"], col(1, 4))


def test_group_by_values_rejects_bad_arguments():
    with pytest.raises(PyTritonBadParameterError, match="input names"):
        group_by_values(1)
    with pytest.raises(PyTritonBadParameterError, match="pad_fn must be callable"):
        group_by_values("t", pad_fn=3)


@settings(max_examples=50, deadline=None)
@given(
    groups=st.lists(st.lists(st.integers(min_value=0, max_value=2), min_size=0, max_size=4), min_size=1, max_size=4),
)
def test_group_by_values_matches_ungrouped_result(groups):
    """Grouping never changes results, and every call sees one value of the key."""

    def compute(x, t):
        assert len(np.unique(t)) <= 1
        return {"y": x * 10 + t}

    stack = batch(group_by_values("t")(compute))
    requests = [req(x=col(*range(len(ts))), t=col(*ts)) for ts in groups]
    responses = stack(requests)
    for request, response in zip(requests, responses):
        np.testing.assert_array_equal(response["y"], request["x"] * 10 + request["t"])


# --------------------------------------------------------------------------- ConstantPadder


def test_constant_padder_pads_to_largest_shape():
    padded = ConstantPadder(7)([{"y": np.ones((2, 1, 3))}, {"y": np.ones((1, 2, 1))}])
    assert padded[0]["y"].shape == (2, 2, 3)
    assert padded[1]["y"].shape == (1, 2, 3)
    np.testing.assert_array_equal(padded[1]["y"][0], [[1, 7, 7], [1, 7, 7]])


def test_constant_padder_leaves_fitting_arrays_and_missing_names():
    same = np.zeros((1, 2))
    padded = ConstantPadder()([{"a": same, "b": np.zeros((1, 1))}, {"a": np.zeros((1, 2))}])
    assert padded[0]["a"] is same
    assert set(padded[1]) == {"a"}


def test_constant_padder_strings_and_objects():
    padded = ConstantPadder(0)(
        [
            {"s": np.array([[b"ab"]]), "u": np.array([["x"]]), "o": np.array([[b"q"]], dtype=object)},
            {
                "s": np.array([[b"abcd", b"e"]]),
                "u": np.array([["xyz", "w"]]),
                "o": np.array([[b"r", b"s"]], dtype=object),
            },
        ]
    )
    assert padded[0]["s"].dtype == np.dtype("S4")
    assert padded[0]["s"].tolist() == [[b"ab", b""]]
    assert padded[0]["u"].tolist() == [["x", ""]]
    assert padded[0]["o"].tolist() == [[b"q", b""]]


def test_constant_padder_rejects_mixed_dtypes_and_ranks():
    with pytest.raises(PyTritonValidationError, match=r"'y' arrays have different dtypes"):
        ConstantPadder()([{"y": np.zeros((1, 1), np.float32)}, {"y": np.zeros((1, 1), np.int32)}])
    with pytest.raises(PyTritonValidationError, match=r"'y' arrays have shapes"):
        ConstantPadder()([{"y": np.zeros((1, 1))}, {"y": np.zeros((1,))}])


# --------------------------------------------------------------------------- fill_optionals


OPTIONAL_INPUTS = [("x", (1,), np.float32), TensorSpec("t", (1,), np.float32, optional=True)]


def test_fill_optionals_fills_missing_inputs_to_batch_size():
    seen = []

    @fill_optionals(t=np.array([0.5], dtype=np.float32))
    def infer(requests):
        seen.extend(requests)
        return [{} for _ in requests]

    attach(infer, inputs=OPTIONAL_INPUTS)
    original = Request(data={"x": col(1, 2, 3)}, parameters={"p": "v"})
    given_t = req(x=col(1), t=col(9))
    infer([original, given_t])
    np.testing.assert_array_equal(seen[0]["t"], col(0.5, 0.5, 0.5))
    assert seen[0]["t"].flags.writeable
    assert seen[0].parameters == {"p": "v"}
    assert "t" not in original, "the caller's request is not mutated"
    assert seen[1] is given_t


def test_fill_optionals_copies_keep_the_requests_span_and_triton_trace():
    seen = []

    @fill_optionals(t=np.array([0.5], dtype=np.float32))
    def infer(requests):
        seen.extend(requests)
        return [{} for _ in requests]

    attach(infer, inputs=OPTIONAL_INPUTS)
    original = Request(data={"x": col(1, 2, 3)})
    original._triton_trace = 17
    original._span_opener = lambda name, **kwargs: contextlib.nullcontext(f"child span {name}")
    infer([original, Request(data={"x": col(4)})])
    assert seen[0] is not original and (seen[0]._triton_trace, seen[1]._triton_trace) == (17, 0)
    with seen[0].traced_span("calls") as opened:  # nested calls made here continue trace 17
        assert opened == "child span calls" and nested_trace.current() == 17


def test_fill_optionals_without_batching_uses_default_as_is():
    seen = []

    @fill_optionals(t=np.array([0.5, 0.25], dtype=np.float32))
    def infer(requests):
        seen.extend(requests)
        return [{}]

    attach(infer, inputs=[("x", (-1,), np.float32), ("t", (2,), np.float32)], batching=False, max_batch_size=0)
    infer([req(x=np.zeros(4, np.float32))])
    np.testing.assert_array_equal(seen[0]["t"], [0.5, 0.25])


def test_fill_optionals_works_without_a_context():
    @fill_optionals(t=np.array([1], dtype=np.int32))
    @batch
    def infer(x, t):
        return {"y": x + t}

    responses = infer([req(x=col(1, 2, dtype=np.int32))])
    np.testing.assert_array_equal(responses[0]["y"], col(2, 3))


def test_fill_optionals_request_without_inputs_gets_batch_of_one():
    seen = []

    @fill_optionals(t=np.array([1.0], dtype=np.float32))
    def infer(requests):
        seen.extend(requests)
        return [{}]

    infer([req()])
    assert seen[0]["t"].shape == (1, 1)


@pytest.mark.parametrize(
    "defaults, message",
    [
        ({"nope": np.array([1.0], np.float32)}, r"do not fit model 'llm': 'nope' are not inputs \(inputs: \['t', 'x'\]\)"),
        ({"t": np.array([1.0], np.float64)}, r"t: dtype=float64 expected_dtype=float32 .*signature dtypes of model 'llm'"),
        ({"t": np.array([1.0, 2.0], np.float32)}, r"t: shape=\(2,\) expected_shape=\(1,\) .*shapes of model 'llm'"),
        ({"t": np.array(1.0, np.float32)}, r"t: shape=\(\) expected_shape=\(1,\) .*shapes of model 'llm'"),
    ],
)
def test_fill_optionals_checks_defaults_against_model_inputs(defaults, message):
    @fill_optionals(**defaults)
    def infer(requests):
        return [{} for _ in requests]

    attach(infer, inputs=OPTIONAL_INPUTS, model_name="llm")
    with pytest.raises(PyTritonBadParameterError, match=message):
        infer([req(x=col(1))])


def test_fill_optionals_accepts_bytes_defaults_for_string_inputs_and_variable_shapes():
    @fill_optionals(lang=np.array([b"en"]), ids=np.array([1, 2, 3], dtype=np.int64))
    def infer(requests):
        return [dict(r) for r in requests]

    attach(infer, inputs=[("x", (1,), np.float32), ("lang", (1,), object), ("ids", (-1,), np.int64)])
    (response,) = infer([req(x=col(1))])
    assert response["lang"].tolist() == [[b"en"]]
    assert response["ids"].shape == (1, 3)


def test_fill_optionals_rejects_non_array_defaults_at_the_first_call():
    infer = fill_optionals(t=0.5)(lambda requests: requests)  # decorating is fine, as in PyTriton
    with pytest.raises(PyTritonBadParameterError, match=r"Could not use t=0.5 defaults as they are not NumPy arrays"):
        infer([req(x=col(1))])


def test_fill_optionals_must_be_outermost():
    @batch
    @fill_optionals(t=np.array([1.0], np.float32))
    def infer(**inputs):
        return inputs

    with pytest.raises(PyTritonValidationError, match=r"first \(outermost\)"):
        infer([req(x=col(1))])


def test_fill_optionals_lets_group_by_keys_form_one_group():
    calls = []

    @fill_optionals(t=np.array([0.5], np.float32))
    @group_by_keys
    @batch
    def infer(x, t):
        calls.append(len(x))
        return {"y": x * t}

    responses = infer([req(x=col(2)), req(x=col(4), t=col(2))])
    assert calls == [2]
    assert [r["y"][0, 0] for r in responses] == [1, 8]


# --------------------------------------------------------------------------- pad_batch


def test_pad_batch_pads_to_preferred_size_and_trims_outputs():
    seen = []

    @batch
    @pad_batch
    def infer(x):
        seen.append(x)
        return {"y": x * 2, "batch": np.full((len(x), 1), len(x))}

    attach(infer, max_batch_size=16, batcher=DynamicBatcher(preferred_batch_size=[8, 4]))
    responses = infer([req(x=col(1)), req(x=col(2, 3))])
    np.testing.assert_array_equal(seen[0], col(1, 2, 3, 3))
    np.testing.assert_array_equal(responses[1]["y"], col(4, 6))
    assert responses[0]["batch"][0, 0] == 4


def test_pad_batch_falls_back_to_max_batch_size():
    seen = []

    @pad_batch
    def infer(x):
        seen.append(len(x))
        return [x]

    attach(infer, outputs=[("y", (1,), np.float32)], max_batch_size=6, batcher=DynamicBatcher(preferred_batch_size=[2]))
    result = infer(x=col(1, 2, 3))
    assert seen == [6]
    np.testing.assert_array_equal(result["y"], col(1, 2, 3, 3, 3, 3))  # the padded rows, as PyTriton's
    assert batch(infer)([{"x": col(1, 2, 3)}])[0]["y"].shape == (3, 1)  # @batch keeps the real rows


def test_pad_batch_leaves_full_batch_alone():
    x = col(1, 2)

    @pad_batch
    def infer(x):
        return {"y": x}

    attach(infer, max_batch_size=2)
    assert infer(x=x)["y"] is x


def test_pad_batch_async():
    @batch
    @pad_batch
    async def infer(x):
        assert len(x) == 4
        return {"y": x + 1}

    attach(infer, max_batch_size=4)
    responses = run(infer([req(x=col(1))]))
    np.testing.assert_array_equal(responses[0]["y"], col(2))


def test_pad_batch_errors():
    @pad_batch
    def unbound(x):
        return {"y": x}

    with pytest.raises(PyTritonValidationError, match="No Triton context"):
        unbound(x=col(1))

    @pad_batch
    def no_batching(x):
        return {"y": x}

    attach(no_batching, batching=False, max_batch_size=0, model_name="plain")
    with pytest.raises(PyTritonValidationError, match="model 'plain' has none"):
        no_batching(x=col(1))

    @pad_batch
    @batch
    def above_batch(x):
        return {"y": x}

    attach(above_batch, max_batch_size=4)
    with pytest.raises(PyTritonValidationError, match="below @batch"):
        above_batch([req(x=col(1))])


# --------------------------------------------------------------------------- first_value


def test_first_value_replaces_batched_values_with_scalar():
    seen = {}

    @batch
    @first_value("temperature", "top_k")
    def infer(x, temperature, top_k):
        seen.update(temperature=temperature, top_k=top_k)
        return {"y": x}

    infer([req(x=col(1, 2), temperature=col(0.7, 0.7), top_k=col(5, 5, dtype=np.int64))])
    assert isinstance(seen["temperature"], np.float32) and seen["temperature"] == np.float32(0.7)
    assert isinstance(seen["top_k"], np.int64) and seen["top_k"] == 5


def test_first_value_without_squeeze_keeps_row_array():
    @first_value("t", squeeze_single_values=False)
    def infer(t):
        return t

    result = infer(t=col(3, 3))
    assert isinstance(result, np.ndarray) and result.shape == (1,)


def test_first_value_keeps_multi_element_rows_and_plain_rows():
    @first_value("v", "s")
    def infer(v, s):
        return v, s

    v, s = infer(v=np.array([[1, 2], [1, 2]]), s=np.array([4, 4]))
    np.testing.assert_array_equal(v, [1, 2])
    assert s == 4


def test_first_value_strict_rejects_different_values():
    @first_value("temperature")
    def infer(temperature):
        return temperature

    with pytest.raises(PyTritonRuntimeError, match=r"values on the 'temperature' input are not equal.*group_by_values"):
        infer(temperature=col(0.5, 0.7))

    assert first_value("temperature", strict=False)(lambda temperature: temperature)(temperature=col(0.5, 0.7)) == 0.5


def test_first_value_strict_treats_nan_as_equal_and_compares_bytes():
    @first_value("f", "s")
    def infer(f, s):
        return f, s

    f, s = infer(f=col(np.nan, np.nan), s=np.array([[b"a"], [b"a"]], dtype=object))
    assert np.isnan(f) and s == b"a"
    with pytest.raises(PyTritonRuntimeError, match="values on the 's' input are not equal"):
        infer(f=col(1), s=np.array([[b"a"], [b"b"]], dtype=object))


def test_first_value_on_list_of_requests():
    seen = []

    @first_value("t")
    def infer(requests):
        seen.extend(requests)
        return [{} for _ in requests]

    original = Request(data={"t": col(2, 2), "x": col(1, 2)}, parameters={"a": 1})
    infer([original])
    assert seen[0]["t"] == 2
    assert seen[0].parameters == {"a": 1}
    assert original["t"].shape == (2, 1), "the caller's request is not mutated"


def test_first_value_errors():
    with pytest.raises(PyTritonBadParameterError, match="triton_context"):
        first_value("triton_context")
    with pytest.raises(PyTritonBadParameterError, match="input names"):
        first_value(3)

    @first_value("t")
    def infer(t):
        return t

    with pytest.raises(PyTritonValidationError, match="'t' is empty"):
        infer(t=np.zeros((0, 1)))
    with pytest.raises(PyTritonValidationError, match="'t' has no batch axis"):
        infer(t=np.float32(1))

    @first_value("t")
    def plain(t):
        return t

    attach(plain, batching=False, max_batch_size=0, model_name="nb")
    with pytest.raises(PyTritonRuntimeError, match="only be used with models that support batching.*'nb'"):
        plain(t=col(1))


def test_first_value_ignores_absent_keys():
    @first_value("t")
    def infer(x):
        return x

    np.testing.assert_array_equal(infer(x=col(1, 2)), col(1, 2))


# --------------------------------------------------------------------------- triton_context and attaching


def test_triton_context_injects_context():
    @triton_context
    def infer(requests, triton_context):
        return [{"n": triton_context.model_config.model_name} for _ in requests]

    config = attach(infer, model_name="ctx")
    assert infer([req(x=col(1))]) == [{"n": "ctx"}]
    assert get_model_config(infer, None) is config
    assert get_triton_context(infer).model_config is config


def test_triton_context_without_attach_raises():
    @triton_context
    def never_bound(requests, triton_context):
        return []

    with pytest.raises(PyTritonValidationError, match=r"No Triton context is attached to .*never_bound.*attach_"):
        never_bound([])


def test_context_is_found_deep_in_stack_and_through_functools_wrappers():
    def logged(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return function(*args, **kwargs)

        return wrapper

    @batch
    @logged
    @triton_context
    def infer(x, triton_context):
        return {"y": np.full((len(x), 1), triton_context.model_config.max_batch_size)}

    attach(infer, max_batch_size=5)
    assert infer([req(x=col(1))])[0]["y"][0, 0] == 5
    bound = functools.partial(infer)
    attach(bound, max_batch_size=9)
    assert infer([req(x=col(1))])[0]["y"][0, 0] == 9


class ContextModel:
    @batch
    @triton_context
    def first(self, x, triton_context):
        return {"name": np.array([[triton_context.model_config.model_name]] * len(x), dtype=object)}

    @batch
    @triton_context
    def second(self, x, triton_context):
        return {"name": np.array([[triton_context.model_config.model_name]] * len(x), dtype=object)}

    @triton_context
    def __call__(self, requests, triton_context):
        return [{"name": triton_context.model_config.model_name} for _ in requests]


def test_contexts_are_per_method_and_per_instance():
    one, two = ContextModel(), ContextModel()
    attach(one.first, model_name="one-first")
    attach(one.second, model_name="one-second")
    attach(two.first, model_name="two-first")
    requests = [req(x=col(1))]
    assert one.first(requests)[0]["name"][0, 0] == "one-first"
    assert one.second(requests)[0]["name"][0, 0] == "one-second"
    assert two.first(requests)[0]["name"][0, 0] == "two-first"


def test_context_on_callable_instance():
    model = ContextModel()
    attach(model, model_name="callable")
    assert model([req(x=col(1))]) == [{"name": "callable"}]


def test_attach_triton_context_rejects_bad_arguments():
    with pytest.raises(PyTritonValidationError, match="expects a callable"):
        attach_triton_context(3, TritonContext(model_config=make_config()))
    with pytest.raises(PyTritonValidationError, match="expects a TritonContext"):
        attach_triton_context(lambda requests: requests, make_config())


def test_triton_context_async():
    @triton_context
    async def infer(requests, triton_context):
        return [{"n": triton_context.model_config.model_name}]

    attach(infer, model_name="async")
    assert run(infer([req(x=col(1))])) == [{"n": "async"}]


# --------------------------------------------------------------------------- helpers


def test_convert_output_and_batch_size_helpers():
    config = make_config(outputs=[("a", (1,), np.float32), ("b", (1,), np.float32)])
    outputs = {"a": 1}
    assert convert_output(outputs) is outputs
    assert convert_output([1, 2], model_config=config) == {"a": 1, "b": 2}
    assert get_inference_request_batch_size(req(x=col(1, 2, 3))) == 3
    with pytest.raises(PyTritonValidationError, match="no inputs"):
        get_inference_request_batch_size({})


# --------------------------------------------------------------------------- stacks


STACK_INPUTS = [("prompt", (1,), np.float32), ("temperature", (1,), np.float32), ("opt", (1,), np.float32)]


def _full_stack_infer(triton_context, prompt, temperature, opt=None):
    return {
        "out": prompt * temperature + (0 if opt is None else opt),
        "mbs": np.full((len(prompt), 1), triton_context.model_config.max_batch_size),
    }


def _stack_requests():
    return [
        req(prompt=col(1, 2), temperature=col(2, 3)),
        req(prompt=col(3)),
        req(prompt=col(4), temperature=col(3), opt=col(100)),
    ]


def _check_stack_responses(responses):
    assert [r["out"].ravel().tolist() for r in responses] == [[2, 6], [1.5], [112]]
    assert all((r["mbs"] == 8).all() for r in responses)


def test_pytriton_docs_stack():
    calls = []

    @fill_optionals(temperature=np.array([0.5], np.float32))
    @group_by_keys
    @batch
    @group_by_values("temperature")
    @first_value("temperature")
    @triton_context
    def infer(triton_context, prompt, temperature, opt=None):
        calls.append(float(temperature))
        assert np.ndim(temperature) == 0
        return _full_stack_infer(triton_context, prompt, temperature, opt)

    attach(infer, inputs=STACK_INPUTS, max_batch_size=8)
    _check_stack_responses(infer(_stack_requests()))
    assert sorted(calls) == [0.5, 2.0, 3.0, 3.0]


def test_async_stack_on_method():
    class Model:
        @fill_optionals(temperature=np.array([0.5], np.float32))
        @group_by_keys
        @batch
        @group_by_values("temperature")
        @first_value("temperature")
        @triton_context
        async def infer(self, triton_context, prompt, temperature, opt=None):
            await asyncio.sleep(0)
            return _full_stack_infer(triton_context, prompt, temperature, opt)

    model = Model()
    attach(model.infer, inputs=STACK_INPUTS, max_batch_size=8)
    assert inspect.iscoroutinefunction(model.infer)
    _check_stack_responses(run(model.infer(_stack_requests())))


# --------------------------------------------------------------------------- docs


def test_docs_examples_run():
    """Every python block of docs/decorators.md runs, in order, in one namespace."""
    import pathlib
    import re

    page = pathlib.Path(__file__).resolve().parents[2] / "docs" / "decorators.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    assert len(blocks) >= 10
    namespace = {}
    for block in blocks:
        exec(compile(block, str(page), "exec"), namespace)  # noqa: S102 - our own docs


def test_instance_without_its_own_context_does_not_borrow_another():
    bound, unbound = ContextModel(), ContextModel()
    attach(bound.second, model_name="bound")
    with pytest.raises(PyTritonValidationError, match="No Triton context"):
        unbound.second([req(x=col(1))])


def test_sample_and_group_by_keys_on_empty_list():
    assert sample(lambda x: {"y": x})([]) == []
    assert group_by_keys(lambda requests: [])([]) == []


def test_context_found_when_a_wrapper_drops_the_instance():
    def logged(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return function(*args, **kwargs)

        return wrapper

    class Model:
        @batch
        @logged
        @triton_context
        def infer(self, x, triton_context):
            return {"y": np.full((len(x), 1), triton_context.model_config.max_batch_size)}

    model = Model()
    attach(model.infer, max_batch_size=3)
    assert model.infer([req(x=col(1))])[0]["y"][0, 0] == 3


# --------------------------------------------------------------------------- sequence models


def test_request_passing_decorators_keep_each_requests_sequence():
    seen = []

    @group_by_keys
    @fill_optionals(bias=np.array([0], dtype=np.int64))
    def running(requests):
        seen.extend((r.sequence_id, r.sequence_start, r.sequence_end, sorted(r)) for r in requests)
        return [{"y": r["x"]} for r in requests]

    x = np.array([[1]], dtype=np.int64)
    running([
        Request({"x": x}, sequence_id=7, sequence_start=True),
        Request({"x": x, "bias": x}, sequence_id="s", sequence_end=True),
    ])
    assert sorted(seen, key=str) == sorted(
        [(7, True, False, ["bias", "x"]), ("s", False, True, ["bias", "x"])], key=str
    )


def test_group_by_values_on_1d_strings_calls_groups_in_value_order():
    calls = []

    @group_by_values("s")
    def infer(a, s):
        calls.append(s.tolist())
        return {"a": a}

    s = np.array(["t" + "2", "t" + "1", "t" + "2"], dtype=object)
    infer(a=col(1, 2, 3), s=s)
    assert calls == [["t1"], ["t2", "t2"]]

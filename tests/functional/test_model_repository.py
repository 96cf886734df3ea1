"""A user's model repository served next to bound models, in each model-control mode."""

import shutil

import numpy as np
import pytest

from pytriton_like.client import ModelClient
from pytriton_like.exceptions import PyTritonInvalidOperationError, PyTritonModelConfigError, PyTritonValidationError
from pytriton_like.triton import Triton, TritonConfig

from .conftest import free_config, url_of, wait_for
from .handwritten import FLOAT_IN, FLOAT_OUT, NUMPY2, multiply, needs_numpy1, write_model

X = np.array([1.0, 2.0], dtype=np.float32)
_WAIT_S = 60


def infer(config, model):
    with ModelClient(url_of(config, "http"), model, init_timeout_s=30) as client:
        return client.infer_sample(X)["y"].tolist()


def wait_until(condition, what):
    """Polls ``condition`` (the poll mode acts in its own time) for at most _WAIT_S seconds."""
    assert wait_for(condition, _WAIT_S), f"not {what} within {_WAIT_S} s"


@needs_numpy1
def test_none_mode_loads_every_repository_model_and_stop_cleans_an_unloaded_model(tmp_path):
    write_model(tmp_path, "Scale", factor=10)
    write_model(tmp_path, "Tenfold", factor=10, version=3)
    config = free_config()  # model_control_mode defaults to "none"
    with Triton(config=config, model_repository=tmp_path) as triton:
        triton.bind("Mul", multiply(2), FLOAT_IN, FLOAT_OUT)
        triton.run()
        assert infer(config, "Scale") == [10.0, 20.0]
        assert infer(config, "Tenfold") == [10.0, 20.0]
        assert infer(config, "Mul") == [2.0, 4.0]
        triton.unload_model("Mul")  # stop() must still clean its workers (the no_leaks fixture checks)
    assert not list(tmp_path.glob("*/*/relay.json"))  # nothing of ours was written into the user's repository


@needs_numpy1
def test_the_config_model_repository_is_served_too_and_the_constructor_wins(tmp_path):
    write_model(tmp_path / "from_config", "A", factor=1)
    write_model(tmp_path / "given", "B", factor=2)
    config = free_config(model_repository=tmp_path / "from_config")
    with Triton(config=config, model_repository=tmp_path / "given") as triton:
        triton.run()
        assert infer(config, "B") == [2.0, 4.0]
        assert [entry["name"] for entry in triton.get_model_repository_index()] == ["B"]


@needs_numpy1
def test_poll_mode_loads_added_and_changed_models_and_unloads_removed_ones(tmp_path, caplog):
    caplog.set_level("INFO", logger="pytriton_like.models.poller")
    repository = tmp_path / "repository"
    write_model(repository, "First", factor=1)
    config = free_config(model_control_mode="poll", repository_poll_secs=0.2)
    with Triton(config=config, model_repository=repository) as triton:
        triton.bind("Mul", multiply(2), FLOAT_IN, FLOAT_OUT)
        triton.run()
        assert infer(config, "First") == [1.0, 2.0]
        # a folder is written elsewhere and moved in, as a deployment would
        write_model(tmp_path / "staging", "Second", factor=4)
        (tmp_path / "staging" / "Second").rename(repository / "Second")
        wait_until(lambda: triton.is_model_ready("Second"), "loaded")
        assert infer(config, "Second") == [4.0, 8.0]
        write_model(repository, "Second", factor=5, version=2)  # a new version: the model changed
        wait_until(lambda: triton.is_model_ready("Second", 2), "reloaded")
        assert infer(config, "Second") == [5.0, 10.0]
        shutil.rmtree(repository / "First")
        wait_until(lambda: not triton.is_model_ready("First"), "unloaded")
        assert infer(config, "Mul") == [2.0, 4.0]
    assert "model repository: model Second added; loading it" in caplog.text
    assert "model repository: model Second changed; loading it" in caplog.text
    assert "model repository: model First unloaded" in caplog.text


def test_a_broken_config_at_start_names_model_file_and_line(tmp_path):
    write_model(tmp_path, "Good", factor=1)
    write_model(tmp_path, "Broken", factor=1, config='backend: "python"\nmax_batch_size: [ 8 ]\n')
    with pytest.raises(PyTritonModelConfigError) as raised:
        with Triton(config=free_config(), model_repository=tmp_path):  # the server starts here
            pass
    error = raised.value
    assert (error.model_name, error.line) == ("Broken", 2)
    assert error.path == tmp_path / "Broken" / "config.pbtxt"
    assert str(error).startswith(f"model 'Broken': {error.path}, line 2, column ")


@needs_numpy1
def test_name_clashes_and_unknown_startup_models_are_refused_before_start(tmp_path):
    write_model(tmp_path, "Mul", factor=1)
    with Triton(config=free_config(), model_repository=tmp_path) as triton:
        with pytest.raises(PyTritonInvalidOperationError, match="has a model of that name"):
            triton.bind("Mul", multiply(2), FLOAT_IN, FLOAT_OUT)
    config = TritonConfig(model_control_mode="explicit", load_model=["Nope"])
    with pytest.raises(PyTritonValidationError, match=r"load_model names models that are not in .*: Nope \(it has"):
        with Triton(config=config, model_repository=tmp_path):  # checked when the server starts, here
            pass
    with pytest.raises(PyTritonValidationError, match="is not a folder"):
        Triton(model_repository=tmp_path / "missing")


@pytest.mark.skipif(not NUMPY2, reason="the refusal is for numpy 2 in the stub's environment")
def test_a_python_backend_model_is_refused_with_numpy_2_saying_why_and_what_to_do(tmp_path):
    # Served, its outputs would reach the client empty (Triton's stub is built for numpy 1).
    write_model(tmp_path, "Scale", factor=10)
    with pytest.raises(PyTritonModelConfigError) as raised:
        with Triton(config=free_config(), model_repository=tmp_path):  # the server starts here
            pass
    error = raised.value
    assert (error.model_name, error.path) == ("Scale", tmp_path / "Scale" / "config.pbtxt")
    assert f"with numpy {np.__version__}" in str(error)
    assert "install numpy<2 in this environment" in str(error) and "Triton.bind" in str(error)
    # loaded at run time (explicit mode): refused the same way, the server and bound models go on
    config = free_config(model_control_mode="explicit")
    with Triton(config=config, model_repository=tmp_path) as triton:
        triton.bind("Mul", multiply(2), FLOAT_IN, FLOAT_OUT)
        triton.run()
        with pytest.raises(PyTritonModelConfigError, match=r"model 'Scale' .* stub is built for numpy 1"):
            triton.load_model("Scale")
        assert infer(config, "Mul") == [2.0, 4.0]

"""Python-backend models and the numpy of their stub (models/python_models.py)."""

import pytest

from pytriton_like.exceptions import PyTritonModelConfigError
from pytriton_like.model_config.parser import parse_config_text
from pytriton_like.models.python_models import check_stub_numpy

PYTHON = 'name: "M"\nbackend: "python"\n'
OWN_ENVIRONMENT = PYTHON + 'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }\n'


def config(text):
    return parse_config_text("M", text, "/r/M/config.pbtxt")


@pytest.mark.parametrize("version", ["2.0.0", "2.4.6", "3.0.0.dev0"])
def test_a_python_model_with_numpy_2_in_its_stub_is_refused_naming_the_version_and_the_ways_out(version):
    with pytest.raises(PyTritonModelConfigError) as raised:
        check_stub_numpy("M", config(PYTHON), "/r/M/config.pbtxt", numpy_version=version)
    message = str(raised.value)
    assert message.startswith("model 'M' (/r/M/config.pbtxt) runs in Triton's Python backend")
    assert f"numpy {version}" in message
    for way_out in ("pip install 'numpy<2'", "Triton.bind", "EXECUTION_ENV_PATH"):
        assert way_out in message
    assert (raised.value.model_name, raised.value.path) == ("M", "/r/M/config.pbtxt")


@pytest.mark.parametrize(
    "text, version",
    [
        (PYTHON, "1.26.4"),  # the numpy the stub is built for
        (OWN_ENVIRONMENT, "2.4.6"),  # the model brings its own environment
        ('name: "M"\nbackend: "onnxruntime"\n', "2.4.6"),  # no Python in the server
        ('name: "M"\nplatform: "ensemble"\n', "2.4.6"),
    ],
)
def test_other_models_and_numpy_1_pass(text, version):
    check_stub_numpy("M", config(text), "/r/M/config.pbtxt", numpy_version=version)

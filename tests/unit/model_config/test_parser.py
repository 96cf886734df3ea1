"""Hand-written config.pbtxt files are read as tritonserver reads them; errors name model, file and line."""

import pytest

from pytriton_like.exceptions import PyTritonModelConfigError
from pytriton_like.model_config.parser import parse_config_file

GOOD = """name: "scale"
backend: "python"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def model_dir(tmp_path, text, name="scale"):
    folder = tmp_path / name
    folder.mkdir()
    if text is not None:
        (folder / "config.pbtxt").write_text(text)
    return folder


def test_a_good_config_parses_to_triton_message(tmp_path):
    config = parse_config_file(model_dir(tmp_path, GOOD))
    assert config.max_batch_size == 8
    assert [tensor.name for tensor in config.input] == ["x"]


def test_an_unknown_field_is_named_with_its_line_and_column(tmp_path):
    broken = GOOD.replace("max_batch_size: 8", "max_batch_size: 8\n  bogus_field: 1")
    with pytest.raises(PyTritonModelConfigError) as raised:
        parse_config_file(model_dir(tmp_path, broken))
    error = raised.value
    assert (error.model_name, error.line, error.column) == ("scale", 4, 3)
    assert error.path == tmp_path / "scale" / "config.pbtxt"
    assert str(error).startswith(f"model 'scale': {error.path}, line 4, column 3: ")
    assert 'no field named "bogus_field"' in str(error)


def test_a_bad_enum_value_is_named(tmp_path):
    broken = GOOD.replace("TYPE_FP32 dims: [ -1 ] } ]\noutput", "TYPE_FP3 dims: [ -1 ] } ]\noutput")
    with pytest.raises(PyTritonModelConfigError, match=r"line 4, column \d+: .*TYPE_FP3\b"):
        parse_config_file(model_dir(tmp_path, broken))


def test_a_missing_config_is_an_error(tmp_path):
    with pytest.raises(PyTritonModelConfigError, match=r"model 'scale': cannot read .*config.pbtxt") as raised:
        parse_config_file(model_dir(tmp_path, None))
    assert raised.value.line is None


def test_a_config_naming_another_model_is_an_error(tmp_path):
    with pytest.raises(PyTritonModelConfigError, match=r"names the model 'other'; Triton needs the folder's name"):
        parse_config_file(model_dir(tmp_path, GOOD.replace('"scale"', '"other"')))


def test_the_name_may_be_left_out(tmp_path):
    assert parse_config_file(model_dir(tmp_path, GOOD.replace('name: "scale"\n', ""))).name == ""

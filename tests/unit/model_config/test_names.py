"""Model names from outside cannot leave the model repository."""

import pytest

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.model_config.names import check_model_name


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "/abs", "a\\b", "nul\0", "new\nline", "x" * 256, None, 3])
def test_names_that_escape_or_break_paths_are_refused(name):
    with pytest.raises(PyTritonValidationError):
        check_model_name(name)


@pytest.mark.parametrize("name", ["AddSub", "my-model.v2", "résumé", "with space", "x" * 255])
def test_plain_folder_names_pass(name):
    assert check_model_name(name) == name

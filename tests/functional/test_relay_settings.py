"""The relay's backend refuses relay.conf of another settings version, and the load says why."""

import shutil

import numpy as np
import pytest

from pytriton_like.relay.settings import SETTINGS_VERSION
from pytriton_like.exceptions import PyTritonServerError
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton

from .conftest import free_config


def double(requests):
    return [{"y": request["x"] * 2} for request in requests]


def test_a_relay_conf_of_another_version_fails_the_load_with_both_versions_named():
    with Triton(config=free_config()) as triton:
        triton.bind(
            model_name="Double",
            infer_func=double,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=8),
        )
        # Another model that the same workers would serve, but whose relay.conf says version 99.
        repository = triton._workspace.model_repository  # noqa: SLF001 - to write a model entry by hand
        shutil.copytree(repository / "Double", repository / "Other")
        config = repository / "Other" / "config.pbtxt"
        config.write_text(config.read_text().replace('name: "Double"', 'name: "Other"'))
        settings = repository / "Other" / "1" / "relay.conf"
        settings.write_text(settings.read_text().replace(f"version={SETTINGS_VERSION}\n", "version=99\n", 1))
        expected = f"settings version 99, this relay backend reads version {SETTINGS_VERSION}"
        with pytest.raises(PyTritonServerError, match=expected):
            triton.load_model("Other")
        assert triton.is_model_ready("Double")

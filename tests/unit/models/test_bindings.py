"""Bound model versions: one config.pbtxt per name that serves every version; versions must agree."""

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from pytriton_like.exceptions import PyTritonInvalidOperationError, PyTritonValidationError
from pytriton_like.model_config.common import DeviceKind
from pytriton_like.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton_like.models.model import Model
from pytriton_like.models.bindings import BoundModels


def model(version=1, name="M", funcs=1, **fields) -> Model:
    fields.setdefault("inputs", (TensorSpec("x", (-1,), np.float32),))
    fields.setdefault("outputs", (TensorSpec("y", (-1,), np.float32),))
    config = TritonModelConfig(model_name=name, model_version=version, instance_group={DeviceKind.KIND_CPU: funcs}, **fields)
    return Model(config, [print] * funcs, strict=False, tag=f"{name}{version}")


def versions(models: BoundModels, name: str) -> list:
    return sorted(bound.version for bound in models if bound.name == name)


def test_versions_of_a_name_share_one_config_listing_them(tmp_path):
    models = BoundModels()
    for version in (2, 1):
        models.add(model(version))
    models.add(model(name="Other"))
    assert models.names() == ["M", "Other"]
    assert versions(models, "M") == [1, 2]
    assert sorted((m.name, m.version) for m in models) == [("M", 1), ("M", 2), ("Other", 1)]
    models.write_config(tmp_path, "M")
    config = text_format.Parse((tmp_path / "M" / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    assert list(config.version_policy.specific.versions) == [1, 2]


def test_the_same_name_and_version_twice_is_refused():
    models = BoundModels()
    models.add(model(1))
    with pytest.raises(PyTritonInvalidOperationError, match="model 'M' version 1 is bound already"):
        models.add(model(1))


@pytest.mark.parametrize(
    "fields, differs",
    [
        ({"outputs": (TensorSpec("z", (-1,), np.float32),)}, "outputs"),
        ({"max_batch_size": 8}, "max_batch_size"),
        ({"funcs": 2}, "instance_group"),
    ],
)
def test_a_version_with_another_config_is_refused(fields, differs):
    models = BoundModels()
    models.add(model(1))
    with pytest.raises(PyTritonValidationError, match=f"model 'M' version 2: .*version 1 differs in {differs}$"):
        models.add(model(2, **fields))
    assert versions(models, "M") == [1]


def test_removing_the_last_version_removes_the_folder(tmp_path):
    models = BoundModels()
    only = model(1)
    models.add(only)
    models.write_config(tmp_path, "M")
    models.remove(only)
    models.write_config(tmp_path, "M")
    assert "M" not in models
    assert not (tmp_path / "M").exists()

"""Model repositories on S3, against a real S3-compatible server (moto's) on loopback."""

import logging

import boto3
import numpy as np
import pytest
from moto.server import ThreadedMotoServer

from pytriton_like.client import ModelClient
from pytriton_like.exceptions import PyTritonModelConfigError, PyTritonServerError, PyTritonValidationError
from pytriton_like.model_config import ModelConfig
from pytriton_like.triton import Triton, TritonConfig

from .conftest import free_config, free_port, port_listening, url_of, wait_for
from .handwritten import CONFIG_PBTXT, FLOAT_IN, FLOAT_OUT, INSTANCES, MODEL_PY, needs_numpy1

BUCKET = "models"


@pytest.fixture
def s3(monkeypatch):
    """A moto S3 server on 127.0.0.1 with bucket ``models``, the AWS variables pointing at it; stopped after."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        client = boto3.client("s3", endpoint_url=f"http://{host}:{port}")
        client.create_bucket(Bucket=BUCKET)
        yield Bucket(client, host, port)
    finally:
        server.stop()
        assert not port_listening(port), "the moto server still listens"


class Bucket:
    """The test bucket: write hand-written models into it."""

    def __init__(self, client, host: str, port: int):
        self.client, self.host, self.port = client, host, port

    def url(self, path: str = "repository", form: str = "") -> str:
        """tritonserver's URL of ``path`` in the bucket; ``form`` is "" or "http://"."""
        return f"s3://{form}{self.host}:{self.port}/{BUCKET}/{path}"

    def put_model(self, name: str, factor: float, path: str = "repository", config: str = None) -> None:
        if config is None:
            config = CONFIG_PBTXT.format(name=name, runs='backend: "python"', more=INSTANCES)
        self.client.put_object(Bucket=BUCKET, Key=f"{path}/{name}/config.pbtxt", Body=config.encode())
        self.client.put_object(Bucket=BUCKET, Key=f"{path}/{name}/1/model.py", Body=MODEL_PY.format(factor=factor).encode())

    def delete_model(self, name: str, path: str = "repository") -> None:
        listed = self.client.list_objects_v2(Bucket=BUCKET, Prefix=f"{path}/{name}/")
        for entry in listed.get("Contents", ()):
            self.client.delete_object(Bucket=BUCKET, Key=entry["Key"])


def double(requests):
    return [{"y": r["x"] * 2} for r in requests]


def infer(config, model: str, protocol: str = "http"):
    with ModelClient(url_of(config, protocol), model, init_timeout_s=30) as client:
        return client.infer_batch(np.ones((1, 2), np.float32))["y"].tolist()


@needs_numpy1
@pytest.mark.parametrize("form", ["", "http://"])
def test_models_served_from_s3_next_to_bound_ones(s3, form):
    s3.put_model("Triple", 3.0)
    s3.put_model("Half", 0.5)
    config = free_config()
    with Triton(config=config, model_repository=s3.url(form=form)) as triton:
        triton.bind(model_name="Double", infer_func=double, inputs=FLOAT_IN, outputs=FLOAT_OUT,
                    config=ModelConfig(max_batch_size=8))
        triton.run()
        assert infer(config, "Triple") == [[3.0, 3.0]]
        assert infer(config, "Half", "grpc") == [[0.5, 0.5]]
        assert infer(config, "Double") == [[2.0, 2.0]]
        names = {entry["name"] for entry in triton.get_model_repository_index()}
        assert {"Triple", "Half", "Double"} <= names


@needs_numpy1
def test_repository_from_the_environment_and_explicit_mode(s3, monkeypatch):
    s3.put_model("Triple", 3.0, path="a/b")
    s3.put_model("Half", 0.5, path="a/b")
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_MODEL_REPOSITORY", s3.url("a/b"))
    config = free_config(model_control_mode="explicit", load_model=["Triple"])
    with Triton(config=config) as triton:
        triton.run()
        assert triton.is_model_ready("Triple") and not triton.is_model_ready("Half")
        triton.load_model("Half")
        assert infer(config, "Half") == [[0.5, 0.5]]


@needs_numpy1
def test_poll_mode_picks_up_models_added_changed_and_removed(s3):
    s3.put_model("Triple", 3.0)
    config = free_config(model_control_mode="poll", repository_poll_secs=0.3)
    with Triton(config=config, model_repository=s3.url()) as triton:
        triton.run()
        assert infer(config, "Triple") == [[3.0, 3.0]]
        s3.put_model("Added", 5.0)
        assert wait_for(lambda: triton.is_model_ready("Added"), 30)
        assert infer(config, "Added") == [[5.0, 5.0]]
        s3.put_model("Triple", 7.0)  # changed: reloaded
        assert wait_for(lambda: infer(config, "Triple") == [[7.0, 7.0]], 30)
        s3.delete_model("Added")
        assert wait_for(lambda: not triton.is_model_ready("Added"), 30)


def test_a_broken_config_in_s3_is_named_before_the_server_starts(s3):
    s3.put_model("Broken", 1.0, config='name: "Broken"\nbackend: "python"\nnme: "x"\n')
    # entering the with block starts the server (as in PyTriton)
    with pytest.raises(PyTritonModelConfigError, match=r"model 'Broken': s3://.*/Broken/config.pbtxt, line 3"):
        with Triton(config=free_config(), model_repository=s3.url()):
            pass


def test_an_unreachable_repository_fails_the_start_naming_the_url_and_the_reason(s3):
    closed = free_port()
    url = f"s3://127.0.0.1:{closed}/{BUCKET}/repository"
    with pytest.raises(PyTritonServerError, match=rf"cannot read model repository {url}: .*Could not connect"):
        with Triton(config=free_config(), model_repository=url):
            pass
    missing = s3.url().replace(f"/{BUCKET}/", "/no-such-bucket/")
    with pytest.raises(PyTritonServerError, match=rf"cannot read model repository {missing}: NoSuchBucket"):
        with Triton(config=free_config(), model_repository=missing):
            pass


def test_malformed_s3_urls_are_refused_at_once():
    with pytest.raises(PyTritonValidationError, match=r"not an S3 URL tritonserver takes"):
        Triton(model_repository="s3://Bad_Bucket!/x")
    config = TritonConfig.from_env({"PYTRITON_TRITON_CONFIG_MODEL_REPOSITORY": "s3://bucket/path"})
    assert config.model_repository == "s3://bucket/path"  # a Path would have folded the "//"

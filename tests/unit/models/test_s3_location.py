"""S3 model-repository URLs: the forms tritonserver takes, parsed as it parses them."""

import pytest

from pytriton_like.exceptions import PyTritonServerError, PyTritonValidationError
from pytriton_like.models.s3_repository import S3Location, is_s3_url
from pytriton_like.models.user_repository import repository_location


@pytest.mark.parametrize(
    "url, endpoint, bucket, prefix",
    [
        ("s3://bucket", None, "bucket", ""),
        ("s3://bucket/", None, "bucket", ""),
        ("s3://my-bucket.v2/path/to/repo", None, "my-bucket.v2", "path/to/repo/"),
        ("s3://bucket//a//b/", None, "bucket", "a/b/"),
        ("s3://127.0.0.1:9000/models/repo", "http://127.0.0.1:9000", "models", "repo/"),
        ("s3://http://minio.local:9000/models", "http://minio.local:9000", "models", ""),
        ("s3://https://minio.local:443/models/a/b", "https://minio.local:443", "models", "a/b/"),
    ],
)
def test_forms(url, endpoint, bucket, prefix):
    assert S3Location.parse(url) == S3Location(url=url, endpoint_url=endpoint, bucket=bucket, prefix=prefix)


@pytest.mark.parametrize("url", ["s3://", "s3://Upper/x", "s3://host:port/b", "s3://ftp://h:1/b"])
def test_malformed(url):
    with pytest.raises(PyTritonValidationError, match="not an S3 URL tritonserver takes"):
        S3Location.parse(url)


def test_locations_stay_strings_only_for_s3():
    assert is_s3_url("s3://b/p") and not is_s3_url("/srv/s3://x") and not is_s3_url(None)
    assert repository_location("s3://b/p") == "s3://b/p"
    assert str(repository_location("relative/dir")) == "relative/dir"


class _Repository:
    def __init__(self, path):
        self.path = path


def test_a_start_failure_blaming_s3_names_the_repository_url():
    from pytriton_like.models.s3_repository import name_remote_repository as _name_remote_repository  # noqa: PLC0415

    error = PyTritonServerError(
        "tritonserver exited with code 1 while starting: error: creating server: Internal - "
        "Unable to create S3 filesystem client. Check account credentials.",
        log_tail="line 1\nline 2",
    )
    named = _name_remote_repository(error, _Repository("s3://127.0.0.1:9/models/repo"))
    assert str(named).startswith(
        "tritonserver could not read model repository s3://127.0.0.1:9/models/repo: tritonserver exited with code 1"
    )
    assert named.log_tail == "line 1\nline 2" and str(named).count("tail of the tritonserver log") == 1
    assert _name_remote_repository(error, _Repository("/srv/models")) is error
    other = PyTritonServerError("tritonserver exited with code 1 while starting: port taken")
    assert _name_remote_repository(other, _Repository("s3://b/p")) is other

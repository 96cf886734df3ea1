"""A model repository on S3 (``s3://...``): tritonserver reads it itself; we list it for our checks and poll mode.

tritonserver takes the URL as its ``--model-repository`` and downloads each model it loads.
pytriton_like lists the same objects with boto3 (the optional extra ``pytriton_like[s3]``) to
know the models, check their config.pbtxt before a load, and watch the bucket in poll mode.
Both read the credentials from the usual AWS environment variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_DEFAULT_REGION``).

URL forms, as tritonserver takes them:

- ``s3://bucket/path/to/repository`` — AWS S3;
- ``s3://host:port/bucket/path`` — an S3-compatible server (MinIO, Ceph...) over HTTP, or
  ``s3://https://host:port/bucket/path`` over HTTPS (``s3://http://host:port/...`` too).
"""

import dataclasses
import logging
import re
from typing import Any, Dict, List, Optional, Tuple

from ..exceptions import PyTritonModelConfigError, PyTritonServerError, PyTritonValidationError
from ..model_config.names import check_model_name
from ..model_config.parser import CONFIG_FILE_NAME, parse_config_text
from .folder_names import IGNORED, model_names
from .python_models import check_stub_numpy

__all__ = ["S3_PREFIX", "S3Location", "S3ModelRepository", "is_s3_url", "name_remote_repository"]

logger = logging.getLogger(__name__)

S3_PREFIX = "s3://"
# tritonserver's form of a custom endpoint: s3://[http://|https://]host:port/bucket[/path]
_ENDPOINT_URL = re.compile(r"^s3://(http://|https://)?([0-9a-zA-Z\-.]+):([0-9]+)/([0-9a-z.\-]+)(/.*)?$")
_AWS_URL = re.compile(r"^s3://([0-9a-z.\-]+)(/.*)?$")


def is_s3_url(location: Any) -> bool:
    """Whether ``location`` (a model repository) is an ``s3://`` URL."""
    return isinstance(location, str) and location.startswith(S3_PREFIX)


@dataclasses.dataclass(frozen=True)
class S3Location:
    """Where an ``s3://`` URL points: the endpoint (None: AWS), the bucket, and the key prefix of the repository."""

    url: str
    endpoint_url: Optional[str]
    bucket: str
    prefix: str  # "" or "path/to/repository/"

    @classmethod
    def parse(cls, url: str) -> "S3Location":
        """Raises PyTritonValidationError for a URL tritonserver would not take."""
        match = _ENDPOINT_URL.match(url)
        if match:
            scheme, host, port, bucket, path = match.groups()
            endpoint = f"{scheme or 'http://'}{host}:{port}"
        else:
            match = _AWS_URL.match(url)
            if not match:
                raise PyTritonValidationError(
                    f"model repository {url!r} is not an S3 URL tritonserver takes: use s3://bucket/path, "
                    "s3://host:port/bucket/path or s3://https://host:port/bucket/path"
                )
            endpoint = None
            bucket, path = match.groups()
        parts = [part for part in (path or "").split("/") if part]
        return cls(url=url, endpoint_url=endpoint, bucket=bucket, prefix="".join(f"{part}/" for part in parts))


class S3ModelRepository:
    """The interface of :class:`~pytriton_like.models.user_repository.ModelRepository` over an S3 prefix.

    Nothing is read at construction; each call lists the bucket.

    Args:
        url: the ``s3://`` URL.

    Raises:
        PyTritonValidationError: a malformed URL, or boto3 is not installed.
    """

    def __init__(self, url: str):
        self.location = S3Location.parse(url)
        self.path = url  # what tritonserver is given as --model-repository
        try:
            import boto3  # noqa: PLC0415 - an optional extra, needed only for S3 repositories
        except ImportError:
            raise PyTritonValidationError(
                f"model repository {url}: S3 repositories need boto3: pip install boto3 (or pytriton_like's [s3] extra)"
            ) from None
        from botocore.config import Config  # noqa: PLC0415 - boto3's own dependency

        # an unreachable endpoint fails the start within seconds, not after botocore's many retries
        config = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2, "mode": "standard"})
        self._client = boto3.session.Session().client("s3", endpoint_url=self.location.endpoint_url, config=config)

    def names(self) -> List[str]:
        """The models in the repository (its "folders", but hidden ones and bad names), sorted.

        Raises:
            PyTritonServerError: the bucket cannot be listed (unreachable, no such bucket, no
                access); the message names the URL and the reason.
        """
        folders = [
            entry["Prefix"][len(self.location.prefix) :].rstrip("/")
            for page in self._pages(Prefix=self.location.prefix, Delimiter="/")
            for entry in page.get("CommonPrefixes", ())
        ]
        return model_names(folders, self.path)

    def __contains__(self, name: str) -> bool:
        return name in self.names()

    def check(self, name: str) -> None:
        """Parse ``name``'s config.pbtxt as Triton will.

        Raises:
            PyTritonModelConfigError: the object is missing or broken (the message names the model,
                the URL and the line), or the model needs numpy<2 (python_models.py).
        """
        check_model_name(name)
        key = f"{self.location.prefix}{name}/{CONFIG_FILE_NAME}"
        url = f"{self.path.rstrip('/')}/{name}/{CONFIG_FILE_NAME}"
        try:
            body = self._client.get_object(Bucket=self.location.bucket, Key=key)["Body"].read()
            text = body.decode("utf-8")
        except Exception as exc:  # noqa: BLE001 - botocore's errors have no common base but Exception
            raise PyTritonModelConfigError(
                f"model {name!r}: cannot read {url}: {_reason(exc)}", model_name=name, path=url
            ) from None
        check_stub_numpy(name, parse_config_text(name, text, url), url)

    def fingerprint(self, name: str) -> Tuple[Tuple[str, int, str], ...]:
        """What the objects of model ``name`` look like now: (key in the model, size, ETag) of each."""
        return self.snapshot(f"{name}/").get(name, ())

    def snapshot(self, under: str = "") -> Dict[str, Tuple[Tuple[str, int, str], ...]]:
        """Every model's fingerprint, from one listing of the repository (or of ``under`` in it)."""
        files: Dict[str, List[Tuple[str, int, str]]] = {}
        for page in self._pages(Prefix=self.location.prefix + under):
            for entry in page.get("Contents", ()):
                relative = entry["Key"][len(self.location.prefix) :]
                name, _, rest = relative.partition("/")
                if not rest or name.startswith(".") or name in IGNORED or IGNORED & set(rest.split("/")):
                    continue
                files.setdefault(name, []).append((rest, entry["Size"], entry.get("ETag", "")))
        valid = set(self.names()) if not under else {under.rstrip("/")}
        return {name: tuple(sorted(entries)) for name, entries in files.items() if name in valid}

    def _pages(self, **kwargs: Any):
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            yield from paginator.paginate(Bucket=self.location.bucket, **kwargs)
        except Exception as exc:  # noqa: BLE001 - botocore's errors have no common base but Exception
            raise PyTritonServerError(f"cannot read model repository {self.path}: {_reason(exc)}") from None

    def __repr__(self) -> str:
        return f"S3ModelRepository({self.path!r})"


def _reason(exc: BaseException) -> str:
    """botocore's error in words: the S3 error code and message, or the connection failure."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        return f"{error.get('Code', type(exc).__name__)}: {error.get('Message') or exc}"
    return f"{type(exc).__name__}: {exc}"


def name_remote_repository(error: PyTritonServerError, repository) -> PyTritonServerError:
    """A start failure of a server with an S3 repository whose log blames S3: the error names the URL."""
    path = getattr(repository, "path", None)
    if not (is_s3_url(path) and "S3" in str(error)):
        return error
    message = str(error).split(PyTritonServerError.TAIL_HEADER, 1)[0]
    return PyTritonServerError(f"tritonserver could not read model repository {path}: {message}", log_tail=error.log_tail)

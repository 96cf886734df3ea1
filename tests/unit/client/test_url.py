"""Server url parsing."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytriton_like.client.exceptions import PyTritonClientInvalidUrlError
from pytriton_like.client.url import Protocol, TritonUrl


@pytest.mark.parametrize(
    "url, expected",
    [
        ("localhost", (Protocol.HTTP, "localhost", 8000)),
        ("localhost:8000", (Protocol.HTTP, "localhost", 8000)),
        ("localhost:9000", (Protocol.HTTP, "localhost", 9000)),
        ("http://localhost", (Protocol.HTTP, "localhost", 8000)),
        ("http://example.com:1234", (Protocol.HTTP, "example.com", 1234)),
        ("HTTP://Host:1234/", (Protocol.HTTP, "host", 1234)),
        ("grpc://localhost", (Protocol.GRPC, "localhost", 8001)),
        ("grpc://127.0.0.1:18101", (Protocol.GRPC, "127.0.0.1", 18101)),
        ("GRPC://10.0.0.1", (Protocol.GRPC, "10.0.0.1", 8001)),
        ("[::1]:9000", (Protocol.HTTP, "::1", 9000)),
        ("grpc://[::1]", (Protocol.GRPC, "::1", 8001)),
        ("  localhost  ", (Protocol.HTTP, "localhost", 8000)),
    ],
)
def test_parse(url, expected):
    parsed = TritonUrl.from_url(url)
    assert (parsed.protocol, parsed.hostname, parsed.port) == expected


def test_forms():
    url = TritonUrl.from_url("grpc://example.com")
    assert url.scheme == "grpc"
    assert url.without_scheme == "example.com:8001"
    assert url.with_scheme == str(url) == "grpc://example.com:8001"
    assert TritonUrl.from_url("[::1]").without_scheme == "[::1]:8000"


@pytest.mark.parametrize(
    "url",
    [
        "https://localhost",
        "ftp://localhost:8000",
        "unix:///tmp/socket",
        "",
        "http://",
        "localhost:notaport",
        "localhost:70000",
        "localhost:0",
        "localhost:8000/v2",
        "http://user:secret@localhost",
        "localhost?x=1",
    ],
)
def test_invalid(url):
    with pytest.raises(PyTritonClientInvalidUrlError) as info:
        TritonUrl.from_url(url)
    assert repr(url) in info.value.message


@pytest.mark.parametrize("url", [None, 8000, b"localhost"])
def test_not_a_string(url):
    with pytest.raises(PyTritonClientInvalidUrlError, match="must be a string"):
        TritonUrl.from_url(url)


_HOSTS = st.from_regex(r"[a-z][a-z0-9\-]{0,20}(\.[a-z][a-z0-9\-]{0,10}){0,3}", fullmatch=True)


@given(host=_HOSTS, port=st.integers(1, 65535), scheme=st.sampled_from(["http", "grpc"]))
def test_round_trip(host, port, scheme):
    url = TritonUrl.from_url(f"{scheme}://{host}:{port}")
    assert url.with_scheme == f"{scheme}://{host}:{port}"
    assert TritonUrl.from_url(url.with_scheme) == url
    assert TritonUrl.from_url(url.without_scheme).protocol is Protocol.HTTP

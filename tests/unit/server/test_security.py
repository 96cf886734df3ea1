"""TritonSecurityConfig (PyTriton 0.7.0's semantics) and the flags it gives tritonserver."""

import logging
import pathlib
import subprocess

import pytest

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.server.command_line import server_argv
from pytriton_like.server.config import TritonConfig
from pytriton_like.server.security import (
    DEFAULT_RESTRICTED_ENDPOINTS,
    VALID_ENDPOINTS,
    TritonSecurityConfig,
    check_restriction_overlap,
    hide_token_environment,
    restriction_value,
)


def test_default_restricts_what_changes_the_server_with_a_random_token():
    first, second = TritonSecurityConfig(), TritonSecurityConfig()
    assert first.restricted_endpoints == ["shared-memory", "model-repository", "statistics", "trace", "logging"]
    assert len(first.access_token) >= 40 and first.access_token != second.access_token


def test_empty_list_restricts_nothing_and_makes_no_token():
    security = TritonSecurityConfig(restricted_endpoints=[])
    assert security.restricted_endpoints == [] and security.access_token is None
    assert restriction_value(security) is None


def test_unknown_endpoint_names_are_refused_with_the_valid_ones():
    with pytest.raises(PyTritonValidationError, match=r"Invalid endpoint names: nope\. Valid endpoints are: health, "):
        TritonSecurityConfig(restricted_endpoints=["statistics", "nope"])


@pytest.mark.parametrize("token", ["", "a,b", "a:b", "a=b", "a b", "a\tb", "a\x01b", "tök", "t" * 1025, 12])
def test_a_token_the_flag_cannot_carry_is_refused(token):
    with pytest.raises(PyTritonValidationError, match="access_token"):
        TritonSecurityConfig(access_token=token)


def test_a_token_of_1024_printable_characters_is_taken():
    token = 'q"\\/' + "t" * 1020
    assert TritonSecurityConfig(access_token=token).access_token == token


def test_the_flag_value_names_the_groups_header_and_token():
    security = TritonSecurityConfig(access_token="tok", restricted_endpoints=["statistics", "model-repository"])
    assert restriction_value(security) == "statistics,model-repository:triton-access-token=tok"


def test_every_valid_name_is_a_triton_api_group_and_the_defaults_are_valid():
    assert set(DEFAULT_RESTRICTED_ENDPOINTS) <= VALID_ENDPOINTS
    assert TritonSecurityConfig(restricted_endpoints=sorted(VALID_ENDPOINTS)).restricted


def test_server_argv_restricts_http_and_grpc_alike():
    argv = server_argv(
        TritonConfig(),
        binary=pathlib.Path("tritonserver"),
        model_repositories=[pathlib.Path("repo")],
        backend_directory=pathlib.Path("backends"),
        cache_directory=pathlib.Path("caches"),
        startup_models=[],
        restriction="statistics:triton-access-token=tok",
    )
    assert "--http-restricted-api=statistics:triton-access-token=tok" in argv
    assert "--grpc-restricted-protocol=statistics:triton-access-token=tok" in argv


def test_a_group_restricted_in_both_places_is_refused():
    config = TritonConfig(http_restricted_api="statistics,health:my-header=x")
    with pytest.raises(PyTritonValidationError, match="restricts statistics, which TritonSecurityConfig"):
        check_restriction_overlap(config, TritonSecurityConfig())
    check_restriction_overlap(config, TritonSecurityConfig(restricted_endpoints=["logging"]))


def test_restriction_off_warns_naming_what_is_open(caplog):
    with caplog.at_level(logging.WARNING):
        TritonSecurityConfig(restricted_endpoints=["statistics"]).warn_if_open()
    assert "model-repository" in caplog.text and "run code on this host" in caplog.text
    caplog.clear()
    TritonSecurityConfig().warn_if_open()
    assert caplog.text == ""


def test_the_token_hiding_library_comes_after_what_is_preloaded_already():
    env = hide_token_environment({"LD_PRELOAD": "/lib/libasan.so /lib/libubsan.so", "PATH": "/bin"})
    preload = env["LD_PRELOAD"].split()
    assert preload[:2] == ["/lib/libasan.so", "/lib/libubsan.so"]  # a sanitizer runtime must stay first
    assert pathlib.Path(preload[2]).name == "libpytriton_like_hide_token.so" and pathlib.Path(preload[2]).exists()
    assert env["PATH"] == "/bin"
    assert hide_token_environment({})["LD_PRELOAD"] == preload[2]


def test_the_preloaded_library_hides_the_token_from_proc_but_not_from_main():
    # sh prints the argument it parsed, then its own /proc/<pid>/cmdline (what `ps` shows)
    script = 'printf "%s\\n" "$1" "$2"; cat /proc/$$/cmdline'
    env = hide_token_environment({"PATH": "/usr/bin:/bin"})
    secret = "logging:triton-access-token=s3cret-Token"
    out = subprocess.run(["sh", "-c", script, "sh", secret, "--other=kept"], env=env, capture_output=True,
                         check=True, text=True).stdout
    parsed, other, cmdline = out.split("\n", 2)
    assert (parsed, other) == (secret, "--other=kept")
    args = cmdline.split("\0")
    assert "logging:triton-access-token=" + "x" * len("s3cret-Token") in args and "--other=kept" in args
    assert "s3cret" not in cmdline

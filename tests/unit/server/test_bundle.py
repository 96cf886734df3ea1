"""Finding a Triton install (server/bundle.py): the shipped one, or a folder laid out as /opt/tritonserver."""

import sys

import pytest

from pytriton_like.exceptions import PyTritonServerError
from pytriton_like.server.bundle import (
    BUNDLED_HOME, MALLOC_TUNABLES, find_bundle, find_install, shipped_stub_versions, stub_python,
)

THIS = f"{sys.version_info.major}.{sys.version_info.minor}"


def install(home, stub_links=None):
    """A fake Triton install at ``home``; its Python backend's stub links libpython<stub_links>."""
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "tritonserver").write_bytes(b"\x7fELF")
    (home / "lib").mkdir()
    (home / "backends" / "python").mkdir(parents=True)
    (home / "backends" / "onnxruntime").mkdir()
    (home / "caches").mkdir()
    if stub_links:
        (home / "backends" / "python" / "triton_python_backend_stub").write_bytes(
            b"\x7fELF...libpython" + stub_links.encode() + b".so.1.0\x00..."
        )
    return home


def test_the_shipped_server_has_a_stub_for_this_python_and_names_the_wheel_it_came_from():
    bundle = find_bundle()
    assert bundle.bundled and bundle.home == BUNDLED_HOME
    assert bundle.stub == BUNDLED_HOME / "python_backend_stubs" / THIS / "triton_python_backend_stub"
    assert bundle.source.startswith("nvidia_pytriton-0.7.0-") and bundle.source.endswith(".whl")
    assert stub_python(bundle.stub) == THIS
    assert {"3.9", "3.10", "3.11", "3.12", "3.13"} <= set(shipped_stub_versions(bundle))


def test_a_containers_stub_is_used_when_it_is_built_for_this_python(tmp_path):
    bundle = find_install(install(tmp_path / "tritonserver", stub_links=THIS))
    assert not bundle.bundled and bundle.source == str(tmp_path / "tritonserver")
    assert bundle.stub == tmp_path / "tritonserver" / "backends" / "python" / "triton_python_backend_stub"
    assert [path.name for path in bundle.other_backends()] == ["onnxruntime"]
    assert bundle.library_path()[-1] == str(tmp_path / "tritonserver" / "lib")


@pytest.mark.parametrize("stub_links", ["2.7", None])
def test_without_a_stub_for_this_python_the_install_still_serves_bound_models(tmp_path, stub_links):
    bundle = find_install(install(tmp_path / "tritonserver", stub_links=stub_links))
    assert bundle.stub is None
    assert shipped_stub_versions(bundle) == []


def test_a_folder_without_the_server_is_refused_naming_what_is_missing(tmp_path):
    home = install(tmp_path / "tritonserver")
    (home / "bin" / "tritonserver").unlink()
    with pytest.raises(PyTritonServerError, match=r"has no .*bin/tritonserver; .*TRITON_HOME.*/opt/tritonserver"):
        find_install(home)


def test_tritonserver_gets_the_malloc_settings_unless_the_environment_sets_glibc_tunables():
    bundle = find_bundle()
    assert bundle.server_environment({"PATH": "/usr/bin"})["GLIBC_TUNABLES"] == MALLOC_TUNABLES
    for own in ("glibc.malloc.arena_max=1", ""):  # empty: glibc's defaults
        assert bundle.server_environment({"PATH": "/usr/bin", "GLIBC_TUNABLES": own})["GLIBC_TUNABLES"] == own

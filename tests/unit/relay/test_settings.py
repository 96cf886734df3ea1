"""relay.conf: the typed, versioned settings a model version's relay reads (native/settings.c)."""

import dataclasses
import pathlib
import re

import pytest

from pytriton_like.relay.settings import SETTINGS_FILE, SETTINGS_VERSION, RelaySettings

NATIVE = pathlib.Path(__file__).resolve().parents[3] / "native"


def test_the_file_starts_with_its_version_and_names_each_instance_socket(tmp_path):
    settings = RelaySettings(owner_pid=42, sockets=("/tmp/a.sock", "/tmp/b.sock"), decoupled=True, in_flight=2)
    path = settings.write(tmp_path)
    assert path == tmp_path / SETTINGS_FILE
    lines = path.read_text().splitlines()
    assert lines[0] == f"version={SETTINGS_VERSION}"
    assert "owner_pid=42" in lines and "decoupled=1" in lines and "sequence=0" in lines and "in_flight=2" in lines
    assert lines[-2:] == ["socket.0=/tmp/a.sock", "socket.1=/tmp/b.sock"]


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        RelaySettings(owner_pid=1, sockets=()).spin_us = 5  # type: ignore[misc]


def test_every_field_is_a_key_the_backend_reads():
    source = (NATIVE / "settings.c").read_text()
    for field in dataclasses.fields(RelaySettings):
        if field.name != "sockets":
            assert f'"{field.name}"' in source, f"native/settings.c does not read {field.name}"


def test_python_and_the_backend_agree_on_the_version():
    header = (NATIVE / "settings.h").read_text()
    assert int(re.search(r"#define SETTINGS_VERSION (\d+)", header).group(1)) == SETTINGS_VERSION

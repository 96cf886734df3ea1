"""The owner-only token files that let this user's clients on this host find a server's token."""

import os
import stat

import pytest

from pytriton_like import access_tokens


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path / "pytriton_like"


def test_written_token_is_read_back_from_an_owner_only_file(runtime_dir):
    path = access_tokens.write_token(54321, "secret")
    assert access_tokens.read_token(54321) == "secret"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(runtime_dir).st_mode) == 0o700


def test_a_token_of_a_dead_owner_is_not_used():
    access_tokens.write_token(54322, "stale", owner_pid=2**22 + 12345)
    assert access_tokens.read_token(54322) is None


def test_writing_a_token_removes_the_files_of_dead_owners(runtime_dir):
    # a serving process killed with SIGKILL cannot remove its file; the next server start does
    access_tokens.write_token(54324, "stale", owner_pid=2**22 + 12345)
    access_tokens.write_token(54325, "alive", owner_pid=1)
    access_tokens.write_token(54326, "mine")
    assert sorted(path.name for path in runtime_dir.iterdir()) == ["port-54325.token", "port-54326.token"]


def test_remove_only_removes_its_own_token():
    access_tokens.write_token(54323, "theirs", owner_pid=1)
    access_tokens.remove_token(54323)
    assert access_tokens.read_token(54323) == "theirs"
    access_tokens.remove_token(54323, owner_pid=1)
    assert access_tokens.read_token(54323) is None


def test_the_folder_goes_with_the_last_token(runtime_dir):
    access_tokens.write_token(54327, "first")
    access_tokens.write_token(54328, "second")
    access_tokens.remove_token(54327)
    assert runtime_dir.is_dir()  # the other server's token is in it
    access_tokens.remove_token(54328)
    assert not runtime_dir.exists()
    assert access_tokens.write_token(54329, "again").parent == runtime_dir  # made anew


def test_the_reaper_removes_a_dead_servers_tokens_and_the_folder(runtime_dir):
    access_tokens.write_token(54330, "killed", owner_pid=2**22 + 12345)
    access_tokens.write_token(54331, "exited, not reaped yet", owner_pid=os.getppid())  # alive to kill(pid, 0)
    access_tokens.remove_stale_tokens(os.getppid())
    assert not runtime_dir.exists()


def test_without_an_xdg_runtime_dir_tokens_stay_in_ram(monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    folder = access_tokens._folder()  # noqa: SLF001 - where, without touching the real folder
    assert folder.name == f"pytriton_like_tokens-{os.getuid()}"
    assert str(folder.parent) == ("/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp")
    assert not folder.name.startswith("pytriton_like-")  # the relay's /dev/shm segment prefix


def test_a_folder_open_to_others_is_not_used(runtime_dir, caplog):
    runtime_dir.mkdir(mode=0o755)
    runtime_dir.chmod(0o755)
    assert access_tokens.write_token(54324, "secret") is None
    assert access_tokens.read_token(54324) is None
    assert "only you can open" in caplog.text


@pytest.mark.parametrize("host, local", [
    ("localhost", True), ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", True), ("10.0.0.7", False), ("example.com", False),
])
def test_local_hosts_are_known_without_a_lookup(host, local):
    assert access_tokens.is_local_host(host) is local

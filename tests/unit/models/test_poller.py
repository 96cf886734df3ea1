"""The poll mode's scan of the user's repository: new and changed models load, removed ones unload."""

import os
import shutil
import threading

import pytest

from pytriton_like.exceptions import PyTritonServerError, PyTritonValidationError
from pytriton_like.models.poller import RepositoryPoller
from pytriton_like.models.user_repository import ModelRepository


def add_model(root, name, text="backend: \"python\"\n"):
    (root / name / "1").mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(text)
    (root / name / "1" / "model.py").write_text("class TritonPythonModel: pass\n")


class Recorder:
    def __init__(self, fail=()):
        self.calls = []
        self.fail = set(fail)

    def load(self, name):
        self.calls.append(("load", name))
        if name in self.fail:
            raise PyTritonServerError(f"cannot load {name}")

    def unload(self, name):
        self.calls.append(("unload", name))


def poller(root, recorder, known=None):
    repository = ModelRepository(root)
    known = repository.snapshot() if known is None else known
    return RepositoryPoller(repository, 60, recorder.load, recorder.unload, known)


def test_new_changed_and_removed_models(tmp_path):
    add_model(tmp_path, "a")
    add_model(tmp_path, "b")
    recorder = Recorder()
    watcher = poller(tmp_path, recorder)
    watcher.poll()
    assert recorder.calls == []  # nothing changed since start
    add_model(tmp_path, "c")
    config = tmp_path / "a" / "config.pbtxt"
    config.write_text("backend: \"python\"\nmax_batch_size: 2\n")
    os.utime(config, ns=(1, 1))  # a change the size alone would not show
    (tmp_path / "b" / "1" / "model.py").unlink()
    watcher.poll()
    assert recorder.calls == [("load", "a"), ("load", "b"), ("load", "c")]
    recorder.calls.clear()
    for name in ("a", "c"):
        shutil.rmtree(tmp_path / name)
    watcher.poll()
    assert recorder.calls == [("unload", "a"), ("unload", "c")]


def test_bytecode_the_stub_writes_is_no_change(tmp_path):
    add_model(tmp_path, "a")
    recorder = Recorder()
    watcher = poller(tmp_path, recorder)
    (tmp_path / "a" / "1" / "__pycache__").mkdir()
    (tmp_path / "a" / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"x")
    (tmp_path / ".hidden").mkdir()
    watcher.poll()
    assert recorder.calls == []


def test_a_failed_load_is_retried_only_after_the_next_change(tmp_path, caplog):
    add_model(tmp_path, "bad")
    recorder = Recorder(fail={"bad"})
    watcher = poller(tmp_path, recorder, known={})
    watcher.poll()
    watcher.poll()
    assert recorder.calls == [("load", "bad")]
    assert "model bad was added but not loaded: cannot load bad" in caplog.text
    (tmp_path / "bad" / "config.pbtxt").write_text("backend: \"python\"\nmax_batch_size: 1\n")
    watcher.poll()
    assert recorder.calls == [("load", "bad"), ("load", "bad")]


def test_start_and_stop_leave_no_thread(tmp_path):
    watcher = poller(tmp_path, Recorder())
    watcher.start()
    assert "pytriton_like-repository-poller" in {thread.name for thread in threading.enumerate()}
    watcher.stop()
    watcher.stop()
    assert "pytriton_like-repository-poller" not in {thread.name for thread in threading.enumerate()}


def test_a_repository_must_be_a_folder(tmp_path):
    with pytest.raises(PyTritonValidationError, match="is not a folder"):
        ModelRepository(tmp_path / "missing")

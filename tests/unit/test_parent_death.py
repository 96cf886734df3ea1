"""with_parent_death_signal: the command line that starts a program through pdeathsig_exec."""

import os
import signal
import stat

import pytest

from pytriton_like.server.parent_death import PDEATHSIG_EXEC, with_parent_death_signal


def test_the_program_runs_behind_the_launcher_with_the_signal_and_this_process_id(tmp_path):
    program = tmp_path / "program"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o700)
    argv = with_parent_death_signal([str(program), "--flag", "value"], signal.SIGKILL)
    assert argv == [str(PDEATHSIG_EXEC), "9", str(os.getpid()), str(program), "--flag", "value"]


def test_the_launcher_is_built_beside_the_module():
    assert PDEATHSIG_EXEC.is_file() and PDEATHSIG_EXEC.stat().st_mode & stat.S_IXUSR


def test_a_program_that_is_not_there_is_refused_as_starting_it_would_be(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        with_parent_death_signal([str(tmp_path / "missing")], signal.SIGKILL)


def test_a_program_that_cannot_be_run_is_refused_as_starting_it_would_be(tmp_path):
    program = tmp_path / "program"
    program.write_text("not a program\n")
    program.chmod(0o600)
    if os.access(program, os.X_OK):  # a user allowed to run any file
        pytest.skip("this user may run files that are not executable")
    with pytest.raises(PermissionError, match="Permission denied"):
        with_parent_death_signal([str(program)], signal.SIGKILL)

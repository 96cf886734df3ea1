"""pdeathsig_exec (native/pdeathsig_exec.c): a program started through it gets the signal when the
thread that started it ends, keeps its pid and its own arguments, and says why when it cannot run."""

import os
import signal
import subprocess
import sys
import threading
import time
from typing import List

from pytriton_like.server.parent_death import PDEATHSIG_EXEC, with_parent_death_signal

SLEEP = "/bin/sleep"


def command_line(pid: int, program: str) -> List[bytes]:
    """The command line of ``pid`` once it runs ``program`` (the launcher has become it), or the
    last one read (empty while an exec replaces the process's memory)."""
    arguments: List[bytes] = []
    for _ in range(200):
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            arguments = cmdline.read().split(b"\0")[:-1]
        if arguments and arguments[0] == program.encode():
            break
        time.sleep(0.05)
    return arguments


def test_the_program_gets_the_signal_when_the_thread_that_started_it_ends():
    started = {}

    def start() -> None:
        process = started["process"] = subprocess.Popen(with_parent_death_signal([SLEEP, "60"], signal.SIGKILL))
        started["cmdline"] = command_line(process.pid, SLEEP)  # same pid, the program's own arguments

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    process = started["process"]
    try:
        assert started.get("cmdline") == [SLEEP.encode(), b"60"]
        assert process.wait(10) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_program_lives_while_the_thread_that_started_it_does():
    process = subprocess.Popen(with_parent_death_signal([sys.executable, "-c", "print('ran')"], signal.SIGKILL),
                               stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=30)
    assert (process.returncode, out) == (0, "ran\n")


def test_a_program_whose_parent_is_not_the_one_named_does_not_run():
    argv = [str(PDEATHSIG_EXEC), str(int(signal.SIGKILL)), "1", sys.executable, "-c", "print('ran')"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert result.returncode == 127 and result.stdout == ""
    assert "the process that started it has ended" in result.stderr


def test_a_program_that_cannot_be_run_is_named_in_the_error(tmp_path):
    argv = [str(PDEATHSIG_EXEC), str(int(signal.SIGKILL)), str(os.getpid()), str(tmp_path / "missing")]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert result.returncode == 127
    assert f"cannot run {tmp_path / 'missing'}: No such file or directory" in result.stderr


def test_wrong_arguments_print_the_usage():
    result = subprocess.run([str(PDEATHSIG_EXEC), "nine", "1", SLEEP], capture_output=True, text=True, timeout=30)
    assert result.returncode == 127 and "usage:" in result.stderr

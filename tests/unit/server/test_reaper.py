"""The reaper ends tritonserver's stubs (and only them) once the user process dies, and removes
their regions and the user process's segments; a normal stop ends it without doing anything."""

import os
import select
import signal
import subprocess
import sys
import textwrap

from pytriton_like.relay.shm import SEGMENT_PREFIX, SHM_DIR, STUB_REGION_PREFIX
from pytriton_like.server.reaper import REAPER_WAIT, start_reaper, stop_reaper

# The user process: starts a reaper for the group it is given and waits to be killed.
OWNER = textwrap.dedent(
    """
    import sys, time
    from pytriton_like.server.reaper import start_reaper
    reaper = start_reaper(int(sys.argv[1]))
    print(reaper.pid, flush=True)
    time.sleep(120)
    """
)


def wait_gone(pid, timeout_s=10):
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout_s)[0])
    finally:
        os.close(fd)


# A stand-in for tritonserver's process group: its leader (not one of ours to the reaper) starts a
# "stub" (a Python under the stub's name) in the group, tells its pid and sleeps.
GROUP = textwrap.dedent(
    """
    import subprocess, sys, time
    stub = subprocess.Popen([sys.argv[1], "-c", "import time; time.sleep(120)", sys.argv[2]])
    print(stub.pid, flush=True)
    stub.wait()
    time.sleep(120)
    """
)


def test_when_the_owner_dies_the_stubs_go_and_their_memory_with_them(tmp_path):
    stub_name = tmp_path / "triton_python_backend_stub"  # what the reaper recognises
    stub_name.symlink_to(sys.executable)
    region = f"{STUB_REGION_PREFIX}reaper-test-{os.getpid()}"
    region_path = os.path.join(SHM_DIR, region)
    open(region_path, "wb").close()
    with subprocess.Popen([sys.executable, "-c", GROUP, str(stub_name), region], stdout=subprocess.PIPE, text=True,
                          start_new_session=True) as group:
        stub_pid = int(group.stdout.readline())
        with subprocess.Popen([sys.executable, "-c", OWNER, str(group.pid)], stdout=subprocess.PIPE, text=True) as owner:
            reaper_pid = int(owner.stdout.readline())
            segment = os.path.join(SHM_DIR, f"{SEGMENT_PREFIX}{owner.pid}-t1m1-0-in-1")
            open(segment, "wb").close()
            try:
                owner.kill()
                owner.wait()
                assert wait_gone(reaper_pid)  # it did its work and exited
                assert wait_gone(stub_pid)
                assert group.poll() is None  # not one of ours: left alone
                assert not os.path.exists(region_path)
                assert not os.path.exists(segment)
            finally:
                group.kill()
                group.wait()
                for path in (region_path, segment):
                    if os.path.exists(path):
                        os.unlink(path)


def test_a_normal_stop_ends_the_reaper_and_leaves_the_group_alone():
    group = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        reaper = start_reaper(group.pid)
        assert reaper.poll() is None
        stop_reaper(reaper)
        assert reaper.returncode == -signal.SIGTERM
        stop_reaper(reaper)  # twice is harmless
        assert group.poll() is None
    finally:
        group.kill()
        group.wait()


def test_the_reaper_waits_as_a_small_program_not_a_python_interpreter():
    group = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        reaper = start_reaper(group.pid)
        try:
            assert os.readlink(f"/proc/{reaper.pid}/exe") == str(REAPER_WAIT)
            with open(f"/proc/{reaper.pid}/status", encoding="ascii") as status:
                rss_kib = int(next(line for line in status if line.startswith("VmRSS:")).split()[1])
            assert rss_kib < 4096  # an idle Python interpreter with the clean-up's imports: ~14 MiB
        finally:
            stop_reaper(reaper)
    finally:
        group.kill()
        group.wait()

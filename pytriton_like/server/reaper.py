"""The reaper: a small process that ends tritonserver's stubs when the user process dies.

tritonserver dies with the user process (parent-death signal), and each Python-backend stub then
ends itself (the Python backend checks its parent), unless its main thread was waiting on tritonserver at that
moment: it may then hang for good holding the GIL, so that no Python in it runs again (measured:
3 of 8 SIGKILLs of a serving process under load left such a stub, with its shared memory and a
few percent of a CPU, for good). No code inside the stub can help then, so a process of its own,
started with the server, waits for the user process to exit, kills what is left of the server's
process group, removes the stubs' regions named on their command lines, the named segments of the
user process and its access-token files, and exits. A normal stop ends it first.

The waiting is done by a small program (``reaper_wait``, native/reaper_wait.c: a pidfd, about 1 MiB
of RSS where an idle Python interpreter takes 14); once the user process has exited it execs
Python with :func:`main`, the clean-up.
"""

import os
import pathlib
import signal
import subprocess
import sys
from typing import List, Tuple

__all__ = ["start_reaper", "stop_reaper", "group_members", "REAPER_WAIT"]

_OURS = ("tritonserver", "triton_python_backend_stub")

_HERE = pathlib.Path(__file__).resolve().parent
# Built when the package is installed (setup.py), next to this module.
REAPER_WAIT = _HERE / "reaper_wait"
_PACKAGE_PARENT = str(_HERE.parent.parent)
_BOOT = f"import sys; sys.path.insert(0, {_PACKAGE_PARENT!r}); from pytriton_like.server.reaper import main; main(sys.argv[1:])"


def start_reaper(server_pgid: int) -> subprocess.Popen:
    """Start the reaper of the server whose process group is ``server_pgid``, for this process.

    Raises:
        OSError: the reaper cannot be started (e.g. ``reaper_wait`` was not built).
    """
    owner = str(os.getpid())
    return subprocess.Popen(
        [str(REAPER_WAIT), owner, sys.executable, "-c", _BOOT, owner, str(server_pgid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C or a signal to our group must not end it
    )


def stop_reaper(reaper: subprocess.Popen) -> None:
    """End a reaper whose work is not needed (the server was stopped normally)."""
    if reaper.poll() is None:
        reaper.terminate()  # SIGTERM: its default action; it holds nothing
    reaper.wait()


def main(args: List[str]) -> None:
    """The clean-up after the user process ``args[0]`` exited, of the server in process group ``args[1]``."""
    from ..access_tokens import remove_stale_tokens  # noqa: PLC0415
    from ..relay.shm import SHM_DIR, STUB_REGION_PREFIX, unlink_segments  # noqa: PLC0415

    owner_pid, server_pgid = int(args[0]), int(args[1])
    regions = []
    for pid, cmdline in group_members(server_pgid):
        # Only tritonserver and its stubs: should the group id have been reused, nothing else.
        if cmdline and cmdline[0].endswith(_OURS):
            regions += [arg for arg in cmdline if arg.startswith(STUB_REGION_PREFIX)]
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for region in regions:
        try:
            os.unlink(os.path.join(SHM_DIR, region))
        except FileNotFoundError:
            pass
    unlink_segments(owner_pid)
    remove_stale_tokens(owner_pid)  # its access-token files


def group_members(pgid: int) -> List[Tuple[int, List[str]]]:
    """(pid, command line) of each process in process group ``pgid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                group = int(stat.read().rsplit(b")", 1)[1].split()[2])
            if group == pgid:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    found.append((int(entry), [arg.decode("utf-8", "replace") for arg in cmdline.read().split(b"\0") if arg]))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found

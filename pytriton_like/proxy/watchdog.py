"""Ends the stub when the user process that serves its model is gone.

tritonserver dies with the user process (parent-death signal), but a stub that was inside
``execute`` at that moment waits forever for its dead server, holding Triton's shared-memory
region and our arena. The watchdog waits for the owner's exit (a pidfd: no polling where the
kernel has them), removes those segments and exits the stub.
"""

import os
import select
import threading
import time
from typing import Optional

from .shm import SHM_DIR, STUB_REGION_PREFIX, process_alive, unlink_segments

__all__ = ["exit_with_owner", "stub_region"]


def stub_region() -> Optional[str]:
    """Name of this stub's Triton shared-memory region (from its command line), if any."""
    try:
        with open("/proc/self/cmdline", "rb") as file:
            arguments = file.read().split(b"\0")
    except OSError:
        return None
    for argument in arguments:
        if argument.startswith(STUB_REGION_PREFIX.encode()):
            return argument.decode()
    return None


def exit_with_owner(owner_pid: int) -> threading.Thread:
    """Start a daemon thread that cleans up and exits this process once ``owner_pid`` exits."""
    thread = threading.Thread(target=_watch, args=(owner_pid, stub_region()), name="pytriton_like-watchdog",
                              daemon=True)
    thread.start()
    return thread


def _watch(owner_pid: int, region: Optional[str]) -> None:
    _wait_for_exit(owner_pid)
    unlink_segments(owner_pid)
    if region is not None:
        try:
            os.unlink(os.path.join(SHM_DIR, region))
        except OSError:
            pass
    os._exit(0)


def _wait_for_exit(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd on this Python or kernel
        while process_alive(pid):
            time.sleep(1)
        return
    try:
        select.select([fd], [], [])  # readable once the process has exited
    finally:
        os.close(fd)

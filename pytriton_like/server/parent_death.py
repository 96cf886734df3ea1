"""Children that get a signal when the thread that started them ends (``PR_SET_PDEATHSIG``).

tritonserver gets SIGKILL when the user process dies, even by SIGKILL, and a ``tune`` trial's
``serve`` gets SIGINT when ``tune`` dies. The signal is set by ``pdeathsig_exec``
(native/pdeathsig_exec.c), a small program the child runs first and that then becomes the program
asked for: same pid, same arguments. Setting it from Python instead (``preexec_fn``) would run the
interpreter between fork and exec in the child of a process with threads, where a lock another
thread held at the fork can hold the child, and the thread waiting for its exec, for ever.
"""

import errno
import os
import pathlib
from typing import List, Sequence

__all__ = ["PDEATHSIG_EXEC", "with_parent_death_signal"]

# Built when the package is installed (setup.py), next to this module.
PDEATHSIG_EXEC = pathlib.Path(__file__).resolve().parent / "pdeathsig_exec"


def with_parent_death_signal(argv: Sequence[str], signum: int) -> List[str]:
    """The command line that runs ``argv`` with ``signum`` as its parent-death signal: the program
    gets it when the thread that starts it ends (start it from the thread whose life it shares).

    Raises:
        FileNotFoundError, PermissionError: ``argv[0]`` cannot be run (what starting it would say).
    """
    program = argv[0]
    if not os.path.isfile(program):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if not os.access(program, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    return [str(PDEATHSIG_EXEC), str(int(signum)), str(os.getpid()), *argv]

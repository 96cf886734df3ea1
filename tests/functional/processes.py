"""A serving process of its own (a script, the command line) whose stderr a test reads as it comes."""

import signal
import subprocess
import threading
import time
from typing import List, Optional, Sequence


class Serving:
    """``argv`` running, its stderr (and stdout) collected line by line; killed if still running at exit.

    Use as a context manager; :meth:`wait_for` waits for a line, :meth:`stop` sends a signal and
    returns the exit code.
    """

    def __init__(self, argv: Sequence[str], *, env=None, cwd=None):
        self._lines: List[str] = []
        self._changed = threading.Condition()
        self.process = subprocess.Popen(
            list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __enter__(self) -> "Serving":
        return self

    def __exit__(self, *_) -> None:
        if self.process.poll() is None:  # the test failed midway: stop it as a user would, then for good
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait(30)
        self._reader.join(10)
        self.process.stdout.close()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self._changed:
                self._lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def output(self) -> str:
        """Everything printed so far, one line per line."""
        with self._changed:
            return "\n".join(self._lines)

    def wait_for(self, text: str, timeout_s: float = 120) -> str:
        """The first line holding ``text``; fails with the output so far if none comes in time or the process ends."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                found = next((line for line in self._lines if text in line), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not self._reader.is_alive()):
                    output = "\n".join(self._lines)
                    raise AssertionError(f"no line with {text!r} within {timeout_s} s; output:\n{output}")
                self._changed.wait(min(left, 0.5))

    def stop(self, signum: int = signal.SIGINT, timeout_s: float = 60) -> Optional[int]:
        """Send ``signum``; the exit code once the process ended (and its output was read)."""
        self.process.send_signal(signum)
        code = self.process.wait(timeout_s)
        self._reader.join(10)
        return code

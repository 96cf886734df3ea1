"""What ``Triton.serve()`` tells the person who started the server: endpoints, ready models, the stop.

Every line is logged at INFO. While ``serve()`` runs and the application has configured no
logging (no handler would receive the record, so it would be lost), the line is printed to
stderr as well, the way ``uvicorn`` and Flask's ``app.run`` print theirs. Whether logging is
configured is checked at each line: an application that configures it later (even from a
callable, while serving) gets the lines through its own handlers only, never twice, and its
logging is never changed (no ``basicConfig``, no handler or level set behind its back).

Warnings and errors need none of this: with no logging configured, Python's last-resort
handler prints them to stderr anyway.
"""

import logging
import sys
from typing import Optional, TextIO

__all__ = ["Console", "PREFIX"]

PREFIX = "pytriton_like: "


class Console:
    """Lines about the server's life, for its operator.

    Args:
        logger: the logger every line goes to (at INFO).
        stream: where lines are printed when nothing else shows them (default: ``sys.stderr`` at
            the time of printing).

    Attributes:
        printing: whether lines are printed when logging is not configured (``serve()`` turns it
            on; ``run()`` leaves it off, so a background server stays quiet).
    """

    def __init__(self, logger: logging.Logger, stream: Optional[TextIO] = None):
        self._logger = logger
        self._stream = stream
        self.printing = False

    def say(self, message: str, *args: object, logged: bool = True) -> None:
        """Log ``message % args`` at INFO; print it too while printing and logging is not configured.

        Args:
            logged: False for a line that was logged already (only printed, if it would be).
        """
        if logged:
            self._logger.info(message, *args)
        if self.printing and not self._logger.hasHandlers():
            stream = self._stream or sys.stderr
            try:
                stream.write(f"{PREFIX}{message % args if args else message}\n")
                stream.flush()
            # stderr closed or gone (a daemon), or a signal handler's line cut into another one's
            # write (RuntimeError: reentrant call): the log has the line
            except (OSError, ValueError, RuntimeError):
                pass

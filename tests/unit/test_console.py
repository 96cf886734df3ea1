"""What serve() prints: only while printing is on and no logging handler would show the line."""

import io
import logging

import pytest

from pytriton_like.console import PREFIX, Console


@pytest.fixture
def logger():
    # A logger outside the logging tree: pytest puts its own handlers in that tree.
    return logging.Logger("console-test")


def test_prints_while_printing_and_no_logging_is_configured(logger):
    stream = io.StringIO()
    console = Console(logger, stream)
    console.say("not yet")  # run(): quiet
    console.printing = True
    console.say("%s on %s", "HTTP", "http://127.0.0.1:8000")
    assert stream.getvalue() == f"{PREFIX}HTTP on http://127.0.0.1:8000\n"


def test_logging_configured_later_takes_over_without_doubles_and_is_left_alone(logger):
    stream = io.StringIO()
    console = Console(logger, stream)
    console.printing = True
    console.say("first")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)  # the application configures logging while serving
    logger.setLevel(logging.INFO)
    console.say("second")
    assert stream.getvalue() == f"{PREFIX}first\n"
    assert [record.getMessage() for record in records] == ["second"]
    assert logger.handlers == [handler] and logger.level == logging.INFO  # nothing of ours added or changed


def test_a_closed_stream_is_no_error(logger):
    stream = io.StringIO()
    stream.close()
    console = Console(logger, stream)
    console.printing = True
    console.say("gone")  # a daemon without stderr: nothing to print to, nothing raised


def test_a_line_that_cuts_into_another_ones_write_is_dropped_not_raised(logger):
    # As a signal handler's line does when the signal comes while the main thread writes a line
    # to stderr: the buffered stream refuses the second write (RuntimeError: reentrant call).
    class Raw(io.RawIOBase):
        def __init__(self):
            super().__init__()
            self.written = b""
            self.cut_in = None

        def writable(self):
            return True

        def write(self, data):
            cut_in, self.cut_in = self.cut_in, None
            if cut_in:
                cut_in()
            self.written += bytes(data)
            return len(data)

    raw = Raw()
    console = Console(logger, io.TextIOWrapper(io.BufferedWriter(raw), write_through=True))
    console.printing = True
    raw.cut_in = lambda: console.say("received SIGTERM; stopping")
    console.say("serving")
    assert raw.written == f"{PREFIX}serving\n".encode()

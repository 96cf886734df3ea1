"""The command line's own error (the commands and their helpers raise it; ``main`` prints it)."""

__all__ = ["CliError"]


class CliError(Exception):
    """A command line that cannot be served; the message says what to change."""

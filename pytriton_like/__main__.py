"""``python -m pytriton_like``: the ``pytriton_like`` command (see :mod:`pytriton_like.cli`)."""

import sys

from .cli import main

__all__: list = []

if __name__ == "__main__":
    sys.exit(main())

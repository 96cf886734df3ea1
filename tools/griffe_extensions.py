"""Griffe extension of the API reference (mkdocs.yml loads it for mkdocstrings).

The package's docstrings are Google style, and several head their examples ``Example:``, as
Google's own guide does. Griffe reads only ``Examples:`` as an examples section (``>>>`` lines
rendered as code); ``Example:`` would become a note whose ``>>>`` lines Markdown takes for nested
quotes. Here the heading is read as ``Examples:``.
"""

import re

import griffe

EXAMPLE_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Reads a docstring's ``Example:`` heading as ``Examples:``."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = EXAMPLE_HEADING.sub(r"\1Examples:", obj.docstring.value)

"""Griffe extension of the API reference (mkdocs.yml loads it for mkdocstrings).

The package's docstrings are Google style, read by the code's readers in their editors as much
as on the site. Two habits of theirs Markdown would render badly, so they are read here as what
they mean:

- ``Example:`` headings, as Google's own guide writes them. Griffe reads only ``Examples:`` as an
  examples section (``>>>`` lines rendered as code); ``Example:`` would become a note whose
  ``>>>`` lines Markdown takes for nested quotes.
- Sphinx roles (``:class:`~pytriton_like.triton.Triton```, ``:meth:`run```), which Markdown shows
  as they are written: they become code spans of the name (the last part after ``~``, the text
  of ``text <target>``).
"""

import re

import griffe

EXAMPLE_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)
SPHINX_ROLE = re.compile(r":(?:mod|class|meth|func|attr|data|exc|obj):`(?P<target>[^`]+)`")


def _code_span(match: re.Match) -> str:
    target = match.group("target")
    text = re.match(r"(?s)(.*?)\s*<[^>]+>$", target)
    if text:
        target = text.group(1)
    elif target.startswith("~"):
        target = target.rsplit(".", 1)[-1]
    return f"``{target.lstrip('~.')}``"


class DocstringHabits(griffe.Extension):
    """Reads a docstring's ``Example:`` heading as ``Examples:``, and its Sphinx roles as code spans."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            text = EXAMPLE_HEADING.sub(r"\1Examples:", obj.docstring.value)
            obj.docstring.value = SPHINX_ROLE.sub(_code_span, text)

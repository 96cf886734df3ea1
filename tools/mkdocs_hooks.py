"""MkDocs hooks of the documentation site (mkdocs.yml names this file; ``make docs`` builds the site).

The pages of ``docs/`` are written to be read on their own as Markdown too (in a checkout, or on
a code host), and tested as such (``tests/functional/test_docs.py`` runs their code blocks,
``tests/unit/test_docs_text.py`` checks their links). Three things the site needs on top:

- **Code fences carry a role** for the test (```` ```python server ````, ```` ```bash manual ````):
  the role is dropped here, so the site highlights the block by its language as usual.
- **Links that leave docs/** (``../examples/workers``, ``../bench/README.md``, ``../CHANGELOG.md``)
  name files of the repository, not pages of the site. They become links to those files on the
  code host, ``<repository>/tree/main/examples/workers`` (``blob`` for a file, ``raw`` for an
  image), so they work wherever the site is published. The repository's URL is said in one place,
  pyproject.toml's ``[project.urls] Source`` (setup.py makes the README's links for an index page
  from it too); it is also the site's ``repo_url``. A link to a file that does not exist fails
  the build.
- **The command-line reference** is ``pytriton_like --help`` and each command's ``--help``, read
  from the parser itself: a line ``<!-- pytriton_like-help: serve -->`` becomes that help text.
"""

import contextlib
import io
import os
import pathlib
import re
import sys

from mkdocs.exceptions import PluginError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# ```python server -> ```python (the roles of tests/functional/test_docs.py)
FENCE_ROLE = re.compile(r"^(\s*```\w+)[ \t]+(?:server|client|fragment|manual)[ \t]*$", re.MULTILINE)
# ](target) and ](target#anchor) of a Markdown link or image; targets without a scheme only
LINK = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:|#)([^)#\s]+)(#[^)\s]*)?\)")
SCHEME = "pytriton-like-repository:"
REPOSITORY_LINK = re.compile(r'(href|src)="' + re.escape(SCHEME) + r'([^"#]*)(#[^"]*)?"')
HELP = re.compile(r"^<!-- pytriton_like-help:(?P<command>[\w ]*)-->$", re.MULTILINE)


def _repository_root(config) -> pathlib.Path:
    return pathlib.Path(config.config_file_path).resolve().parent


def repository_url(root: pathlib.Path) -> str:
    """The repository's URL: pyproject.toml's ``[project.urls] Source``."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["urls"]["Source"].rstrip("/")


def on_config(config):
    config.repo_url = repository_url(_repository_root(config))
    config.repo_name = config.repo_name or config.repo_url.rsplit("/", 1)[-1]
    config.edit_uri = ""  # no edit button
    return config


def on_page_markdown(markdown, page, config, files):
    markdown = FENCE_ROLE.sub(r"\1", markdown)
    markdown = _mark_links_out_of_docs(markdown, page, config)
    return HELP.sub(lambda match: _help_block(match.group("command").split()), markdown)


def _mark_links_out_of_docs(markdown: str, page, config) -> str:
    root = _repository_root(config)
    docs = pathlib.Path(config.docs_dir).resolve()
    page_folder = (docs / page.file.src_path).parent

    def mark(match: re.Match) -> str:
        target, anchor = match.group(1), match.group(2) or ""
        path = (page_folder / target).resolve()
        if docs in path.parents or path == docs:
            return match.group(0)  # a page or file of the site: MkDocs checks it
        if root not in path.parents:
            raise PluginError(f"{page.file.src_path}: the link {target!r} leaves the repository")
        if not path.exists():
            raise PluginError(f"{page.file.src_path}: the link {target!r} names a file that does not exist")
        relative = path.relative_to(root).as_posix() + ("/" if path.is_dir() else "")
        return f"]({SCHEME}{relative}{anchor})"

    return LINK.sub(mark, markdown)


def on_page_content(html, page, config, files):
    repo_url = config.repo_url.rstrip("/")

    def resolve(match: re.Match) -> str:
        attribute, relative, anchor = match.group(1), match.group(2), match.group(3) or ""
        kind = "tree" if relative.endswith("/") else ("raw" if attribute == "src" else "blob")
        return f'{attribute}="{repo_url}/{kind}/main/{relative.rstrip("/")}{anchor}"'

    return REPOSITORY_LINK.sub(resolve, html)


def _help_block(command: list) -> str:
    """``pytriton_like [command] --help``, as the parser prints it, in a fenced block."""
    from pytriton_like.cli import build_parser  # noqa: PLC0415 - only for the pages that ask

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal's width: the same text on every build
    try:
        output = io.StringIO()
        with contextlib.redirect_stdout(output), contextlib.suppress(SystemExit):
            build_parser().parse_args([*command, "--help"])
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return "```text\n" + output.getvalue().rstrip() + "\n```"

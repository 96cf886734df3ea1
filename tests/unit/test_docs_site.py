"""The documentation site builds with ``mkdocs build --strict``, and its API reference has every public name.

``make docs`` builds the same site (mkdocs.yml): the pages of docs/ and, in docs/reference/, the
API reference that mkdocstrings renders from the docstrings. Strict mode fails the build on a
broken link, anchor or cross-reference, and on a docstring whose sections griffe cannot read.
mkdocstrings gives each documented object an HTML ``id`` of its public path
(``pytriton_like.triton.Triton.bind``); a public name without a docstring is left out of the
reference (``show_if_no_docstring: false``), so the check below also holds every public name to
having one.
"""

import html.parser
import importlib
import os
import pathlib
import posixpath
import re
import subprocess
import sys
from importlib import metadata

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The modules users import from (README, docs/), each with a page in docs/reference/.
PUBLIC_MODULES = [
    "pytriton_like.triton",
    "pytriton_like.model_config",
    "pytriton_like.decorators",
    "pytriton_like.triton_context",
    "pytriton_like.proxy.types",
    "pytriton_like.client",
    "pytriton_like.client.utils",
    "pytriton_like.client.asyncio_utils",
    "pytriton_like.exceptions",
    "pytriton_like.client.exceptions",
    "pytriton_like.runner",
    "pytriton_like.openai",
    "pytriton_like.tracing",
    "pytriton_like.constants",
    "pytriton_like.cli",
]

# What each guide says about the API the reference must show in detail.
MEMBERS = [
    "pytriton_like.triton.Triton.bind",
    "pytriton_like.triton.Triton.serve",
    "pytriton_like.triton.Triton.run",
    "pytriton_like.triton.Triton.stop",
    "pytriton_like.triton.Triton.load_model",
    "pytriton_like.triton.RemoteTriton.bind",
    "pytriton_like.client.ModelClient.infer_sample",
    "pytriton_like.client.ModelClient.infer_batch",
    "pytriton_like.client.DecoupledModelClient.infer_sample",
    "pytriton_like.client.AsyncioModelClient.infer_batch",
    "pytriton_like.triton_context.TritonContext.client",
    "pytriton_like.runner.TritonRunner.stream_infer",
]


class _Ids(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        self.ids.update(value for name, value in attrs if name == "id" and value)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    site_dir = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return site_dir


@pytest.fixture(scope="module")
def reference_ids(site) -> set:
    parser = _Ids()
    for page in (site / "reference").rglob("index.html"):
        parser.feed(page.read_text(encoding="utf-8"))
    return parser.ids


def test_every_page_of_docs_is_in_the_site(site):
    pages = {path.relative_to(ROOT / "docs").with_suffix("") for path in (ROOT / "docs").rglob("*.md")}
    built = {path.relative_to(site).parent for path in site.rglob("index.html")}
    assert {page for page in pages if page.name != "index"} <= built
    # (and in the navigation: a page left out of it fails the strict build, mkdocs.yml's omitted_files)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_is_in_the_reference(module_name, reference_ids):
    module = importlib.import_module(module_name)
    missing = [name for name in module.__all__ if f"{module_name}.{name}" not in reference_ids]
    assert not missing, f"{module_name}: not in docs/reference (no page, or no docstring): {missing}"


def test_the_main_methods_are_in_the_reference(reference_ids):
    assert [member for member in MEMBERS if member not in reference_ids] == []


def test_the_command_reference_is_the_parsers_help(site):
    text = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for option in ("--skip-serving", "--workers", "--max-batch-size", "--input", "--output"):
        assert option in text
    assert "pytriton_like-help" not in text


def test_links_out_of_docs_name_repository_files(site):
    # docs/workers.md links ../examples/workers, docs/index.md ../CHANGELOG.md: in the site, links to
    # the repository's files (pyproject.toml's Source URL), which work wherever the site is published
    source = metadata.metadata("pytriton_like").get_all("Project-URL")
    repository = next(url.split(", ", 1)[1] for url in source if url.startswith("Source, ")).rstrip("/")
    assert f'href="{repository}/tree/main/examples/workers"' in (site / "workers" / "index.html").read_text("utf-8")
    assert f'href="{repository}/blob/main/CHANGELOG.md"' in (site / "index.html").read_text("utf-8")


def test_no_link_of_the_site_leaves_it_but_for_the_web(site):
    # a relative link out of the site's folder works only beside a checkout (the links above, made wrong)
    leaving = []
    for page in site.rglob("*.html"):
        folder = page.relative_to(site).parent.as_posix()
        for target in re.findall(r'(?:href|src)="([^"#:?]+)', page.read_text(encoding="utf-8")):
            if posixpath.normpath(posixpath.join(folder, target)).split("/")[0] == "..":
                leaving.append(f"{page.relative_to(site)}: {target}")
    assert not leaving, "\n".join(sorted(set(leaving))[:20])

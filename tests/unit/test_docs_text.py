"""The user docs (docs/ and README.md) say what holds today, not when or in which session it was found.

Dated runs, commits and the history of a measurement belong in bench/README.md, bench/results/
and CHANGELOG.md. This checks the mechanical part: no commit hashes, no "issue N", no dates or
clock times outside a table of results, no "this round"; and that every page links only to
files that exist.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]

# 7 to 40 hex digits with at least one letter and one digit, alone as a word: a commit's name.
COMMIT = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
ISSUE = re.compile(r"\bissues?\s*\(?#?\d+|(?<![\w&])#\d{1,4}\b", re.IGNORECASE)
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b|\b[0-2]?\d:[0-5]\d(:[0-5]\d)?\s*UTC\b")
SESSION = re.compile(r"\bthis round\b|\blast round\b|\bthis session\b|\btoday\b", re.IGNORECASE)
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def _prose(page: pathlib.Path):
    """``(line number, line)`` of ``page``; table rows are marked by their leading ``|``."""
    return list(enumerate(page.read_text(encoding="utf-8").splitlines(), start=1))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_session_talk(page):
    found = []
    for number, line in _prose(page):
        for pattern in (COMMIT, ISSUE, SESSION):
            found += [f"{page.name}:{number}: {match.group(0)!r} in {line.strip()}" for match in pattern.finditer(line)]
        if not line.lstrip().startswith("|"):  # a results table may say when it was measured
            found += [f"{page.name}:{number}: {match.group(0)!r} in {line.strip()}" for match in DATE.finditer(line)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_links_reach_files_that_exist(page):
    missing = []
    for number, line in _prose(page):
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"[a-z]+://", target):
                continue
            if not (page.parent / target).exists():
                missing.append(f"{page.name}:{number}: {target}")
    assert not missing, "\n".join(missing)


# The configuration classes a page's code may make: each such page imports it in one of its blocks.
CONFIGURATION_CLASSES = [
    "TritonConfig", "TritonSecurityConfig", "WorkerOptions", "ModelConfig", "DynamicBatcher", "QueuePolicy",
    "TimeoutAction", "SequenceBatcher", "Tensor", "ModelWarmup", "WarmupInput", "EnsembleStep", "DeviceKind",
]
PYTHON_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
IMPORTED = re.compile(r"^\s*from [\w.]+ import (\([^)]*\)|[^\n]*)", re.MULTILINE)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_configuration_class_a_page_makes_is_imported_there(page):
    code = "\n".join(PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")))
    imported = {name for names in IMPORTED.findall(code) for name in re.findall(r"\w+", names)}
    made = {name for name in CONFIGURATION_CLASSES if re.search(rf"\b{name}\(", code)}
    assert made <= imported, f"{page.name}: made but never imported: {sorted(made - imported)}"


def test_the_examples_page_lists_every_example_folder():
    folders = {path.name for path in (ROOT / "examples").iterdir() if (path / "client.py").exists()}
    listed = set(re.findall(r"\]\(\.\./examples/(\w+)\)", (ROOT / "docs" / "examples.md").read_text(encoding="utf-8")))
    assert listed == folders, f"not in docs/examples.md: {sorted(folders - listed)}; gone: {sorted(listed - folders)}"


def test_the_patterns_catch_what_they_are_for():
    assert COMMIT.search("at `72c553c`, the common-shape path") and COMMIT.search("fixed in 9476aac.")
    assert not COMMIT.search("size=1048576") and not COMMIT.search("a4b3c2d1-uuid") and not COMMIT.search("deadbeef")
    assert ISSUE.search("issue 14 item 4") and ISSUE.search("the native relay's issue (14)") and ISSUE.search("see #30")
    assert DATE.search("2026-11-23, 02:39 UTC") and DATE.search("at 19:15 UTC") and not DATE.search("port 8000:8000")
    assert SESSION.search("passing since the last round")

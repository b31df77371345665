"""The docs' standing rules: performance.md is a status page, user-facing text carries no words of our development
process (a test machine, ticket numbers, work sessions, a development diary), links resolve, and the license and
type marker ship with the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from readme_blocks import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)")
# What a user reads: the docs, the package metadata and help texts, and frost's and the benchmarks' code (strings,
# docstrings and comments alike).
USER_FACING = [*DOCS, ROOT / "pyproject.toml",
               *(p for folder in ("frost", "benchmarks", "examples") for p in sorted((ROOT / folder).rglob("*.py")))]
# Words of the development process, never of the product: our test machine, a ticket by number ("issue 7",
# "issue-6", "issue7", "issue #47"), a work session, and the development diary that git replaced.
DEVELOPMENT_WORDS = re.compile(r"device machine|\bissues?[ _-]?#?\d|\bsessions?\b|docs/archive|\(archive/",
                               re.IGNORECASE)


def _hits(paths: list[Path], pattern: re.Pattern) -> list[str]:
    return [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in paths
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]


def test_performance_page_is_short():
    assert len((ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.parametrize("text, development", [
    ("run on the device machine", True), ("the H200 Device Machine", True), ("issue 47's documents", True),
    ("--suite issue7", True), ("the issue-6 features", True), ("(Issue #12)", True), ("issues 3 and 4", True),
    ("this session's runs", True), ("see docs/archive/log.md", True), ("[log](archive/performance_log.md)", True),
    ("three issue slots of padding", False), ("loads issued a step ahead", False), ("a CUDA GPU", False),
    ("measured on an H200", False), ("stops the run", False)])
def test_development_words_pattern(text, development):
    """The pattern the next test applies: it finds each kind of development word and spares ordinary English."""
    assert bool(DEVELOPMENT_WORDS.search(text)) is development


def test_user_facing_text_has_no_development_words():
    assert _hits(USER_FACING, DEVELOPMENT_WORDS) == []


def test_no_development_diary():
    """History belongs to git: docs/ holds the current status, not a log of how it got there."""
    assert not (ROOT / "docs" / "archive").exists()


def test_no_run_log_words_in_the_code():
    """Comments describe the code as it is; which tuning round did what is git's."""
    code = [p for folder in ("frost", "benchmarks", "examples", "tests") for p in sorted((ROOT / folder).rglob("*.py"))
            if p != Path(__file__).resolve()]
    assert _hits(code, re.compile(r"session", re.IGNORECASE)) == []


def test_relative_links_resolve():
    broken = [f"{p.relative_to(ROOT)} -> {target}" for p in DOCS
              for target in LINK.findall(p.read_text(encoding="utf-8")) if not (p.parent / target).exists()]
    assert broken == []


def test_license_and_py_typed_ship_with_the_package():
    tomllib = pytest.importorskip("tomllib")    # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8").split("\n", 3)[1]
    assert (ROOT / "frost" / "py.typed").is_file()
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["frost"]

"""The docs' standing rules: performance.md is a status page, no run log outside docs/archive (nor in the code's
comments), links resolve, and the license and type marker ship with the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from readme_blocks import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)")


def test_performance_page_is_short():
    assert len((ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_no_run_log_words_outside_the_archive():
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in DOCS
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "session" in line.lower()]
    assert hits == []


def test_no_run_log_words_in_the_code():
    """Comments describe the code as it is; which tuning round did what is git's and docs/archive's."""
    code = [p for folder in ("frost", "benchmarks", "examples", "tests") for p in sorted((ROOT / folder).rglob("*.py"))
            if p != Path(__file__).resolve()]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in code
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "session" in line.lower()]
    assert hits == []


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

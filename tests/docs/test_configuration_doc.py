"""docs/configuration.md lists exactly the FROST_* environment variables frost reads, with the code's defaults."""

from __future__ import annotations

import os
import re

import pytest

from readme_blocks import ROOT

CONFIG = ROOT / "docs" / "configuration.md"
NAME = re.compile(r"\bFROST_[A-Z0-9_]*[A-Z0-9]\b")   # a trailing "_" is a PTX label prefix, not a variable


def _read_by_frost() -> set[str]:
    return {n for path in (ROOT / "frost").rglob("*.py") for n in NAME.findall(path.read_text(encoding="utf-8"))}


def _documented() -> dict[str, list[str]]:
    """Variable -> the cells of its row in the environment-variable table."""
    rows = {}
    for line in CONFIG.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `FROST_"):
            rows[cells[0].strip("`")] = cells
    return rows


def test_every_variable_frost_reads_is_documented():
    assert _read_by_frost() - set(_documented()) == set()


def test_every_documented_variable_is_read_by_frost():
    assert set(_documented()) - _read_by_frost() == set()


def test_dq_gemm_default_is_the_codes(monkeypatch):
    from frost.kernels.backward import ds_workspace

    monkeypatch.delenv("FROST_DQ_GEMM_MAX_BYTES", raising=False)
    assert f"`{ds_workspace._max_bytes_from_env()}`" in _documented()["FROST_DQ_GEMM_MAX_BYTES"][1]


def test_plan_cache_default_is_the_codes():
    if "FROST_PLAN_CACHE_SIZE" in os.environ:
        pytest.skip("FROST_PLAN_CACHE_SIZE is set here: the code's default is not in force")
    from frost.lowering import plan_cache

    assert f"`{plan_cache.DEFAULT_SIZE}`" in _documented()["FROST_PLAN_CACHE_SIZE"][1]

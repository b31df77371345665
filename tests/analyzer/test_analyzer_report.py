"""The report: JSON round trip, a readable rendering, and the generated support matrix kept in step."""

from __future__ import annotations

import json
import pathlib

from analyzer_graphs import gpt_oss
from frost.analyzer import CODES, RULES, SupportReport, probe, render_support_matrix

MATRIX = pathlib.Path(__file__).resolve().parents[2] / "docs" / "support_matrix.md"


def test_json_round_trip_and_vllm_shape():
    report = probe(gpt_oss(), "cpu")  # cute_sm120 declines the cpu target: a report with a reason in it
    data = json.loads(report.model_dump_json())
    assert data["target"] == "cpu" and data["supported"] is True
    assert set(data["ops"][0]["declined"]) == {"cute_sm120"}
    assert {"code", "field", "value", "accepted", "message"} == set(data["ops"][0]["declined"]["cute_sm120"][0])
    assert SupportReport.model_validate_json(report.model_dump_json()) == report


def test_text_rendering_names_engine_facts_and_every_reason():
    report = probe(gpt_oss(), "cpu")
    text = report.to_text()
    assert text.startswith("target cpu: supported")
    assert "op 'attn' (sdpa_backward) -> reference" in text
    assert "Hq=64 Hkv=8" in text and "mask=band(128, 0) bottom_right" in text
    for reason in report.ops[0].declined["cute_sm120"]:
        assert f"[{reason.code}] {reason.message}" in text


def test_committed_support_matrix_matches_the_tables():
    assert MATRIX.read_text(encoding="utf-8") == render_support_matrix(), \
        "docs/support_matrix.md is stale: run `frost support-matrix`"


def test_support_matrix_lists_every_engine_and_code():
    text = render_support_matrix()
    assert "`cute_sm120`" in text and "`reference`" in text
    assert all(f"`{code}`" in text for code in CODES) and len(RULES) >= len(CODES)

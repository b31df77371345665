"""Ratios, the summary, the printed table and the JSON round trip, from fake timings."""

import json
import sys

import pytest

from frost.bench.chart import write_chart
from frost.bench.report import NA, Report, Result, best_peer, deterministic_cost, host_time, ratio, summary
from frost.bench.table import render

from .fakes import fake_report


def test_ratio_is_frost_over_peer_and_none_when_either_missing():
    r = fake_report()
    rows = {x.backend: x for x in r.rows("a")}
    assert ratio(rows["frost"], rows["torch-flash"]) == pytest.approx(1.5)
    assert ratio(rows["frost"], rows["fa4"]) is None
    assert ratio(None, rows["torch-flash"]) is None


def test_best_peer_and_same_class():
    rows = fake_report().rows("a")
    assert best_peer(rows, same_class_only=False).backend == "torch-cudnn"
    assert best_peer(rows, same_class_only=True).backend == "torch-flash"


def test_summary():
    a, b = summary(fake_report())
    assert a["best_peer"] == "torch-cudnn" and a["vs_best"] == pytest.approx(0.75)
    assert a["best_same_class"] == "torch-flash" and a["vs_best_same_class"] == pytest.approx(1.5)
    assert a["of_ceiling"] == pytest.approx(0.5)                 # best bf16 ceiling point: 600
    assert b["best_peer"] is None and b["vs_best"] is None and b["frost_tflops"] == 100.0


def test_table_shows_every_row_engine_and_na_reasons():
    text = render(fake_report())
    lines = text.splitlines()
    row = next(ln for ln in lines if ln.startswith("a ") and "torch-flash" in ln)
    assert "200.0" in row and "1.50" in row
    assert any("cute_sm120" in ln for ln in lines) and any("reference" in ln for ln in lines)
    assert "ImportError: no flash_attn" in text and "no learnable sink" in text
    assert "600.0" in text and "50%" in text                    # ceiling table and % of ceiling


def test_table_without_ceiling_says_so():
    r = fake_report()
    r.ceiling = {}
    assert "not measured" in render(r)
    r.ceiling = {"error": "RuntimeError: no GPU"}
    assert "n/a (RuntimeError: no GPU)" in render(r)


def test_json_round_trip():
    r = fake_report()
    d = json.loads(json.dumps(r.to_dict()))
    assert d["summary"][0]["case"] == "a"
    back = Report.from_dict(d)
    assert back.results == r.results and back.ceiling == r.ceiling and render(back) == render(r)


def _with_deterministic_twin():
    """fake_report plus a deterministic twin of case "a" (frost and torch-flash timed, fa4 declined) and a
    deterministic case of another shape (no twin)."""
    r = fake_report()
    shape = {"batch": 2, "heads_q": 8, "seq_q": 64, "causal": True}
    r.cases[0].update(shape, deterministic=False)
    r.cases += [{"name": "a-det", "flops": 1e12, **shape, "deterministic": True},
                {"name": "c-det", "flops": 1e12, **shape, "seq_q": 128, "deterministic": True}]
    r.results += [Result("a-det", "frost", "ok", ms=1000.0 / 300.0 * 1.25, tflops=240.0),
                  Result("a-det", "torch-flash", "ok", ms=1000.0 / 200.0 * 2.0, tflops=100.0),
                  Result("a-det", "fa4", NA, note="no deterministic mode"),
                  Result("c-det", "frost", "ok", ms=1.0, tflops=1000.0)]
    return r


def test_deterministic_cost_pairs_each_deterministic_case_with_its_default_twin():
    (row,) = deterministic_cost(_with_deterministic_twin())
    assert row["case"] == "a-det" and row["default_case"] == "a"
    assert row["time_ratio"] == {"frost": pytest.approx(1.25), "torch-flash": pytest.approx(2.0)}
    assert deterministic_cost(fake_report()) == []
    text = render(_with_deterministic_twin())
    table = text.split("deterministic / default time\n", 1)[1]
    assert "a-det" in table and "1.250" in table and "2.000" in table and "c-det" not in table
    assert "deterministic / default" not in render(fake_report())


def test_host_time_per_backend_and_frost_over_each_peer_on_shared_cases():
    """Each backend's median host time over its cases; a peer's ratio only over the cases frost also ran."""
    r = fake_report()
    r.cases.append({"name": "c", "flops": 1e12})
    host = {("a", "frost"): 30.0, ("a", "torch-flash"): 60.0, ("a", "torch-cudnn"): 20.0, ("b", "frost"): 50.0}
    for row in r.results:
        row.host_us = host.get((row.case, row.backend))
    r.results.append(Result("c", "torch-flash", "ok", ms=1.0, tflops=1.0, host_us=1000.0))   # frost did not run c
    by = {h["backend"]: h for h in host_time(r)}
    assert by["frost"]["host_us"] == pytest.approx(40.0) and by["frost"]["frost_over_backend"] is None
    assert by["torch-flash"]["host_us"] == pytest.approx(530.0) and by["torch-flash"]["shared_cases"] == 1
    assert by["torch-flash"]["frost_over_backend"] == pytest.approx(0.5)
    assert by["torch-cudnn"]["frost_over_backend"] == pytest.approx(1.5) and "fa4" not in by
    text = render(r).split("host time per call", 1)[1]
    assert "0.50" in text and "1.50" in text
    assert host_time(fake_report()) == [] and "host time per call" not in render(fake_report())


def test_chart_skipped_without_matplotlib(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    msg = write_chart(fake_report(), str(tmp_path / "x.png"))
    assert msg.startswith("chart skipped: matplotlib is not installed")
    assert not (tmp_path / "x.png").exists()


def test_chart_written_when_matplotlib_present(tmp_path):
    pytest.importorskip("matplotlib")
    assert write_chart(fake_report(), str(tmp_path / "x.png")).startswith("chart written")
    assert (tmp_path / "x.png").stat().st_size > 1000

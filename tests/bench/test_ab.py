"""The A/B harness's GPU-free parts (tools.ab), the candidates registry and the parent process of
benchmarks/ab_variants.py with its children faked."""

import json
import subprocess
from pathlib import Path

import pytest

from tools import ab
from tools.ab import Candidate, Row
from helpers.scripts import load_script

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _module(name):
    return load_script(BENCH / f"{name}.py")   # benchmarks/ is on sys.path (conftest.py): its imports resolve


def test_schedule_alternates_direction():
    assert ab.schedule(["a", "b", "c"], 3) == [(0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"),
                                               (2, "a"), (2, "b"), (2, "c")]
    with pytest.raises(ValueError, match="rounds=0"):
        ab.schedule(["a"], 0)
    with pytest.raises(ValueError, match="repeat"):
        ab.schedule(["a", "a"], 1)


def test_result_lines_round_trip_among_log_lines():
    rows = [Row("served", 0, "x", 1.25, "abcd", "20 calls"), Row("cand", 1, "y", None, note="n/a: pad")]
    text = "compiling...\n" + "\n".join(ab.result_line(r) for r in rows) + "\nwarning: something\n"
    assert ab.parse_results(text) == rows


def _rows():
    return [Row("served", 0, "x", 2.0, "d1"), Row("cand", 0, "x", 1.0, "d1"), Row("served", 1, "x", 2.2, "d1"),
            Row("cand", 1, "x", 1.2, "d2"), Row("served", 0, "y", 4.0, "e1"), Row("cand", 0, "y", None,
                                                                                   note="n/a: other pad")]


def test_summarise_means_ratios_and_bitwise():
    s = {(x.case, x.variant): x for x in ab.summarise(_rows(), "served", {("x", "cand"): 1e-3})}
    base, cand = s["x", "served"], s["x", "cand"]
    assert base.mean_ms == pytest.approx(2.1) and base.ratio == pytest.approx(1.0) and base.bitwise is True
    assert cand.mean_ms == pytest.approx(1.1) and cand.ratio == pytest.approx(1.1 / 2.1)
    assert cand.bitwise is False                      # round 1's gradients differ from the served set's
    assert cand.spread == pytest.approx(0.2 / 1.1) and cand.max_rel_diff == 1e-3
    missing = s["y", "cand"]
    assert missing.runs == 0 and missing.mean_ms is None and missing.ratio is None and missing.bitwise is None
    assert missing.note == "n/a: other pad" and s["y", "served"].spread is None   # one round: no spread


def test_format_table_lists_every_summary():
    table = ab.format_table(ab.summarise(_rows(), "served"), "served")
    lines = table.splitlines()
    assert len(lines) == 2 + 4 and "/ served" in lines[0]
    assert "0.524x" in table and "n/a: other pad" in table


def test_parse_case_names_and_specs():
    c, det, label = ab.parse_case("d256-causal")
    assert (c.head_dim, c.causal, det, label) == (256, True, False, "d256-causal")
    c, det, label = ab.parse_case("2,64,8,4096,64,window=128,sink,det")
    assert (c.batch, c.heads_q, c.heads_kv, c.seq_q, c.head_dim, c.window, c.sink, c.causal) == (
        2, 64, 8, 4096, 64, 128, True, True)
    assert det and label == "b2h64/8s4096d64-causal-w128-sink+det"
    assert ab.parse_case("1,16,16,1024,128")[2] == "b1h16s1024d128"
    for bad in ("nonsense", "2,16,16,4096", "2,16,16,4096,64,sideways"):
        with pytest.raises(ValueError, match="A/B case"):
            ab.parse_case(bad)


def _key(pad, kind, arch="sm_90a", dtype="bfloat16"):
    return ab.kernel_key(pad, kind, arch, dtype)


def test_candidate_declines_other_sets_and_changes_its_own():
    cand = Candidate(256, ("dq_gemm",), {"two_pass": False}, {"sm_90a": "--register-usage-level 6"})
    assert "pad d128v128" in cand.declines(_key(128, "dq_gemm"))
    assert "atomic set" in cand.declines(_key(256, "atomic"))
    key = _key(256, "dq_gemm")
    assert cand.declines(key) is None
    tile = cand.tile(key)
    assert key.tile.two_pass and not tile.two_pass and tile.head_dim_pad == 256
    assert cand.ptxas_for(key) == "--register-usage-level 6" and cand.ptxas_for(_key(256, "dq_gemm", "sm_120a")) \
        is None
    with pytest.raises(ValueError, match="not TileConfig fields"):
        Candidate(64, ("atomic",), {"no_such_field": 1})
    with pytest.raises(ValueError, match="one or more of"):
        Candidate(64, ("sideways",), {})
    with pytest.raises(AssertionError):           # an illegal tile is refused when it is made
        Candidate(64, ("atomic",), {"rows_per_warp": 48}).tile(_key(64, "atomic"))


def test_registered_candidates_make_legal_tiles_on_every_target():
    from frost.kernels.backward.select import DTYPES

    candidates = _module("bench_variants").CANDIDATES
    assert candidates
    for name, cand in candidates.items():
        for arch in ("sm_120a", "sm_90a"):
            for dtype in DTYPES:
                for key in cand.keys(arch, dtype):
                    assert cand.declines(key) is None, name
                    assert cand.tile(key).smem_bytes() <= 99 * 1024, name


def test_gradient_sample_and_diff(tmp_path):
    import torch

    g = torch.arange(10.0).reshape(2, 5)
    torch.save(ab.gradient_sample([g]), ab.sample_path(tmp_path, "c/1", "served", 0))
    torch.save(ab.gradient_sample([g + 0.5]), ab.sample_path(tmp_path, "c/1", "cand", 0))
    torch.save(ab.gradient_sample([g + 0.9]), ab.sample_path(tmp_path, "c/1", "cand", 1))
    assert ab.sample_diff(tmp_path, "c/1", "cand", "served", 2) == pytest.approx(0.1)
    assert ab.sample_diff(tmp_path, "c/1", "served", "served", 2) == 0.0
    assert ab.sample_diff(tmp_path, "other", "cand", "served", 2) is None
    big = torch.zeros(3 * ab.SAMPLE_ELEMS)
    assert ab.gradient_sample([big])[0].numel() == ab.SAMPLE_ELEMS


def test_parent_runs_the_schedule_and_reports(monkeypatch, tmp_path, capsys):
    mod = _module("ab_variants")
    calls = []

    def fake_run(cmd, capture_output, text, timeout):
        variant, rnd = cmd[cmd.index("--child") + 1], int(cmd[cmd.index("--round") + 1])
        calls.append((rnd, variant))
        if variant == "d256_dqg_1p" and rnd == 1:    # a child that dies before printing
            return subprocess.CompletedProcess(cmd, 1, "", "Traceback\nRuntimeError: boom")
        if variant == "served" and rnd == 2:          # one that hangs
            raise subprocess.TimeoutExpired(cmd, timeout, output=b"compiling\n")
        ms = 2.0 if variant == "served" else 1.5
        return subprocess.CompletedProcess(cmd, 0, ab.result_line(Row(variant, rnd, "d256-causal", ms, "h")), "")

    monkeypatch.setattr(mod.subprocess, "run", fake_run)
    out = tmp_path / "ab.json"
    assert mod.main(["--variants", "d256_dqg_1p", "--case", "d256-causal", "--json", str(out),
                     "--samples", str(tmp_path), "--rounds", "3", "--timeout", "5"]) == 0
    assert calls == [(0, "served"), (0, "d256_dqg_1p"), (1, "d256_dqg_1p"), (1, "served"), (2, "served"),
                     (2, "d256_dqg_1p")]
    printed = capsys.readouterr().out
    assert "0.750x" in printed and "process rc=1: RuntimeError: boom" in printed and "timed out after 5.0 s" in printed
    data = json.loads(out.read_text())
    cand = next(s for s in data["summary"] if s["variant"] == "d256_dqg_1p")
    assert cand["runs"] == 2 and cand["ratio"] == pytest.approx(0.75)


def test_parent_refuses_unknown_variants_and_cases_before_any_process(monkeypatch):
    mod = _module("ab_variants")
    monkeypatch.setattr(mod.subprocess, "run", lambda *a, **k: pytest.fail("a process was started"))
    with pytest.raises(SystemExit, match="unknown variants"):
        mod.main(["--variants", "no_such_candidate", "--case", "d256-causal"])
    with pytest.raises(ValueError, match="A/B case"):
        mod.main(["--case", "2,16"])

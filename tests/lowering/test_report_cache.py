"""Probe reports on disk (frost/lowering/disk_cache.py): exact round trip, a second process reads the report
without importing networkx, bad entries are probed again, other analyzer code misses, and `frost cache` prunes
report groups of other code."""

import logging
import os
import textwrap

import pytest

import frost
from frost.analyzer import SupportReport, probe
from frost.cli import main as cli_main
from frost.ir import GraphBuilder, sdpa_backward_graph
from frost.lowering import cache_stats, clear_caches
from frost.lowering import disk_cache
from frost.lowering.disk_cache import active_disk_cache, default_root
from helpers.processes import run_twice


def _with_unclaimed_op():
    b = GraphBuilder("block")
    x = b.tensor("x", (2, 64, 4, 64), "bfloat16")
    y = b.tensor("y", (2, 64, 4, 64), "bfloat16")
    b.op("layer_norm", "ln", inputs=(x,), outputs=(y,))
    return b.build()


GRAPHS = {
    "causal": sdpa_backward_graph(2, 8, 256, 64, causal=True),
    "everything": sdpa_backward_graph(2, 8, 300, 72, heads_kv=2, seq_kv=200, sink=True, padded=True, dlse=True,
                                      band_left=64, band_right=3, alignment="bottom_right", deterministic=True,
                                      attn_scale=0.3),
    "declined": sdpa_backward_graph(1, 2, 64, 264, dtype="float16", layout="bhsd"),
    "unclaimed": _with_unclaimed_op(),
}


@pytest.mark.parametrize("target", ["cpu", "sm_120a", "sm_90a"])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_reports_round_trip_exactly(name, target):
    report = probe(GRAPHS[name], target)
    again = SupportReport.model_validate_json(report.model_dump_json())
    assert again == report and again.to_text() == report.to_text()


def test_the_declined_graph_declines():
    """(so the round trip above covers reasons, not only empty ones)"""
    assert probe(GRAPHS["declined"], "sm_120a").ops[0].declined


CHILD = textwrap.dedent("""
    import json, sys
    import torch
    import frost
    from frost.ir import sdpa_backward_graph
    from frost.lowering import cache_stats
    plan = frost.compile(sdpa_backward_graph(2, 8, 256, 64, heads_kv=2, sink=True, causal=True), target="cpu")
    bshd = lambda h: torch.randn(1, 16, h, 32)
    q, out, dout, k, v = bshd(4), bshd(4), bshd(4), bshd(2), bshd(2)
    frost.sdpa_backward(q, k, v, out, dout, torch.randn(1, 4, 16), causal=True)   # the functional path too
    s = cache_stats()
    print(json.dumps(dict(hits=s.report_hits, writes=s.report_writes, networkx="networkx" in sys.modules,
                          report=plan.report.model_dump_json())))
""")


def test_a_second_process_reads_the_reports_without_networkx(tmp_path):
    runs = run_twice(CHILD, tmp_path / "shared", unset=("FROST_DISK_CACHE",))
    assert (runs[0]["hits"], runs[0]["writes"], runs[0]["networkx"]) == (0, 2, True)
    assert (runs[1]["hits"], runs[1]["writes"], runs[1]["networkx"]) == (2, 0, False)
    assert runs[1]["report"] == runs[0]["report"]


def _entries():
    return sorted((default_root() / "reports").rglob("*.bin"))


def test_a_bad_entry_is_logged_and_probed_again(caplog):
    graph = GRAPHS["causal"]
    first = frost.compile(graph, target="cpu").report
    (entry,) = _entries()
    entry.write_bytes(entry.read_bytes()[:-7])        # truncated: the checksum fails
    clear_caches()
    with caplog.at_level(logging.WARNING, logger="frost"):
        again = frost.compile(graph, target="cpu").report
    assert again == first and cache_stats().report_errors == 1 and cache_stats().report_writes == 2
    assert "probe-report cache entry" in caplog.text and "probing the graph again" in caplog.text
    clear_caches()
    frost.compile(graph, target="cpu")
    assert cache_stats().report_hits == 1            # the rewritten entry loads


def test_a_well_formed_entry_that_is_not_a_report_is_probed_again(caplog):
    graph = GRAPHS["causal"]
    frost.compile(graph, target="cpu")
    key = disk_cache.report_key(graph.model_dump_json(), "cpu")
    active_disk_cache(disk_cache.REPORT_ENTRIES).store(key, b'{"target": "cpu"}')
    clear_caches()
    with caplog.at_level(logging.WARNING, logger="frost"):
        assert frost.compile(graph, target="cpu").report == probe(graph, "cpu")
    assert cache_stats().report_errors == 1 and "unreadable" in caplog.text


def test_each_target_and_graph_has_its_entry(fake):
    frost.compile(GRAPHS["causal"], target="cpu")
    frost.compile(GRAPHS["causal"], target="sm_120a")
    frost.compile(GRAPHS["everything"], target="cpu")
    assert len(_entries()) == 3 and cache_stats().report_hits == 0


def test_other_analysis_code_does_not_read_the_report(monkeypatch):
    frost.compile(GRAPHS["causal"], target="cpu")
    monkeypatch.setattr(disk_cache, "analysis_digest", lambda: "0123456789abcdef")
    clear_caches()
    frost.compile(GRAPHS["causal"], target="cpu")
    assert (cache_stats().report_hits, cache_stats().report_writes) == (0, 2) and len(_entries()) == 2


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv("FROST_DISK_CACHE", "0")
    frost.compile(GRAPHS["causal"], target="cpu")
    assert _entries() == [] and cache_stats().report_writes == 0


def test_the_probe_itself_writes_nothing():
    probe(GRAPHS["causal"], "cpu")
    frost.check_support(GRAPHS["causal"], "cpu")
    assert _entries() == []


def test_cache_command_lists_and_prunes_report_groups(tmp_path, capsys):
    frost.compile(GRAPHS["causal"], target="cpu")
    stale = default_root() / "reports" / "frost-0.0.1+old" / "cutlass-none" / "cpu" / "probe"
    stale.mkdir(parents=True)
    (stale / "x.bin").write_bytes(b"x")
    assert cli_main(["cache", "--dir", str(default_root())]) == 0
    out = capsys.readouterr().out
    assert "reports/frost-0.0.1+old" in out and "1 group(s)" in out
    assert cli_main(["cache", "--prune", "--dir", str(default_root())]) == 0
    assert "removed 1 group(s)" in capsys.readouterr().out
    assert not stale.exists() and len(_entries()) == 1


def test_a_target_keeps_at_most_max_reports(monkeypatch):
    monkeypatch.setattr(disk_cache, "MAX_REPORTS", 8)
    graphs = [sdpa_backward_graph(1, 2, seq, 32, causal=True) for seq in range(64, 64 + 9 * 16, 16)]
    store = active_disk_cache(disk_cache.REPORT_ENTRIES)
    paths = [store.path(disk_cache.report_key(g.model_dump_json(), "cpu")) for g in graphs]
    for i, (g, path) in enumerate(zip(graphs, paths)):   # the ninth store trims to 7/8 of the cap, oldest first
        frost.compile(g, target="cpu")
        if i < 8:   # distinct, increasing write times even where the file system's clock is coarse
            os.utime(path, ns=(i * 10**9, i * 10**9))
    assert {p.name for p in _entries()} == {p.name for p in paths[2:]}

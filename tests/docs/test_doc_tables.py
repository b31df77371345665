"""The speed tables in README.md and docs/performance.md are the bench JSON's, and say what their cells mean."""

from __future__ import annotations

import json
import shutil

import pytest

from frost.bench import doc_tables
from frost.bench.doc_tables import (BENCH_JSON, FORWARD_JSON, PASS_JSONS, TABLES, DocTableError, load_report, render,
                                   replace_between)
from readme_blocks import ROOT


def test_docs_tables_equal_a_fresh_generation():
    for path, text in render(ROOT).items():
        assert path.read_text(encoding="utf-8") == text, f"{path}: run python3 -m frost.bench.doc_tables"


def _row(table: str, first_cell: str) -> list[str]:
    line = next(ln for ln in table.splitlines() if ln.startswith(f"| {first_cell} |"))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.parametrize("bench", [BENCH_JSON, FORWARD_JSON])
def test_cells_are_peer_time_over_frost_time(bench):
    """Checked from the raw milliseconds, not through the report's own ratio helper."""
    data = json.loads((ROOT / bench).read_text(encoding="utf-8"))
    ms = {(r["case"], r["backend"]): r["ms"] for r in data["results"] if r["status"] == "ok"}
    table = doc_tables.full_table(load_report(ROOT / bench))
    header = [c.strip() for c in table.splitlines()[2].strip("|").split("|")]
    measured = {r["backend"] for r in data["results"]}
    for case in data["cases"]:
        row = dict(zip(header, _row(table, case["name"])))
        for backend, label in doc_tables.PEER_LABELS.items():
            if backend not in measured:
                continue
            want = f"{ms[case['name'], backend] / ms[case['name'], 'frost']:.2f}" \
                if (case["name"], backend) in ms else "-"
            assert row[f"vs {label}"] == want, (case["name"], backend)


def _by_pass() -> dict:
    return {which: load_report(ROOT / rel) for which, rel in PASS_JSONS.items()}


def test_tables_name_the_pass_date_device_and_peers():
    for (_, _), (source, render_table) in TABLES.items():
        if source is None:
            continue
        report = load_report(ROOT / source)
        text = render_table(report)
        for fact in (report.meta.get("pass", "backward").capitalize(), report.meta["date"], report.meta["device"],
                     "FA2", "FA4"):
            assert fact in text, (source, fact)


def test_host_table_cells_are_medians_and_frost_over_peer_on_shared_cases():
    """Checked from the raw host times of each pass's file, not through the report's own helper."""
    import statistics

    reports = _by_pass()
    table = doc_tables.host_table(reports)
    header = [c.strip() for c in table.splitlines()[2].strip("|").split("|")]
    for which, rel in PASS_JSONS.items():
        data = json.loads((ROOT / rel).read_text(encoding="utf-8"))
        host = {(r["case"], r["backend"]): r["host_us"] for r in data["results"]
                if r["status"] == "ok" and r.get("host_us") is not None}
        row = dict(zip(header, _row(table, which)))
        mine = {c: us for (c, b), us in host.items() if b == "frost"}
        assert row["frost"] == f"{statistics.median(mine.values()):.0f}"
        fa4 = {c: us for (c, b), us in host.items() if b == "fa4"}
        vs = statistics.median(mine[c] / fa4[c] for c in fa4 if c in mine)
        assert row["FA4 (SM120 kernels)"] == f"{statistics.median(fa4.values()):.0f} ({vs:.2f})"


def test_deterministic_table_has_each_twin_of_the_backward_and_the_step():
    table = doc_tables.deterministic_table(_by_pass())
    rows = [ln for ln in table.splitlines() if ln.startswith("| backward") or ln.startswith("| step")]
    twins = [c["name"] for c in load_report(ROOT / BENCH_JSON).cases if c.get("deterministic")]
    assert twins and len(rows) == 2 * len(twins) and "| forward" not in table


def test_a_bench_file_without_a_date_is_refused(tmp_path):
    data = json.loads((ROOT / BENCH_JSON).read_text(encoding="utf-8"))
    del data["meta"]["date"]
    (tmp_path / "b.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DocTableError, match="meta.date"):
        load_report(tmp_path / "b.json")


def test_a_document_without_markers_is_refused():
    with pytest.raises(DocTableError, match="BEGIN GENERATED speed-table"):
        replace_between("# no table here\n", "speed-table", "| a |", "README.md")


def test_check_finds_a_stale_table_and_a_rewrite_fixes_it(tmp_path):
    for rel in {rel for rel, _ in TABLES} | set(PASS_JSONS.values()):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    (tmp_path / BENCH_JSON).parent.mkdir(parents=True, exist_ok=True)
    data = json.loads((ROOT / BENCH_JSON).read_text(encoding="utf-8"))
    data["results"][0]["tflops"] *= 1.5           # a new run: frost faster on the first case
    (tmp_path / BENCH_JSON).write_text(json.dumps(data), encoding="utf-8")
    args = ["--root", str(tmp_path)]
    assert doc_tables.main([*args, "--check"]) == 1
    assert doc_tables.main(args) == 0
    assert doc_tables.main([*args, "--check"]) == 0

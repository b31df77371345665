"""benchmarks/bench_transformers.py runs at its tiny size on the CPU: it writes the markdown table, the JSON of raw
numbers and (with matplotlib) the plot, measures both implementations, and marks eager above --skip-eager-above as
not run; its --packed mode measures padded and packed batches of the same documents."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

from frost.integrations import TRANSFORMERS_MIN

torch = pytest.importorskip("torch")
pytest.importorskip("transformers", minversion=TRANSFORMERS_MIN)

from helpers.scripts import load_script  # noqa: E402

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_transformers.py"


def _load_bench():
    return load_script(BENCH)


@pytest.fixture
def one_thread():
    """One intra-op thread: the tiny ops are far slower when torch's threads contend with other processes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_tiny_cpu_run_writes_table_json_and_plot(tmp_path, one_thread):
    out = tmp_path / "slice.md"
    bench = _load_bench()
    results = bench.main(["--device", "cpu", "--tiny", "--seqs", "32,48", "--skip-eager-above", "32",
                          "--iters", "2", "--warmup", "1", "--out", str(out)])
    rows = {(r["seq_len"], r["impl"]): r for r in results["rows"]}
    assert set(rows) == {(s, impl) for s in (32, 48) for impl in ("eager", "frost")}
    ran = [rows[(32, "eager")], rows[(32, "frost")], rows[(48, "frost")]]
    for r in ran:
        for m in (r["slice"], *r["attention"].values()):
            assert m["status"] == "ok" and len(m["times_ms"]) == 2
            assert math.isfinite(m["ms"]) and m["ms"] > 0
    skipped = rows[(48, "eager")]
    assert {m["status"] for m in (skipped["slice"], *skipped["attention"].values())} == {bench.NOT_RUN}

    assert json.loads(out.with_suffix(".json").read_text()) == json.loads(json.dumps(results))
    table = out.read_text()
    detail = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| ") and "impl" not in line]
    impl_rows = {(int(s), impl.strip()) for s, impl in detail if impl.strip() in ("eager", "frost")}
    assert impl_rows == set(rows)
    summary = [cells for cells in detail if cells[0].strip() == "48" and cells[1].strip() not in ("eager", "frost")]
    assert summary == [[" 48 ", " not run "]]   # the summary row: eager's column says why it has no number
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    assert out.with_suffix(".png").exists() == has_matplotlib


def test_tiny_cpu_packed_run_writes_table_and_json(tmp_path, one_thread):
    """--packed: eager and frost on the right-padded documents, frost on the flattened row, at each S; tokens/s
    counts the S document tokens; eager above --skip-eager-above is marked not run; no plot."""
    out = tmp_path / "packed.md"
    bench = _load_bench()
    results = bench.main(["--device", "cpu", "--tiny", "--packed", "--seqs", "40,64", "--skip-eager-above", "40",
                          "--iters", "2", "--warmup", "1", "--out", str(out)])
    rows = {(r["seq_len"], r["impl"], r["layout"]): r for r in results["rows"]}
    assert set(rows) == {(s, impl, layout) for s in (40, 64) for impl, layout in bench.PACKED_RUNS}
    for (s, impl, layout), r in rows.items():
        if (s, impl) == (64, "eager"):
            assert r["step"]["status"] == bench.NOT_RUN and r["tokens_per_s"] is None
            continue
        assert r["step"]["status"] == "ok" and r["tokens_per_s"] == pytest.approx(s / (r["step"]["ms"] / 1e3))
        assert r["batch_shape"][0] == (1 if layout == "packed" else r["documents"])
    assert json.loads(out.with_suffix(".json").read_text()) == json.loads(json.dumps(results))
    table = [line.split("|")[1:-1] for line in out.read_text().splitlines()
             if line.startswith("| ") and "S |" not in line]
    assert [cells[0].strip() for cells in table] == ["40", "64"]
    assert table[1][3].strip() == bench.NOT_RUN and table[1][7].strip() == "-"
    assert not out.with_suffix(".png").exists()


@pytest.mark.parametrize("total, low, high", [(4096, 256, 2048), (100, 1, 3), (7, 10, 20), (1, 1, 1), (50, 50, 50)])
def test_document_lengths_fill_the_row(total, low, high):
    lengths = _load_bench().document_lengths(total, low, high, seed=3)
    assert sum(lengths) == total and all(1 <= n <= high for n in lengths)
    assert all(n >= low for n in lengths[:-1])   # only the last, the remainder, may be shorter

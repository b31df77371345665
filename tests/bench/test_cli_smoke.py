"""`frost bench` end to end on the CPU (the harness, not a benchmark): frost's functional API on its reference
engine and torch's CPU flash kernel on tiny cases, then `--render` of the saved JSON."""

import json

import pytest

from frost.bench import cases
from frost.cli import main

pytest.importorskip("torch")

TINY = (cases.case("tiny-gqa-causal", 1, 4, 32, 16, hkv=2, causal=True),
        cases.case("tiny-swa-sink", 1, 4, 32, 16, hkv=2, causal=True, window=8, sink=True))
TINY_DET = (TINY[0], cases.deterministic_twin(TINY[0]))


def test_bench_cpu_smoke_and_render(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(cases.SUITES, "quick", TINY)
    out = tmp_path / "bench"
    rc = main(["bench", "--suite", "quick", "--device", "cpu", "--out", str(out), "--iters", "2", "--warmup", "1",
               "--backends", "frost,torch-flash,fa4"])
    assert rc == 0
    saved = json.loads((out / "bench_quick_bf16.json").read_text())
    rows = {(r["case"], r["backend"]): r for r in saved["results"]}
    assert rows[("tiny-gqa-causal", "frost")]["status"] == "ok"
    assert rows[("tiny-gqa-causal", "frost")]["detail"] == "reference"
    assert rows[("tiny-gqa-causal", "torch-flash")]["status"] == "ok"
    assert rows[("tiny-swa-sink", "frost")]["status"] == "ok"
    assert rows[("tiny-swa-sink", "torch-flash")]["note"].startswith("torch-flash: a learnable attention sink")
    assert rows[("tiny-gqa-causal", "fa4")]["status"] == "n/a"
    printed = capsys.readouterr().out
    assert printed.rstrip().splitlines()[-1].startswith("mma.sync ceiling")     # the table comes last
    (out / "bench_quick_bf16.txt").unlink()
    assert main(["bench", "--render", str(out / "bench_quick_bf16.json")]) == 0
    assert "tiny-swa-sink" in (out / "bench_quick_bf16.txt").read_text()


def test_bench_cpu_smoke_of_the_forward_and_the_step(monkeypatch, tmp_path):
    """--pass forward,step times frost's forward and a training step (reference engine on a CPU) and torch's in one
    run, a file per pass; each JSON names its pass, divides by its FLOPs (1x and 3.5x the forward's) and gives each
    row's host time per call."""
    monkeypatch.setitem(cases.SUITES, "quick", TINY)
    out = tmp_path / "bench"
    rc = main(["bench", "--suite", "quick", "--device", "cpu", "--out", str(out), "--iters", "2", "--warmup", "1",
               "--backends", "frost,torch-flash", "--pass", "forward,step"])
    assert rc == 0
    for which, factor in (("forward", 1.0), ("step", 3.5)):
        saved = json.loads((out / f"bench_quick_bf16_{which}.json").read_text())
        assert saved["meta"]["pass"] == which
        rows = {(r["case"], r["backend"]): r for r in saved["results"]}
        assert rows[("tiny-gqa-causal", "frost")]["status"] == "ok", rows[("tiny-gqa-causal", "frost")]
        assert rows[("tiny-swa-sink", "frost")]["status"] == "ok", rows[("tiny-swa-sink", "frost")]
        assert rows[("tiny-gqa-causal", "torch-flash")]["status"] == "ok"
        assert rows[("tiny-gqa-causal", "frost")]["host_us"] > 0
        assert {h["backend"] for h in saved["host_time"]} == {"frost", "torch-flash"}
        assert saved["cases"][0]["flops"] == factor * 4 * 1 * 4 * 16 * (32 * 32 / 2)
    assert not (out / "bench_quick_bf16.json").exists()      # the backward was not asked for


@pytest.mark.parametrize("value", ["sideways", "forward,nope", "", ","])
def test_bench_pass_names_a_bad_value(value, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--device", "cpu", "--suite", "none", "--out", str(tmp_path), "--pass", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--pass" in err and "backward, forward, step" in err


def test_bench_cpu_smoke_of_a_deterministic_twin(monkeypatch, tmp_path):
    """A deterministic case runs frost's deterministic backward and torch's flash backward under
    torch.use_deterministic_algorithms (restored after), and the table reports its time over its default twin's."""
    import torch

    monkeypatch.setitem(cases.SUITES, "quick", TINY_DET)
    out = tmp_path / "bench"
    rc = main(["bench", "--suite", "quick", "--device", "cpu", "--out", str(out), "--iters", "2", "--warmup", "1",
               "--backends", "frost,torch-flash,torch-cudnn"])
    assert rc == 0 and not torch.are_deterministic_algorithms_enabled()
    saved = json.loads((out / "bench_quick_bf16.json").read_text())
    rows = {(r["case"], r["backend"]): r for r in saved["results"]}
    assert rows[("tiny-gqa-causal-det", "frost")]["status"] == "ok"
    assert rows[("tiny-gqa-causal-det", "torch-flash")]["status"] == "ok"
    assert "deterministic" in rows[("tiny-gqa-causal-det", "torch-cudnn")]["note"]
    (cost,) = saved["deterministic_cost"]
    assert cost["default_case"] == "tiny-gqa-causal" and set(cost["time_ratio"]) == {"frost", "torch-flash"}
    assert "deterministic / default time" in (out / "bench_quick_bf16.txt").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--cases", "tiny,nope"], r"^frost bench: --cases: got 'nope'; accepted: comma-separated words found in the "
                               r"names of the quick suite's cases \(tiny-gqa-causal, tiny-swa-sink\)$"),
    (["--backends", "frost,fa3"], r"^frost bench: --backends: got 'fa3'; accepted: comma-separated names from frost, "),
    (["--budget-s", "-1"], r"argument --budget-s: got '-1'; accepted: a number of seconds >= 0"),
    (["--budget-s", "nan"], r"argument --budget-s: got 'nan'"),
    (["--iters", "0"], r"argument --iters: got 0; accepted: an integer >= 1"),
    (["--warmup", "two"], r"argument --warmup: got 'two'; accepted: an integer >= 0"),
])
def test_bench_refuses_a_selection_or_number_it_cannot_honour(monkeypatch, tmp_path, capsys, argv, message):
    """Exit 2 and one line naming the option, before anything is timed (on any machine): a misspelt case word or
    backend would otherwise time nothing, or not what was asked."""
    import re

    monkeypatch.setitem(cases.SUITES, "quick", TINY)
    try:
        rc = main(["bench", "--suite", "quick", "--device", "cpu", "--out", str(tmp_path), *argv])
    except SystemExit as exc:   # argparse's own errors
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(message, err), err
    assert not list(tmp_path.iterdir())

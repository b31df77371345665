"""examples/train_gpt_oss_tiny.py runs at its tiny size on the CPU and writes its log (and its plot when matplotlib
is installed); frost's and eager's first losses agree, as both start from the same weights and batch."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("transformers")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_gpt_oss_tiny.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("train_gpt_oss_tiny", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_training_run(tmp_path):
    results = _load_example().main(["--tiny", "--device", "cpu", "--steps", "3", "--seq-len", "48",
                                    "--out-dir", str(tmp_path)])
    assert set(results) == {"frost", "eager"}
    for r in results.values():
        assert len(r["losses"]) == 3 and all(math.isfinite(x) for x in r["losses"]) and r["tokens_per_s"] > 0
    assert results["frost"]["losses"][0] == pytest.approx(results["eager"]["losses"][0], rel=1e-6)
    logged = json.loads((tmp_path / "loss.json").read_text())
    assert logged["results"]["frost"]["losses"] == results["frost"]["losses"]
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    assert (tmp_path / "loss.png").exists() == has_matplotlib

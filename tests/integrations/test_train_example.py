"""examples/train_gpt_oss_tiny.py runs at its tiny size on the CPU and writes its log (and its plot when matplotlib
is installed); frost's and eager's first losses agree, as both start from the same weights and batch, and with
--packed the padded and the padding-free runs' first losses agree too."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

from frost.integrations import TRANSFORMERS_MIN

pytest.importorskip("transformers", minversion=TRANSFORMERS_MIN)

from helpers.scripts import load_script  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_gpt_oss_tiny.py"


def _load_example():
    return load_script(EXAMPLE)


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


def test_tiny_packed_training_run(tmp_path):
    """--packed: the same documents right-padded (frost and eager) and flattened (frost); all three predict the same
    tokens from the same weights, so their first losses agree (fp32: only the summation order differs)."""
    results = _load_example().main(["--tiny", "--device", "cpu", "--steps", "2", "--seq-len", "40", "--packed",
                                    "--out-dir", str(tmp_path)])
    assert set(results) == {"frost padded", "eager padded", "frost packed"}
    for r in results.values():
        assert len(r["losses"]) == 2 and all(math.isfinite(x) for x in r["losses"]) and r["tokens_per_s"] > 0
    first = results["eager padded"]["losses"][0]
    for label in ("frost padded", "frost packed"):
        assert results[label]["losses"][0] == pytest.approx(first, rel=1e-5)

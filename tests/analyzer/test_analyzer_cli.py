"""`frost probe` exit codes and output, `frost support-matrix` writing and checking."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from analyzer_graphs import gpt_oss
from frost.cli import main
from frost.ir import GraphBuilder


@pytest.fixture
def graph_file(tmp_path):
    def write(graph=None, text=None):
        path = tmp_path / "graph.json"
        path.write_text(text if text is not None else graph.model_dump_json())
        return str(path)
    return write


def _only_glue():
    g = GraphBuilder("glue")
    g.op("relu", "r", inputs=(g.tensor("a", (4,), "float32"),), outputs=(g.tensor("b", (4,), "float32"),))
    return g.build()


def test_probe_supported_exits_0_and_prints_the_report(graph_file, capsys):
    assert main(["probe", graph_file(gpt_oss()), "--target", "sm_120a"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("target sm_120: supported") and "-> cute_sm120" in out


def test_probe_json(graph_file, capsys):
    assert main(["probe", graph_file(gpt_oss()), "--target", "cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ops"][0]["engine"] == "reference" and data["ops"][0]["declined"]["cute_sm120"][0]["code"] == "target"


def test_probe_unsupported_exits_1(graph_file, capsys):
    assert main(["probe", graph_file(_only_glue()), "--target", "cpu"]) == 1
    assert "NOT supported" in capsys.readouterr().out


@pytest.mark.parametrize("text", [
    '{"name": "g", "tensors": [], "ops": [{"op": "relu", "name": "r", "inputs": ["missing"]}]}',
    "{not json",
    '{"tensors": [{"name": "a", "shape": [0], "dtype": "float32"}], "ops": []}',
])
def test_probe_malformed_graph_exits_2(graph_file, capsys, text):
    assert main(["probe", graph_file(text=text), "--target", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("frost probe: ") and "accepted" in err


def test_probe_bad_target_or_missing_file_exits_2(graph_file, tmp_path, capsys):
    assert main(["probe", graph_file(gpt_oss()), "--target", "h100"]) == 2
    assert main(["probe", str(tmp_path / "nope.json"), "--target", "cpu"]) == 2
    assert capsys.readouterr().err.count("frost probe: ") == 2


def test_probe_exit_code_through_the_real_entry_point(graph_file):
    done = subprocess.run([sys.executable, "-m", "frost", "probe", graph_file(_only_glue()), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and json.loads(done.stdout)["supported"] is False


def test_support_matrix_write_and_check(tmp_path, monkeypatch):
    out = tmp_path / "docs" / "matrix.md"
    assert main(["support-matrix", "--check", "--output", str(out)]) == 1     # missing
    assert main(["support-matrix", "--output", str(out)]) == 0
    assert main(["support-matrix", "--check", "--output", str(out)]) == 0
    out.write_text(out.read_text() + "drift\n")
    assert main(["support-matrix", "--check", "--output", str(out)]) == 1
    monkeypatch.chdir(pathlib.Path(__file__).resolve().parents[2])
    assert main(["support-matrix", "--check"]) == 0                          # the committed docs/support_matrix.md

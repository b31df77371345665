"""`frost probe` exit codes, output and --engine; `frost support-matrix` printing, writing and checking."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from analyzer_graphs import gpt_oss
from frost.cli import main
from frost.ir import GraphBuilder, sdpa_forward_varlen_graph


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
    '{"tensors": [{"name": "a", "shape": [-1], "dtype": "float32"}], "ops": []}',
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
    assert main(["support-matrix", "--output", str(out)]) == 0 and out.exists()
    assert main(["support-matrix", "--check", "--output", str(out)]) == 0
    out.write_text(out.read_text() + "drift\n")
    assert main(["support-matrix", "--check", "--output", str(out)]) == 1
    monkeypatch.chdir(pathlib.Path(__file__).resolve().parents[2])
    assert main(["support-matrix", "--check"]) == 0                          # the committed docs/support_matrix.md


def test_support_matrix_prints_to_stdout_without_output(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    from frost.analyzer import render_support_matrix

    assert main(["support-matrix"]) == 0
    assert capsys.readouterr().out == render_support_matrix()
    assert not any(tmp_path.iterdir())                                      # nothing written where it ran


def _head_dim_512():
    from frost.ir import sdpa_backward_graph

    return sdpa_backward_graph(1, 4, 64, 512, heads_kv=1, dtype="bfloat16")


def test_probe_engine_answers_whether_a_gpu_kernel_serves_it(graph_file, capsys):
    path = graph_file(_head_dim_512())
    assert main(["probe", path, "--target", "sm_120"]) == 0              # the reference engine serves it
    assert "by the reference engine only" in capsys.readouterr().out
    assert main(["probe", path, "--target", "sm_120", "--engine", "cute_sm120"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("target sm_120 (engine cute_sm120): NOT supported") and "reference" not in out
    assert main(["probe", graph_file(gpt_oss()), "--target", "sm_120", "--engine", "cute_sm120"]) == 0
    assert main(["probe", graph_file(gpt_oss()), "--target", "cpu", "--engine", "cute_sm120"]) == 1


def test_probe_shows_a_packed_op(graph_file, capsys):
    """The kernels serve a packed op on a GPU target; on CPU only the reference does, and the report says why."""
    path = graph_file(sdpa_forward_varlen_graph(3, 8, 600, 256, 64, seqused=True, causal=True))
    assert main(["probe", path, "--target", "sm_120"]) == 0
    out = capsys.readouterr().out
    assert "-> cute_sm120" in out
    assert "B=3 Hq=8 Hkv=8 Tq=600 Tkv=600 max_Sq=256 max_Skv=256" in out and "seqused=q,kv layout=thd varlen" in out
    assert main(["probe", path, "--target", "sm_120", "--engine", "cute_sm120"]) == 0
    assert main(["probe", path, "--target", "cpu", "--engine", "cute_sm120"]) == 1


def test_probe_unknown_engine_exits_2(graph_file, capsys):
    with pytest.raises(SystemExit) as info:
        main(["probe", graph_file(gpt_oss()), "--engine", "cutlass"])
    assert info.value.code == 2 and "--engine" in capsys.readouterr().err


def test_probe_help_states_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    text = capsys.readouterr().out
    assert all(line in text for line in ("0  served", "1  not served", "2  bad input", "--engine cute_sm120"))


def test_probe_into_a_closed_pipe_is_one_line_and_exit_141(graph_file):
    proc = subprocess.Popen([sys.executable, "-m", "frost", "probe", graph_file(gpt_oss()), "--target", "cpu"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()                      # the reader (`| head`) is gone before frost prints
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert err == "frost probe: output closed early (broken pipe)\n"


def test_check_support_engine_argument():
    from frost.errors import EngineError
    from frost.api.support import check_support

    graph = _head_dim_512()
    assert check_support(graph, "sm_120").supported
    kernels = check_support(graph, "sm_120", engine="cute_sm120")
    assert not kernels.supported and kernels.asked == ("cute_sm120",) and kernels.ops[0].engine is None
    with pytest.raises(EngineError, match=r"^engine: got 'cutlass'; accepted: 'cute_sm120' or 'reference'"):
        check_support(graph, "sm_120", engine="cutlass")

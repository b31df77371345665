"""The `frost` command line speaks one line on stderr and a non-zero exit code for bad options, never a
traceback; `frost --version` names the package version."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import frost
from frost.cli import main


def _frost(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "frost", *argv], capture_output=True, text=True, timeout=300)


def test_version():
    done = _frost("--version")
    assert done.returncode == 0 and done.stdout == f"frost {frost.__version__}\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_demo_on_a_missing_cuda_device_is_one_line_and_exit_2():
    done = _frost("demo", "--device", "cuda")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "frost demo: --device: got 'cuda'; accepted: cpu (torch sees no CUDA device here)\n"


@pytest.mark.parametrize("argv, start", [
    (["demo", "--heads-q", "5", "--heads-kv", "2"],
     "frost demo: --heads-kv: got 2; accepted: a divisor of --heads-q 5"),
    (["demo", "--device", "tpu"], "frost demo: --device: got 'tpu'; accepted: cpu or cuda[:N]"),
])
def test_bad_demo_options_are_one_line_and_exit_2(argv, start, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(start) and captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_a_frost_error_from_any_command_is_one_line(monkeypatch, capsys):
    import frost.commands.schema as schema

    def failing(args):
        raise frost.GraphError("graph", "x", "a graph")

    monkeypatch.setattr(schema, "run", failing)
    assert main(["schema"]) == 2
    assert capsys.readouterr().err == "frost schema: graph: got 'x'; accepted: a graph\n"


def test_an_unwritable_output_file_is_one_line(tmp_path, capsys):
    target = tmp_path / "missing-dir" / "schema.json"
    assert main(["schema", "--output", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("frost schema: ") and str(target) in err and err.count("\n") == 1


def test_a_cache_dir_that_is_a_file_is_refused(tmp_path, capsys):
    """`frost cache --dir FILE` listed an empty cache and exited 0."""
    file = tmp_path / "not-a-dir"
    file.write_text("x")
    with pytest.raises(SystemExit) as info:
        main(["cache", "--dir", str(file)])
    assert info.value.code == 2
    assert f"argument --dir: got '{file}'; accepted: a directory (this is a file)" in capsys.readouterr().err


def test_a_cache_dir_from_the_environment_that_is_a_file_is_refused(tmp_path, monkeypatch, capsys):
    file = tmp_path / "not-a-dir"
    file.write_text("x")
    monkeypatch.setenv("FROST_CACHE_DIR", str(file))
    assert main(["cache"]) == 2
    assert capsys.readouterr().err == (f"frost cache: FROST_CACHE_DIR: got '{file}'; accepted: a directory, or a "
                                       "path where none exists yet (this is a file)\n")


def test_an_empty_cache_dir_is_refused(capsys):
    """An empty --dir was the working directory (and --clear would have cleared there)."""
    with pytest.raises(SystemExit) as info:
        main(["cache", "--clear", "--dir", ""])
    assert info.value.code == 2
    assert "argument --dir: got ''; accepted: a directory path (not empty)" in capsys.readouterr().err


def test_a_graph_file_that_is_not_utf8_is_one_line(tmp_path, capsys):
    path = tmp_path / "graph.json"
    path.write_bytes(b"\xff\xfe{}")
    assert main(["probe", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"frost probe: {path}: not UTF-8 text") and err.count("\n") == 1


def test_a_long_bad_graph_file_is_not_echoed_whole(tmp_path, capsys):
    path = tmp_path / "graph.json"
    path.write_text("not json\n" * 5000)
    assert main(["probe", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400 and "characters); accepted: " in err


def test_a_demo_too_large_for_memory_is_refused_before_allocating(capsys):
    assert main(["demo", "--seq", "99999999999999999999", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("frost demo: --batch x --seq x --heads-q x --head-dim: got ") and err.count("\n") == 1

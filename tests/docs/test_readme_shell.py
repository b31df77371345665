"""The README's shell blocks: the CLI lines run here as written (a line marked GPU only is parsed, not run), the
install blocks end in `frost demo`, which runs here, and the test command is the one CI runs."""

from __future__ import annotations

import shlex

import pytest

from frost.cli import build_parser
from frost.cli import main as frost_main
from readme_blocks import ROOT

EXAMPLES = ROOT / "examples"


def _commands(name: str) -> list[tuple[list[str], str]]:
    """(argv, trailing comment) per non-comment line of an example shell file."""
    out = []
    for line in (EXAMPLES / name).read_text(encoding="utf-8").splitlines():
        code, _, comment = line.partition("#")
        if code.strip():
            out.append((shlex.split(code), comment.strip()))
    return out


def _cli_lines() -> list[pytest.param]:
    return [pytest.param(argv, comment, id=" ".join(argv[1:3])) for argv, comment in _commands("cli.sh")]


@pytest.mark.parametrize("argv, comment", _cli_lines())
def test_cli_line_runs_as_written(argv, comment, monkeypatch, capsys):
    """A line marked GPU only (the benchmark, which rewrites docs/bench) is parsed, not run."""
    assert argv[0] == "frost"
    if comment.startswith("GPU only"):
        assert build_parser().parse_args(argv[1:]).command == argv[1]
        return
    monkeypatch.chdir(ROOT)          # the lines name files relative to the repository root
    try:
        code = frost_main(argv[1:])
    except SystemExit as stop:       # argparse's own actions (--version) exit instead of returning
        code = stop.code
    assert code == 0
    assert capsys.readouterr().out.strip()


@pytest.mark.parametrize("name", ["install_cpu.sh", "install_gpu.sh"])
def test_install_block_installs_frost_then_runs_the_demo(name, capsys):
    commands = [argv for argv, _ in _commands(name)]
    assert commands[-1] == ["frost", "demo"]
    installs = " ".join(" ".join(argv) for argv in commands[:-1])
    assert installs.endswith("pip install -e .")
    if name == "install_cpu.sh":   # CPU torch must come first, or pip pulls a CUDA build for frost's torch dependency
        assert installs.index("download.pytorch.org/whl/cpu") < installs.index("pip install -e .")
    assert frost_main(["demo"]) == 0
    assert "check: PASS" in capsys.readouterr().out


def test_readme_test_command_is_what_ci_runs():
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if "pytest" in ln and not ln.lstrip().startswith("#")]
    readme = [" ".join(argv) for argv, _ in _commands("test.sh") if "pytest" in argv]
    assert len(ci) == 1 and readme, (ci, readme)
    ci_words = shlex.split(ci[0].replace("python3 -m pip", "pip").replace("pip install -q", "pip install"))
    assert ci_words == shlex.split(readme[0])


def test_training_example_runs_as_written(tmp_path):
    """The README's transformers line, as written (its pip line is the install the test extra already did)."""
    import subprocess
    import sys

    pytest.importorskip("transformers")
    (argv, _), = [c for c in _commands("train.sh") if c[0][0] == "python3"]
    done = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "frost: final loss" in done.stdout and "eager: final loss" in done.stdout

"""The probe runs anywhere: no torch or cutlass in the analyzer, and no GPU means the answer is for the CPU."""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys
import types

import pytest

from analyzer_graphs import baseline, gpt_oss
from frost.analyzer import TargetError, normalise_target
from frost.errors import FrostError
from frost.api.support import check_support
from frost.api.plans import detect_target

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEAVY = ("torch", "cutlass")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_probe_with_torch_and_cutlass_blocked():
    out = _run(
        "import sys, json\n"
        "sys.modules['torch'] = None\nsys.modules['cutlass'] = None\n"
        "import frost.analyzer\n"
        "from frost.api.support import check_support\n"
        "from frost.ir import sdpa_backward_graph\n"
        "g = sdpa_backward_graph(2, 64, 4096, 64, heads_kv=8, sink=True, padded=True, causal=True)\n"
        "auto = check_support(g)\n"
        "kernels = frost.analyzer.probe(sdpa_backward_graph(2, 8, 256, 64, causal=True), 'sm_120a')\n"
        "print(json.dumps({'auto': [auto.target, auto.engines['attn']], 'kernels': kernels.engines['attn'],\n"
        "                  'blocked': [sys.modules[m] is None for m in ('torch', 'cutlass')]}))\n")
    assert json.loads(out) == {"auto": ["cpu", "reference"], "kernels": "cute_sm120", "blocked": [True, True]}


def test_import_frost_does_not_import_torch_or_cutlass():
    out = _run("import sys, json, frost, frost.analyzer, frost.api.support, frost.api.plans\n"
               f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    assert json.loads(out) == []


def test_analyzer_source_never_imports_torch_or_cutlass():
    for path in (ROOT / "frost" / "analyzer").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] in HEAVY for n in names), f"{path.name} imports {names}"


def _fake_torch(available: bool, capability=(12, 0)):
    cuda = types.SimpleNamespace(is_available=lambda: available, get_device_capability=lambda device=None: capability)
    return types.SimpleNamespace(cuda=cuda)


def test_detect_target(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert detect_target() == "cpu"
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(False))
    assert detect_target() == "cpu"
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(True, (12, 1)))
    assert detect_target() == "sm_121"
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(True, (9, 0)))
    assert detect_target() == "sm_90"
    assert check_support(baseline()).engines == {"attn": "cute_sm120"}


def test_no_target_on_a_machine_without_gpu_answers_for_cpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(False))
    report = check_support(gpt_oss())
    assert (report.target, report.supported, report.engines) == ("cpu", True, {"attn": "reference"})
    assert [r.code for r in report.ops[0].declined["cute_sm120"]][0] == "target"


def test_no_target_on_this_machine():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert check_support(baseline()).target == "cpu"


@pytest.mark.parametrize("spelling,name", [("sm_120a", "sm_120"), ("SM_90A", "sm_90"), ("sm_121", "sm_121"),
                                           ("sm120f", "sm_120"), (" cpu ", "cpu"), ("cuda", "cuda")])
def test_target_spellings(spelling, name):
    assert normalise_target(spelling) == name


@pytest.mark.parametrize("bad", ["h100", "rtx5090", "sm_", "sm_9", "", None, 120])
def test_unknown_target_is_a_clear_error(bad):
    with pytest.raises(TargetError) as info:
        check_support(baseline(), bad) if bad is not None else normalise_target(bad)
    assert isinstance(info.value, FrostError) and isinstance(info.value, ValueError)
    assert "sm_120" in str(info.value) and "cpu" in str(info.value)


def test_a_cpu_training_step_never_imports_the_kernel_dsl():
    """On a machine without a GPU, frost.attention's forward and backward run the reference engine and load no
    cutlass: the kernels' host side is imported only to compile or load a kernel."""
    out = _run("import sys, json, torch, frost\n"
               "q = torch.randn(2, 32, 4, 16, requires_grad=True)\n"
               "k, v = (torch.randn(2, 32, 2, 16, requires_grad=True) for _ in range(2))\n"
               "frost.attention(q, k, v, causal=True, sink=torch.zeros(4, requires_grad=True)).sum().backward()\n"
               "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'cutlass')))")
    assert json.loads(out) == []

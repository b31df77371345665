"""Every code block in README.md is a file under examples/, shown verbatim, and every Python example runs here (CPU:
the reference engine) with gradients that match an fp64 oracle given the example's own options."""

from __future__ import annotations

import runpy

import pytest
import torch

from helpers import oracle_api
from readme_blocks import README, ROOT, examples_in, fences_outside_examples, synced

EXAMPLES = ROOT / "examples"
PYTHON_EXAMPLES = sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("train_"))  # train_*: tests/integrations
BF16_BOUND = 8 * 2.0 ** -8   # the examples' own rule: max |error| <= 8 bf16 ulps x max |oracle|


def assert_close_bf16(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    err = (got.double() - want.double()).abs().max().item()
    scale = want.double().abs().max().item()
    assert err <= BF16_BOUND * scale, f"{name}: max |error| {err:.3e} > {BF16_BOUND:.3e} x max |oracle| {scale:.3e}"


def _run(name: str, capsys) -> dict:
    torch.manual_seed(0)
    namespace = runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    capsys.readouterr()
    return namespace


def test_every_readme_code_block_is_an_example_file():
    assert fences_outside_examples(README.read_text(encoding="utf-8")) == []


def test_readme_blocks_equal_their_files():
    text = README.read_text(encoding="utf-8")
    assert synced(text) == text, "run python3 tests/docs/readme_blocks.py to copy the examples into README.md"


def test_every_example_file_is_shown_in_the_readme():
    """Shown as a block, or (a longer program) run by a command of a shown shell block."""
    shown = set(examples_in(README.read_text(encoding="utf-8")))
    run = {word for path in shown if path.endswith(".sh") for word in (ROOT / path).read_text().split()
           if word.startswith("examples/") and word.endswith((".py", ".sh"))}
    files = {f"examples/{p.name}" for p in EXAMPLES.iterdir() if p.suffix in (".py", ".sh")}
    assert files == shown | run


@pytest.mark.parametrize("name", PYTHON_EXAMPLES)
def test_python_example_runs(name, capsys):
    _run(name, capsys)


def test_quickstart_gradients_match_the_oracle(capsys):
    g = _run("quickstart.py", capsys)
    leaves = [g[n].detach().double().requires_grad_() for n in ("q", "k", "v", "sink")]
    out = oracle_api.attention(*leaves[:3], sink=leaves[3], causal=True, window_size=(128, None))
    out.square().mean().backward()
    assert_close_bf16("out", g["out"], out)
    for name, leaf in zip(("q", "k", "v", "sink"), leaves):
        assert_close_bf16(f"{name}.grad", g[name].grad, leaf.grad)


def test_functional_example_backward_is_the_gradient_of_its_forward(capsys):
    """The forward's output and the backward's gradients both match one oracle built from the example's `mask`."""
    g = _run("functional.py", capsys)
    leaves = [g[n].double().requires_grad_() for n in ("q", "k", "v", "sink")]
    out = oracle_api.attention(*leaves[:3], sink=leaves[3], **g["mask"])
    (out * g["dout"].double()).sum().backward()
    assert_close_bf16("out", g["out"], out)
    for name, leaf in zip(("dq", "dk", "dv", "dsink"), leaves):
        assert_close_bf16(name, g[name], leaf.grad)


def test_probe_json_is_the_graph_example(capsys):
    g = _run("graph_api.py", capsys)
    saved = (EXAMPLES / "gpt_oss_layer.json").read_text(encoding="utf-8")
    assert saved == g["graph"].model_dump_json(indent=2) + "\n"


def test_varlen_example_matches_the_oracle_per_document(capsys):
    """The packed example's output and gradients against the fp64 oracle run on each document alone."""
    g = _run("varlen.py", capsys)
    leaves = [g[n].detach().double().requires_grad_() for n in ("q", "k", "v", "sink")]
    cu, mask = g["cu_seqlens"], {k: w for k, w in g["mask"].items() if k != "sink"}
    out = oracle_api.attention_varlen(*leaves[:3], cu, cu, sink=leaves[3], **mask)
    out.square().sum().backward()
    assert_close_bf16("out", g["out"], out)
    for name, got, leaf in zip(("dq", "dk", "dv", "dsink"), g["grads"], leaves):
        assert_close_bf16(name, got, leaf.grad)

"""The cute engine checks seq_len values before launching (a TensorError instead of a wrong result) unless the user
opted out with FROST_CHECK_SEQ_LENS=0; graphs without padding never pay for the check."""

from __future__ import annotations

import pytest
import torch

import frost.api.plans as api
from frost.errors import TensorError
from frost.lowering import FakeCompiler, use_compiler
from lowering_helpers import inputs_for, small_graph


def _launches(graph, bad_length: bool = False) -> list:
    """Execute once (a query length of 10000 in batch 0 when ``bad_length``); the fake kernel set's launches."""
    inputs = inputs_for(graph)
    if bad_length:
        inputs[graph.sdpa_ops()[0].inputs.seq_len_q][0] = 10_000
    with use_compiler("cute_sm120", FakeCompiler(persist=False)) as compiler:
        plan = api.compile(graph, target="sm_120")
        assert plan.engine == "cute_sm120"
        plan.execute(inputs, workspace=plan.new_workspace())
    return compiler.kernels[0].launches


def test_padded_graphs_check_lengths_by_default(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    (call, _), = _launches(small_graph(dtype="bfloat16"))
    assert all(isinstance(call.optional[r], torch.Tensor) for r in ("seq_len_q", "seq_len_kv"))
    with pytest.raises(TensorError, match="seq_len_q"):
        _launches(small_graph(dtype="bfloat16"), bad_length=True)


def test_the_check_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("FROST_CHECK_SEQ_LENS", "0")
    assert len(_launches(small_graph(dtype="bfloat16"), bad_length=True)) == 1   # launched unchecked (the kernels
    # clamp lengths to [0, S], so an unchecked bad length cannot read or write out of bounds)


def test_unpadded_graphs_never_check(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    (call, _), = _launches(small_graph(dtype="bfloat16", padded=False))
    assert "seq_len_q" not in call.optional and "seq_len_kv" not in call.optional

"""The cute engine asks its kernels to check seq_len values (a TensorError before launch instead of a wrong
result) unless the user opted out with FROST_CHECK_SEQ_LENS=0; graphs without padding never pay for the check."""

from __future__ import annotations

import torch

import frost.compile_api as api
from frost.lowering import FakeCompiler, use_compiler
from lowering_helpers import inputs_for, small_graph


class FeatureRecording(FakeCompiler):
    def __init__(self):
        super().__init__()
        self.features: list[dict] = []

    def compile(self, unit):
        super().compile(unit)

        def kernel(*tensors, scale, workspace, stream=None, **features):
            self.features.append(features)

        return kernel


def _launch(graph) -> dict:
    with use_compiler("cute_sm120", FeatureRecording()) as compiler:
        plan = api.compile(graph, target="sm_120")
        assert plan.engine == "cute_sm120"
        plan.execute(inputs_for(graph), workspace=plan.new_workspace())
    return compiler.features[-1]


def test_padded_graphs_check_lengths_by_default(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    features = _launch(small_graph(dtype="bfloat16"))
    assert features["check_lengths"] is True
    assert isinstance(features["seq_len_q"], torch.Tensor) and isinstance(features["seq_len_kv"], torch.Tensor)


def test_the_check_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("FROST_CHECK_SEQ_LENS", "0")
    assert _launch(small_graph(dtype="bfloat16"))["check_lengths"] is False


def test_unpadded_graphs_never_check(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    features = _launch(small_graph(dtype="bfloat16", padded=False))
    assert features["check_lengths"] is False and "seq_len_q" not in features

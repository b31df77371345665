"""Tensors for a graph's inputs, made from its specs (logical shapes, declared strides)."""

from __future__ import annotations

import torch

from frost.ir import sdpa_backward_graph
from frost.reference import attention_forward
from helpers.graph_inputs import graph_inputs


def small_graph(**kw):
    """A 4-head GQA (2 kv heads) fp32 graph with sink and padding: every optional input present."""
    args = dict(heads_kv=2, dtype="float32", layout="bshd", sink=True, padded=True, causal=True)
    return sdpa_backward_graph(2, 4, 24, 16, **(args | kw))


def inputs_for(graph, seed: int = 0, device="cpu") -> dict[str, torch.Tensor]:
    """Random inputs with O and LSE from the reference forward; seq_len_* hold [S, ..., S, S - 5]."""
    op = graph.sdpa_ops()[0]
    s = graph.tensor(op.inputs.q).shape[2]
    out = graph_inputs(graph, seed=seed, device=device, lengths=lambda spec: [s] * (spec.shape[0] - 1) + [s - 5])
    ins = op.inputs
    o, lse = attention_forward(out[ins.q], out[ins.k], out[ins.v], causal=op.causal, alignment=op.alignment,
                               band_left=op.band_left, band_right=op.band_right, sink=out.get(ins.sink),
                               seq_len_q=out.get(ins.seq_len_q), seq_len_kv=out.get(ins.seq_len_kv))
    out[ins.o].copy_(o)
    out[ins.lse].copy_(lse)
    return out

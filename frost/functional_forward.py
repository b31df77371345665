"""frost.sdpa_forward: the FlashAttention-style forward over BSHD tensors, the twin of frost.sdpa_backward.

q (B, Sq, Hq, Dqk), k (B, Skv, Hkv, Dqk), v (B, Skv, Hkv, Dv); optional seq_len_q / seq_len_kv int32 (B,) and sink
fp32 (Hq,). Any strides with the head dim innermost work. Returns out (B, Sq, Hq, Dv), contiguous, in q's dtype, and
lse (B, Hq, Sq) fp32, natural log, including the sink term: exactly what sdpa_backward reads.

A call is keyed by its tensors' dtypes, shapes, strides and device plus the options; the first call with a key checks
every argument in the caller's terms (frost.functional_checks) and builds a graph and a plan (on CUDA the cute_sm120
forward kernel where it serves the problem, else the reference engine); later calls reuse the plan and, on the
kernel engine, skip plan.execute's per-tensor checks (the key holds what they compare; only the pointers' 16-byte
alignment is checked). An empty problem (B, Sq or Skv = 0) returns empty outputs, or out = 0 and lse = the sink
(-inf without one) when only Skv is 0."""

from __future__ import annotations

import torch

from frost.compile_api import build_plan, compiler_tag
from frost.errors import TensorError
from frost.functional import ROLES_4D, _meta, _spec, run_plan, strict_bool, target_of, window
from frost.functional_checks import check_options, check_tensors, in_caller_terms, is_empty
from frost.ir import Graph, SdpaForwardInputs, SdpaForwardOp, SdpaForwardOutputs
from frost.lowering.plan_cache import PLANS

OPTIONAL = ("sink", "seq_len_q", "seq_len_kv")


def sdpa_forward(q, k, v, *, softmax_scale=None, causal=False, window_size=(None, None),
                 causal_alignment="top_left", seq_len_q=None, seq_len_kv=None, sink=None):
    """Attention forward -> (out, lse). window_size=(left, right) keeps keys j in [diag - left, diag + right]
    (None or -1: unbounded); causal=True sets right to 0 unless given; causal_alignment anchors the diagonal
    ("top_left": j = i, "bottom_right": j = i + Skv - Sq, per batch with seq_len_q / seq_len_kv)."""
    left, right = window(window_size)
    causal = strict_bool("causal", causal)
    given = {"q": q, "k": k, "v": v, "sink": sink, "seq_len_q": seq_len_q, "seq_len_kv": seq_len_kv}
    given = {n: t for n, t in given.items() if t is not None}
    options = (softmax_scale, causal, left, right, causal_alignment)
    key = ("functional_forward", options, compiler_tag(), *((n, *_meta(n, t)) for n, t in given.items()))
    if is_empty(q, k):
        return _empty_forward(given, options)
    b, sq, hq, _ = q.shape
    outputs = {"o": q.new_empty((b, sq, hq, v.shape[3])),
               "lse": torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)}
    tensors = given | outputs
    run_plan(PLANS.get_or_build(key, lambda: _build(tensors, options, q.device)), tensors, q.device)
    return outputs["o"], outputs["lse"]


def _build(tensors: dict, options: tuple, device):
    """The plan of a new key, after every argument is checked in the caller's terms."""
    check_options(options[0], options[4])
    check_tensors({n: t for n, t in tensors.items() if n not in ("o", "lse")})
    try:
        graph = forward_graph(tensors, options)
    except TensorError as exc:
        raise in_caller_terms(exc) from exc
    return build_plan(graph, target_of(device))


def forward_graph(tensors: dict, options: tuple) -> Graph:
    """The one-op forward graph of a call, in logical (B, H, S, D) shapes; tensors are named by role (q, k, v, o,
    lse, sink, seq_len_q, seq_len_kv), as the plan's fast path expects."""
    scale, causal, left, right, alignment = options
    specs = {n: _spec(n, t) for n, t in tensors.items()}
    op = SdpaForwardOp(
        name="attn", inputs=SdpaForwardInputs(**{n: n for n in ("q", "k", "v", *OPTIONAL) if n in specs}),
        outputs=SdpaForwardOutputs(o="o", lse="lse"), attn_scale=scale, causal=causal, alignment=alignment,
        band_left=left, band_right=right)
    return Graph(name="sdpa_forward", tensors=tuple(specs.values()), ops=(op,))


def _empty_forward(given: dict, options: tuple):
    """B, Sq or Skv = 0: the reference engine's outputs (empty, or out = 0 and lse = sink / -inf)."""
    from frost.reference import attention_forward

    check_options(options[0], options[4])
    check_tensors(given)
    scale, causal, left, right, alignment = options
    t = {n: (x.transpose(1, 2) if n in ROLES_4D else x) for n, x in given.items()}
    o, lse = attention_forward(t["q"], t["k"], t["v"], scale=scale, causal=causal, alignment=alignment,
                               band_left=left, band_right=right, seq_len_q=t.get("seq_len_q"),
                               seq_len_kv=t.get("seq_len_kv"), sink=t.get("sink"))
    q, v = given["q"], given["v"]
    out = q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]))
    out.copy_(o.transpose(1, 2))
    return out, lse.to(torch.float32).contiguous()


__all__ = ["sdpa_forward", "forward_graph"]

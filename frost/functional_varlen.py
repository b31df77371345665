"""frost.sdpa_forward_varlen / frost.sdpa_backward_varlen: packed variable-length (THD) attention, the twins of
frost.sdpa_forward / frost.sdpa_backward with FlashAttention's varlen convention.

q (Tq, Hq, Dqk), k (Tkv, Hkv, Dqk), v (Tkv, Hkv, Dv), out and dout (Tq, Hq, Dv): the tokens of every sequence packed
on the first axis, head dim innermost. cu_seqlens_q / cu_seqlens_kv int32 (B + 1,) on q's device: sequence b owns
tokens [cu[b], cu[b + 1]). max_seqlen_q / max_seqlen_kv: host ints >= every segment. Optional seqused_q /
seqused_kv int32 (B,): the valid tokens at the start of each segment (the rest is padding). lse (Hq, Tq) fp32,
head-major or token-major in memory. Masks, alignments, bands, sink and GQA mean per sequence what they mean per
batch row of the dense calls. Tokens past cu[-1] are never read: out = 0 and lse = -inf there, and zero gradients.

A call is keyed by its tensors' dtypes, shapes, strides and device plus the options and the two max_seqlen; the first
call with a key checks every argument in the caller's terms (frost.functional_varlen_checks) and builds a one-op
ragged graph in logical (H, T, D) shapes and its plan. Every call checks the cu_seqlens / seqused values (one
device-to-host read) unless FROST_CHECK_SEQ_LENS=0 or a CUDA graph is being captured."""

from __future__ import annotations

import torch

from frost.compile_api import build_plan, compiler_tag
from frost.errors import FrostError, TensorError
from frost.functional import resolve_deterministic, strict_bool, target_of, window
from frost.functional_checks import check_options
from frost.functional_varlen_checks import (TOKEN_ROLES, check_max_seqlen, check_packed_values, check_varlen_tensors,
                                            value_checks_enabled, varlen_caller_terms, varlen_name)
from frost.ir import (Graph, SdpaBackwardOp, SdpaForwardInputs, SdpaForwardOp, SdpaForwardOutputs, SdpaInputs,
                      SdpaOutputs, TensorSpec)
from frost.ir.tensors import DTYPE_BYTES, Ragged
from frost.lowering.plan_cache import PLANS

Q_SIDE = ("q", "o", "do", "lse", "dlse", "dq")
KV_SIDE = ("k", "v", "dk", "dv")
OPTIONAL = ("sink", "seq_len_q", "seq_len_kv")
OUTPUTS = ("o", "lse", "dq", "dk", "dv", "dsink")


def sdpa_forward_varlen(q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, *, softmax_scale=None,
                        causal=False, window_size=(None, None), causal_alignment="top_left", seqused_q=None,
                        seqused_kv=None, sink=None):
    """Packed attention forward -> (out (Tq, Hq, Dv) in q's dtype, lse (Hq, Tq) fp32 head-major, including the sink
    term). window_size=(left, right) keeps keys j in [diag - left, diag + right] of each sequence (None or -1:
    unbounded); causal=True sets right to 0 unless given."""
    given = _given(q, k, v, cu_seqlens_q, cu_seqlens_kv, seqused_q, seqused_kv, sink)
    options = (*_mask_options(causal, window_size, softmax_scale, causal_alignment),
               check_max_seqlen("max_seqlen_q", max_seqlen_q), check_max_seqlen("max_seqlen_kv", max_seqlen_kv))
    key = ("functional_varlen_forward", options, compiler_tag(), *_metas(given))
    (tq, hq, _), dv = q.shape, v.shape[2]
    outputs = {"o": q.new_zeros((tq, hq, dv)),
               "lse": torch.full((hq, tq), float("-inf"), dtype=torch.float32, device=q.device)}
    _compute(key, given, outputs, options, "forward")
    return outputs["o"], outputs["lse"]


def sdpa_backward_varlen(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, *,
                         softmax_scale=None, causal=False, window_size=(None, None), causal_alignment="top_left",
                         seqused_q=None, seqused_kv=None, sink=None, deterministic=None, dlse=None):
    """Packed attention backward -> (dq, dk, dv, dsink): dq/dk/dv like q/k/v (torch.zeros_like: tokens outside every
    segment get exact zeros), dsink fp32 (Hq,) summed over every valid token (None without a sink). Give it the
    options the forward used; dlse (Hq, Tq) fp32 is the gradient on the forward's lse when the loss uses it.
    deterministic=None follows torch.are_deterministic_algorithms_enabled()."""
    given = _given(q, k, v, cu_seqlens_q, cu_seqlens_kv, seqused_q, seqused_kv, sink)
    given |= {n: t for n, t in (("o", out), ("do", dout), ("lse", lse), ("dlse", dlse)) if t is not None or n != "dlse"}
    options = (*_mask_options(causal, window_size, softmax_scale, causal_alignment),
               check_max_seqlen("max_seqlen_q", max_seqlen_q), check_max_seqlen("max_seqlen_kv", max_seqlen_kv),
               resolve_deterministic(deterministic))
    key = ("functional_varlen_backward", options, compiler_tag(), *_metas(given))
    grads = {"dq": torch.zeros_like(q), "dk": torch.zeros_like(k), "dv": torch.zeros_like(v)}
    if sink is not None:
        grads["dsink"] = torch.zeros(sink.shape, dtype=torch.float32, device=sink.device)
    _compute(key, given, grads, options, "backward")
    return grads["dq"], grads["dk"], grads["dv"], grads.get("dsink")


def _given(q, k, v, cu_seqlens_q, cu_seqlens_kv, seqused_q, seqused_kv, sink) -> dict:
    """The call's input tensors by IR role (seqused_* are the op's seq_len_* inputs); absent optional ones left out."""
    given = {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_kv": cu_seqlens_kv,
             "seq_len_q": seqused_q, "seq_len_kv": seqused_kv, "sink": sink}
    return {n: t for n, t in given.items() if t is not None or n not in OPTIONAL}   # a None q is named as such


def _mask_options(causal, window_size, softmax_scale, causal_alignment) -> tuple:
    left, right = window(window_size)
    return softmax_scale, strict_bool("causal", causal), left, right, causal_alignment


def _metas(given: dict) -> tuple:
    """Each tensor's (role, dtype, shape, strides, device) for the plan key; a non-tensor or a 3-D role of another
    rank is named here, before any attribute of it is read."""
    metas = []
    for role, t in given.items():
        if not isinstance(t, torch.Tensor):
            raise TensorError(varlen_name(role), type(t).__name__, "a torch.Tensor")
        if role in TOKEN_ROLES and t.dim() != 3:
            raise TensorError(f"{varlen_name(role)}.shape", tuple(t.shape),
                              "rank 3: (T, H, D), the tokens of every sequence packed on the first axis")
        metas.append((role, t.dtype, t.shape, t.stride(), t.device))
    return tuple(metas)


def _nothing_to_compute(given: dict, options: tuple) -> bool:
    """No sequence, no token on a side, or a zero max_seqlen: no graph to build (a ragged graph needs B >= 1 and
    tokens on both sides); the reference gives the outputs (zeros, lse = sink or -inf)."""
    max_q, max_kv = options[5], options[6]
    return (given["cu_seqlens_q"].numel() <= 1 or given["q"].shape[0] == 0 or given["k"].shape[0] == 0
            or max_q == 0 or max_kv == 0)


def _check_all(given: dict, options: tuple) -> None:
    """Every metadata check in the caller's terms (what a new plan key runs)."""
    check_options(options[0], options[4])
    check_varlen_tensors(given)


def _build(given: dict, outputs: dict, options: tuple, kind: str):
    """The plan of a new key, after every argument is checked in the caller's terms."""
    _check_all(given, options)
    try:
        graph = varlen_graph(given | outputs, options, kind)
    except FrostError as exc:
        raise varlen_caller_terms(exc) from exc
    return build_plan(graph, target_of(given["q"].device))


def _compute(key: tuple, given: dict, outputs: dict, options: tuple, kind: str) -> None:
    """Fill ``outputs`` (a "forward" or "backward" call's): through the key's plan, or, for a problem with nothing to
    compute (no graph can describe it), through the reference after the same checks."""
    if _nothing_to_compute(given, options):
        _check_all(given, options)
        (_reference_forward if kind == "forward" else _reference_backward)(given, outputs, options)
    else:
        plan = PLANS.get_or_build(key, lambda: _build(given, outputs, options, kind))
        _run(plan, given | outputs)


def _run(plan, tensors: dict) -> None:
    """The plan on the call's tensors: on a kernel engine as they are, (T, H, D), without plan.execute's per-tensor
    checks (the call's key holds what they compare: its tensors built the plan; only the pointers' alignment is
    checked), else plan.execute on the logical (H, T, D) views. The engine checks the offsets' values when that is
    on (lowering/engines/length_checks); an error from the launch is named in the caller's terms."""
    try:
        if plan.runs_seq_major:
            plan._execute_trusted_seq_major(tensors, tensors["q"].device)
        else:
            plan.execute({n: (t.transpose(0, 1) if n in TOKEN_ROLES else t) for n, t in tensors.items()})
    except TensorError as exc:
        raise varlen_caller_terms(exc) from exc


def varlen_graph(tensors: dict, options: tuple, kind: str) -> Graph:
    """The one-op ragged graph of a packed call ("forward" or "backward"), tensors named by IR role, in logical
    shapes: q/o/do/dq (Hq, Tq, D), k/v/dk/dv (Hkv, Tkv, D), lse/dlse (Hq, Tq), ragged over cu_seqlens_q or
    cu_seqlens_kv with max_len = max_seqlen_q or max_seqlen_kv."""
    scale, causal, left, right, alignment, max_q, max_kv = options[:7]
    specs = {n: _spec(n, t, max_q, max_kv) for n, t in tensors.items()}
    named = {n: n for n in (*OPTIONAL, "dlse") if n in specs}
    mask = dict(attn_scale=scale, causal=causal, alignment=alignment, band_left=left, band_right=right)
    offsets = dict(cu_seqlens_q="cu_seqlens_q", cu_seqlens_kv="cu_seqlens_kv")
    if kind == "forward":
        op = SdpaForwardOp(name="attn", inputs=SdpaForwardInputs(q="q", k="k", v="v", **offsets, **named),
                           outputs=SdpaForwardOutputs(o="o", lse="lse"), **mask)
    else:
        op = SdpaBackwardOp(
            name="attn", inputs=SdpaInputs(q="q", k="k", v="v", o="o", do="do", lse="lse", **offsets, **named),
            outputs=SdpaOutputs(dq="dq", dk="dk", dv="dv", dsink="dsink" if "sink" in specs else None),
            deterministic=options[7], **mask)
    return Graph(name=f"sdpa_{kind}_varlen", tensors=tuple(specs.values()), ops=(op,))


def _spec(role: str, t: torch.Tensor, max_q: int, max_kv: int) -> TensorSpec:
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in DTYPE_BYTES:   # the caller-terms checks name what each role accepts; this is a backstop
        raise TensorError(f"{varlen_name(role)}.dtype", t.dtype, ", ".join(DTYPE_BYTES))
    if role in TOKEN_ROLES:
        t = t.transpose(0, 1)
    ragged = None
    if role in Q_SIDE:
        ragged = Ragged(offsets="cu_seqlens_q", max_len=max_q)
    elif role in KV_SIDE:
        ragged = Ragged(offsets="cu_seqlens_kv", max_len=max_kv)
    return TensorSpec(name=role, shape=tuple(t.shape), strides=tuple(t.stride()), dtype=dtype, ragged=ragged)


def _reference_args(given: dict, options: tuple) -> tuple[dict, dict] | None:
    """A call that builds no graph: its values checked (when on), then the reference's logical views and keyword
    options, or None when no query token is in any sequence (the outputs keep their fill)."""
    if value_checks_enabled():
        check_packed_values(given, options[5], options[6])
    if given["cu_seqlens_q"].numel() <= 1 or given["q"].shape[0] == 0:
        return None
    scale, causal, left, right, alignment = options[:5]
    views = {n: (t.transpose(0, 1) if n in TOKEN_ROLES else t) for n, t in given.items()}
    kwargs = dict(scale=scale, causal=causal, alignment=alignment, band_left=left, band_right=right,
                  seqused_q=views.get("seq_len_q"), seqused_kv=views.get("seq_len_kv"), sink=views.get("sink"))
    return views, kwargs


def _reference_forward(given: dict, outputs: dict, options: tuple) -> None:
    """A problem with nothing to compute, through frost.reference.varlen (outputs stay 0 / -inf without tokens)."""
    args = _reference_args(given, options)
    if args is None:
        return
    from frost.reference.varlen import attention_forward_varlen

    views, kwargs = args
    o, lse = attention_forward_varlen(views["q"], views["k"], views["v"], views["cu_seqlens_q"],
                                      views["cu_seqlens_kv"], **kwargs)
    outputs["o"].copy_(o.transpose(0, 1))
    outputs["lse"].copy_(lse)


def _reference_backward(given: dict, grads: dict, options: tuple) -> None:
    """A problem with nothing to compute: zero gradients, and dsink through frost.reference.varlen."""
    args = _reference_args(given, options)
    if args is None:
        return
    from frost.reference.varlen import attention_backward_varlen

    views, kwargs = args
    results = attention_backward_varlen(*(views[n] for n in ("q", "k", "v", "o", "do", "lse", "cu_seqlens_q",
                                                             "cu_seqlens_kv")), dlse=views.get("dlse"), **kwargs)
    for name, value in zip(("dq", "dk", "dv", "dsink"), results):
        if name in grads and value is not None:
            grads[name].copy_(value.transpose(0, 1) if name in TOKEN_ROLES else value)


__all__ = ["sdpa_backward_varlen", "sdpa_forward_varlen", "varlen_graph"]

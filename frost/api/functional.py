"""FlashAttention-style functional calls: frost.sdpa_forward / frost.sdpa_backward over dense (B, S, H, D) tensors
and their packed twins frost.sdpa_forward_varlen / frost.sdpa_backward_varlen over (T, H, D) tokens (FlashAttention's
varlen convention). All four are one implementation (api.calls) with the layout as an argument; each argument passes
the gate (api.arguments) first.

Dense: q (B, Sq, Hq, Dqk), k (B, Skv, Hkv, Dqk), v (B, Skv, Hkv, Dv), out and dout (B, Sq, Hq, Dv), lse and dlse
(B, Hq, Sq) fp32; optional seq_len_q / seq_len_kv int32 (B,) and sink fp32 (Hq,). Packed: q (Tq, Hq, Dqk), k / v
(Tkv, Hkv, D), out / dout (Tq, Hq, Dv), lse / dlse (Hq, Tq) fp32 in either memory order; cu_seqlens_q / cu_seqlens_kv
int32 (B + 1,) on q's device (sequence b owns tokens [cu[b], cu[b + 1])), max_seqlen_q / max_seqlen_kv host ints
>= every sequence, optional seqused_q / seqused_kv int32 (B,) (the valid tokens at each sequence's start). Any
strides with the head dim innermost work.

window_size=(left, right) keeps keys j in [diag - left, diag + right] (None or a negative int: unbounded);
causal=True bounds the right side at 0 unless given; causal_alignment anchors the diagonal ("top_left": j = i,
"bottom_right": j = i + Skv - Sq, per batch row or per sequence). lse includes the sink term. deterministic=None
follows torch.are_deterministic_algorithms_enabled()."""

from __future__ import annotations

from typing import Optional, Union

from torch import Tensor

from frost.api import arguments as gate
from frost.api.calls import DENSE, PACKED, Call, backward, forward
from frost.spec import Alignment

Window = tuple[Optional[int], Optional[int]]
Grads = tuple[Tensor, Tensor, Tensor, Optional[Tensor]]
Scale = Union[float, int, None]


def sdpa_forward(q: Tensor, k: Tensor, v: Tensor, *, softmax_scale: Scale = None, causal: bool = False,
                 window_size: Window = (None, None), causal_alignment: Alignment = "top_left",
                 seq_len_q: Optional[Tensor] = None, seq_len_kv: Optional[Tensor] = None,
                 sink: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
    """Attention forward -> (out (B, Sq, Hq, Dv) contiguous in q's dtype, lse (B, Hq, Sq) fp32)."""
    options = gate.options(softmax_scale, causal, window_size, causal_alignment)
    given = gate.tensors(dict(q=q, k=k, v=v, sink=sink, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv), packed=False)
    return forward(Call("forward", DENSE, given, options))


def sdpa_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor, *,
                  softmax_scale: Scale = None, causal: bool = False, window_size: Window = (None, None),
                  causal_alignment: Alignment = "top_left", seq_len_q: Optional[Tensor] = None,
                  seq_len_kv: Optional[Tensor] = None, sink: Optional[Tensor] = None,
                  deterministic: Optional[bool] = None, dlse: Optional[Tensor] = None) -> Grads:
    """Attention backward -> (dq, dk, dv laid out like q, k, v; dsink fp32 (Hq,) or None without a sink). dlse
    (B, Hq, Sq) fp32: the gradient on the forward's lse output, when the loss uses it."""
    options = gate.options(softmax_scale, causal, window_size, causal_alignment, deterministic)
    given = gate.tensors(dict(q=q, k=k, v=v, o=out, do=dout, lse=lse, sink=sink, dlse=dlse, seq_len_q=seq_len_q,
                              seq_len_kv=seq_len_kv), packed=False)
    return backward(Call("backward", DENSE, given, options,
                         deterministic=gate.resolve_deterministic(options.deterministic)))


def sdpa_forward_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor,
                        max_seqlen_q: int, max_seqlen_kv: int, *, softmax_scale: Scale = None, causal: bool = False,
                        window_size: Window = (None, None), causal_alignment: Alignment = "top_left",
                        seqused_q: Optional[Tensor] = None, seqused_kv: Optional[Tensor] = None,
                        sink: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
    """Packed attention forward -> (out (Tq, Hq, Dv) in q's dtype, lse (Hq, Tq) fp32). Tokens outside every
    sequence get out = 0 and lse = -inf."""
    options = gate.options(softmax_scale, causal, window_size, causal_alignment)
    max_seqlens = (gate.host_int("max_seqlen_q", max_seqlen_q), gate.host_int("max_seqlen_kv", max_seqlen_kv))
    given = gate.tensors(dict(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_kv=cu_seqlens_kv,
                              seq_len_q=seqused_q, seq_len_kv=seqused_kv, sink=sink), packed=True)
    return forward(Call("forward", PACKED, given, options, max_seqlens))


def sdpa_backward_varlen(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor,
                         cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor, max_seqlen_q: int, max_seqlen_kv: int, *,
                         softmax_scale: Scale = None, causal: bool = False, window_size: Window = (None, None),
                         causal_alignment: Alignment = "top_left", seqused_q: Optional[Tensor] = None,
                         seqused_kv: Optional[Tensor] = None, sink: Optional[Tensor] = None,
                         deterministic: Optional[bool] = None, dlse: Optional[Tensor] = None) -> Grads:
    """Packed attention backward -> (dq, dk, dv like q, k, v, with exact zeros on tokens outside every sequence;
    dsink fp32 (Hq,) or None). Give it the options the forward used."""
    options = gate.options(softmax_scale, causal, window_size, causal_alignment, deterministic)
    max_seqlens = (gate.host_int("max_seqlen_q", max_seqlen_q), gate.host_int("max_seqlen_kv", max_seqlen_kv))
    given = gate.tensors(dict(q=q, k=k, v=v, o=out, do=dout, lse=lse, cu_seqlens_q=cu_seqlens_q,
                              cu_seqlens_kv=cu_seqlens_kv, seq_len_q=seqused_q, seq_len_kv=seqused_kv, sink=sink,
                              dlse=dlse), packed=True)
    return backward(Call("backward", PACKED, given, options, max_seqlens,
                         gate.resolve_deterministic(options.deterministic)))


__all__ = ["sdpa_backward", "sdpa_backward_varlen", "sdpa_forward", "sdpa_forward_varlen"]

"""The fp64 oracle with frost.attention's arguments: (B, S, H, D) or packed (T, H, D) tensors and the public options
(softmax_scale, causal, window_size, causal_alignment), so a test checks an API call against the math with the
call's own options. Differentiable in q, k, v and sink: autograd through it gives the oracle's gradients."""

from __future__ import annotations

import torch

from helpers.oracle import attention_forward
from helpers.oracle_packed import attention_forward_varlen


def mask_options(softmax_scale=None, causal: bool = False, window_size=(None, None),
                 causal_alignment: str = "top_left", deterministic=None) -> dict:
    """The public options as the oracle's keyword arguments: window_size (left, right), None or a negative int
    unbounded; causal makes an unbounded right side 0. deterministic does not change the math."""
    left, right = (None if w is None or w < 0 else int(w) for w in window_size)
    return dict(scale=softmax_scale, causal=causal, alignment=causal_alignment, band_left=left, band_right=right)


def attention(q, k, v, *, sink=None, seq_len_q=None, seq_len_kv=None, return_lse: bool = False, **options):
    """out (B, Sq, Hq, Dv) fp64, and with return_lse the LSE (B, Hq, Sq) (-inf on padded rows and rows that see
    nothing)."""
    o, lse = attention_forward(*(t.transpose(1, 2) for t in (q, k, v)), sink=sink, seq_len_q=seq_len_q,
                               seq_len_kv=seq_len_kv, **mask_options(**options))
    out = o.transpose(1, 2)
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q=None, max_seqlen_kv=None, *, seqused_q=None,
                     seqused_kv=None, sink=None, return_lse: bool = False, **options):
    """out (Tq, Hq, Dv) fp64, and with return_lse the LSE (Hq, Tq); every sequence alone (the max_seqlen arguments
    are frost's launch bounds, not part of the math)."""
    o, lse = attention_forward_varlen(*(t.transpose(0, 1) for t in (q, k, v)), cu_seqlens_q, cu_seqlens_kv,
                                      seqused_q=seqused_q, seqused_kv=seqused_kv, sink=sink,
                                      **mask_options(**options))
    out = o.transpose(0, 1)
    return (out, lse) if return_lse else out


def masked_lse_loss(lse: torch.Tensor, dlse: torch.Tensor) -> torch.Tensor:
    """sum(lse * dlse) over the finite entries: a -inf LSE (a padded row, a row that sees nothing) carries no
    gradient, and -inf * 0 would be NaN."""
    return (torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse)) * dlse).sum()

"""Reference forward: O and LSE (sink included), one query block at a time.

Convention for padded query rows (i >= seq_len_q[b]): O = 0 and LSE = −∞, as for a row that sees no key and
has no sink. A valid row with no valid key but a sink gets LSE = sink and O = 0. Non-finite inputs follow the
math (scores.py): O sums over kept keys only, so a NaN in V reaches only the rows that attend its key."""

from __future__ import annotations

import torch

from frost.reference import mask as masks
from frost.reference.blocks import block_rows_for, empty_like_layout, grouped_rows, row_blocks
from frost.reference.inputs import ReferenceProblem, resolve
from frost.reference.numerics import as_operand
from frost.reference.scores import kept_matmul, masked_scores, probabilities


def _block(p: ReferenceProblem, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sink: torch.Tensor | None,
           i0: int, i1: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(O, LSE) of rows [i0, i1), shaped (B, Hkv, G, rows, Dv) and (B, Hkv, G, rows), compute dtype."""
    keep = masks.block_mask(p.mask, i0, i1, p.seq_kv)
    s = masked_scores(grouped_rows(q, p.heads_kv, i0, i1, p.compute_dtype), k, p.scale, keep)
    lse = torch.logsumexp(s, dim=-1)
    if sink is not None:
        lse = torch.logaddexp(lse, sink)
    rows = masks.row_valid(p.mask, i0, i1)[:, None, None]
    lse = lse.masked_fill(~rows, float("-inf"))
    # a row whose LSE is −∞ weighs nothing and reads no V (O = 0, as for a row that sees no key)
    live = lambda: keep[:, None, None] & (lse != float("-inf"))[..., None]  # noqa: E731
    o = kept_matmul(as_operand(probabilities(s, lse, keep), p.io_dtype), v, live)
    return o, lse


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float | None = None,
                      causal: bool = False, alignment: str = "top_left", band_left: int | None = None,
                      band_right: int | None = None, seq_len_q: torch.Tensor | None = None,
                      seq_len_kv: torch.Tensor | None = None, sink: torch.Tensor | None = None,
                      block_rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention forward on logical BHSD tensors (any strides). Returns O (B, Hq, Sq, Dv) in q's dtype and
    memory order, and LSE (B, Hq, Sq) in natural log including the sink term: fp32, or fp64 for fp64 inputs
    so the oracle keeps full precision. `block_rows` overrides the query-block size (tests, memory)."""
    p = resolve(q, k, v, scale=scale, causal=causal, alignment=alignment, band_left=band_left,
                band_right=band_right, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, sink=sink)
    g, cd = p.group, p.compute_dtype
    kc, vc = k.to(cd).unsqueeze(2), v.to(cd).unsqueeze(2)
    sink_c = sink.to(cd).view(1, p.heads_kv, g, 1) if sink is not None else None
    o = empty_like_layout(q, (p.batch, p.heads_q, p.seq_q, p.dim_v), p.io_dtype)
    lse = torch.empty((p.batch, p.heads_q, p.seq_q), dtype=cd, device=q.device)
    rows = block_rows_for(p.batch, p.heads_q, p.seq_q, p.seq_kv, block_rows)
    for i0, i1 in row_blocks(p.seq_q, rows):
        o_blk, lse_blk = _block(p, q, kc, vc, sink_c, i0, i1)
        o[:, :, i0:i1] = o_blk.reshape(p.batch, p.heads_q, i1 - i0, p.dim_v)
        lse[:, :, i0:i1] = lse_blk.reshape(p.batch, p.heads_q, i1 - i0)
    return o, lse

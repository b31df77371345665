"""The one mask of the reference engine: forward and backward both call `block_mask`, so causal, band,
alignment and padding are decided in exactly one place."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class KeepMask:
    """A resolved mask. `left`/`right` are the band bounds around the diagonal (None = unbounded; `causal`
    has already been folded into `right`). `sq`/`skv` are per-batch lengths, int64 (B,) on the compute device."""

    sq: torch.Tensor
    skv: torch.Tensor
    left: int | None
    right: int | None
    bottom_right: bool


def within_span(bound: int | None, seq_q: int, seq_kv: int) -> int | None:
    """A band bound as the mask applies it: one of seq_q + seq_kv or more excludes no key of any row (|j - diag| stays
    below it), so it is unbounded; the mask's int64 arithmetic then never meets a huge caller value."""
    return None if bound is None or bound >= seq_q + seq_kv else bound


def block_mask(spec: KeepMask, i0: int, i1: int, skv_total: int) -> torch.Tensor:
    """Boolean keep-mask (B, i1 - i0, Skv) for query rows [i0, i1): True where key j is attended by row i.

    Row i is valid iff i < sq_b and key j iff j < skv_b; a valid pair is kept iff
    j ∈ [diag − left, diag + right] with diag = i (top-left) or i + (skv_b − sq_b) (bottom-right).
    Padded rows are all False, so everything downstream of the mask is exactly zero for them.
    """
    device = spec.sq.device
    i = torch.arange(i0, i1, device=device).view(1, -1, 1)
    j = torch.arange(skv_total, device=device).view(1, 1, -1)
    sq = spec.sq.view(-1, 1, 1)
    skv = spec.skv.view(-1, 1, 1)
    keep = (i < sq) & (j < skv)
    diag = i + (skv - sq) if spec.bottom_right else i
    if spec.left is not None:
        keep = keep & (j >= diag - spec.left)
    if spec.right is not None:
        keep = keep & (j <= diag + spec.right)
    return keep


def row_valid(spec: KeepMask, i0: int, i1: int) -> torch.Tensor:
    """(B, i1 - i0) bool: query row i of batch b is a real row (i < sq_b), not padding."""
    i = torch.arange(i0, i1, device=spec.sq.device).view(1, -1)
    return i < spec.sq.view(-1, 1)

"""Score and probability tiles of one query block, shared by forward and backward so both see the same
masked scores and the same P (exact zeros outside the mask, never NaN)."""

from __future__ import annotations

import torch


def masked_scores(q: torch.Tensor, k: torch.Tensor, scale: float, keep: torch.Tensor) -> torch.Tensor:
    """S = scale·Q·Kᵀ for a (B, Hkv, G, rows, D) query block against (B, Hkv, 1, Skv, D) keys; −∞ where
    `keep` (B, rows, Skv) is False."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    return s.masked_fill(~keep[:, None, None], float("-inf"))


def probabilities(s: torch.Tensor, lse: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """P = exp(S − LSE) on kept entries and exactly 0 elsewhere. Selecting (not multiplying) keeps garbage or
    −∞ LSE of padded and empty rows from turning into NaN."""
    lse = torch.where(torch.isfinite(lse), lse, torch.zeros((), dtype=lse.dtype, device=lse.device))
    p = torch.exp(s - lse[..., None])
    return torch.where(keep[:, None, None], p, torch.zeros((), dtype=p.dtype, device=p.device))

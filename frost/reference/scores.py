"""Score and probability tiles of one query block, shared by forward and backward so both see the same
masked scores and the same P (exact zeros outside the mask), and the sums over kept entries only.

Non-finite inputs follow the math: an entry reads q, k, v, dO only where the mask keeps it, so a NaN or ±inf
reaches exactly the outputs whose formula reads it (see README's contract); a masked entry is selected away,
never multiplied by 0 (0·NaN would be NaN)."""

from __future__ import annotations

from typing import Callable

import torch


def masked_scores(q: torch.Tensor, k: torch.Tensor, scale: float, keep: torch.Tensor) -> torch.Tensor:
    """S = scale·Q·Kᵀ for a (B, Hkv, G, rows, D) query block against (B, Hkv, 1, Skv, D) keys; −∞ where
    `keep` (B, rows, Skv) is False."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    return s.masked_fill(~keep[:, None, None], float("-inf"))


def probabilities(s: torch.Tensor, lse: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """P = exp(S − LSE) on kept entries and exactly 0 elsewhere. A NaN or +∞ LSE flows into P as the formula
    says (exp(s − ∞) = 0, exp(∞ − ∞) = NaN); a row whose LSE is −∞ (every kept score −∞, no sink) gets P = 0,
    the limit, where the formula would read −∞ − (−∞): its LSE is taken as +∞, so exp(−∞ − ∞) = 0.
    Selecting (not multiplying) keeps garbage LSE of padded rows out."""
    lse = torch.where(lse == float("-inf"), float("inf"), lse)
    p = torch.exp(s - lse[..., None])
    return torch.where(keep[:, None, None], p, torch.zeros((), dtype=p.dtype, device=p.device))


def sink_weight(sink: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """exp(sink − LSE) = ∂LSE/∂sink with its limits: 1 where sink = LSE = +∞ (all weight on the sink), 0 where
    sink = −∞ (no sink), whatever the LSE; NaN where either is NaN."""
    w = torch.exp(sink - lse)
    w = torch.where(sink == lse, torch.ones((), dtype=w.dtype, device=w.device), w)
    return torch.where(sink == float("-inf"), torch.zeros((), dtype=w.dtype, device=w.device), w)


def _hits(rows: torch.Tensor, cols: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(rows @ cols) > 0 for boolean operands: whether some kept term of each output pairs the two flags."""
    return torch.matmul(rows.to(dtype), cols.to(dtype)) > 0


def kept_matmul(a: torch.Tensor, b: torch.Tensor, keep: Callable[[], torch.Tensor]) -> torch.Tensor:
    """Σ_j a_ij·b_jk over the kept j only: a (..., M, K) is exactly 0 where the mask `keep()` (broadcast to a's
    shape; built only when needed) is False, b is (..., K, N). With b finite this is a @ b. Where b holds NaN or
    ±∞, a plain matmul would read them through masked zeros (0·NaN = NaN); here each output gets the IEEE value
    of its kept terms alone: NaN if a kept term is NaN (NaN in b, or 0·±∞), ±∞ if the kept infinities agree in
    sign, NaN if they do not. (A kept ±∞ in a meeting a ±∞ in b gives NaN rather than ±∞.)"""
    finite = torch.isfinite(b)
    if bool(finite.all()):
        return torch.matmul(a, b)
    zero = torch.zeros((), dtype=b.dtype, device=b.device)
    out = torch.matmul(a, torch.where(finite, b, zero))
    kept = keep().expand(a.shape)
    pos_inf, neg_inf = b == float("inf"), b == float("-inf")
    a_pos, a_neg, a_zero = kept & (a > 0), kept & (a < 0), kept & (a == 0)
    nan = _hits(kept, torch.isnan(b), a.dtype) | _hits(a_zero, pos_inf | neg_inf, a.dtype)
    up = _hits(a_pos, pos_inf, a.dtype) | _hits(a_neg, neg_inf, a.dtype)
    down = _hits(a_pos, neg_inf, a.dtype) | _hits(a_neg, pos_inf, a.dtype)
    special = torch.where(nan | (up & down), float("nan"), torch.where(up, float("inf"), float("-inf")))
    return torch.where(nan | up | down, out + special.to(out.dtype), out)

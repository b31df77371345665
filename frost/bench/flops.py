"""The FLOP count every TFLOP/s in the report divides by (the FlashAttention / cuDNN benchmark convention).

    forward  = 4 · B · Hq · D_avg · pairs,   D_avg = (Dqk + Dv) / 2   (per pair: 2·Dqk for S = QKᵀ, 2·Dv for PV)
    backward = 2.5 · forward                 (five GEMMs: S recompute, dP, dV, dK, dQ = 2.5 × the forward's two)
    step     = 3.5 · forward                 (one forward and its backward)
    pairs    = Sq · Skv                      without a mask
             = Sq · Skv / 2                  causal (the convention: half the matrix, the diagonal not counted)
             = #{(i, j) in the band}         sliding window: only the kept band is counted, exactly

Heads count as Hq (every query head does its own GEMMs, GQA or not); a sink adds no GEMM FLOPs."""

from __future__ import annotations

from frost.bench.cases import Case


def band_pairs(seq_q: int, seq_kv: int, left: int | None, right: int | None, bottom_right: bool = False) -> int:
    """Exact number of (i, j) with j in [diag - left, diag + right] ∩ [0, seq_kv), diag = i (+ seq_kv - seq_q)."""
    offset = seq_kv - seq_q if bottom_right else 0
    total = 0
    for i in range(seq_q):
        diag = i + offset
        lo = 0 if left is None else max(0, diag - left)
        hi = seq_kv - 1 if right is None else min(seq_kv - 1, diag + right)
        total += max(0, hi - lo + 1)
    return total


def attended_pairs(c: Case) -> float:
    """The (query, key) pairs the FLOP count covers (see the module docstring)."""
    if c.window is not None:
        left, right = c.band
        return float(band_pairs(c.seq_q, c.seq_kv, left, right))
    full = float(c.seq_q * c.seq_kv)
    return full / 2 if c.causal else full


def forward_flops(c: Case) -> float:
    d_avg = (c.head_dim + c.head_dim_v) / 2
    return 4.0 * c.batch * c.heads_q * d_avg * attended_pairs(c)


def backward_flops(c: Case) -> float:
    return 2.5 * forward_flops(c)


PASSES = ("backward", "forward", "step")     # what `frost bench --pass` times; step = forward + backward
PASS_FACTOR = {"backward": 2.5, "forward": 1.0, "step": 3.5}


def pass_flops(c: Case, which: str) -> float:
    """The FLOPs of one timed call of pass ``which`` (a multiple of the forward's, see PASS_FACTOR)."""
    return PASS_FACTOR[which] * forward_flops(c)


def pass_label(which: str) -> str:
    """How a table or chart names the FLOPs it divides by."""
    return "forward FLOPs" if which == "forward" else f"{which} FLOPs ({PASS_FACTOR[which]:g} x forward)"


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12

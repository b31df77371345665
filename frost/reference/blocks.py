"""How the reference engine splits work: query-row blocks (all batches and heads at once) small enough that
the score block B·Hq·rows·Skv stays bounded, so S = 8192 never materialises an S×S matrix per head."""

from __future__ import annotations

import torch

from frost.errors import TensorError
from frost.spec import as_int

DEFAULT_BLOCK_ROWS = 256
MAX_BLOCK_ELEMENTS = 1 << 24  # score-block entries: 64 MiB per fp32 temporary


def block_rows_for(batch: int, heads_q: int, seq_q: int, seq_kv: int, block_rows: int | None = None) -> int:
    """Rows per query block: `block_rows` if given, else DEFAULT_BLOCK_ROWS shrunk until a score block
    holds at most MAX_BLOCK_ELEMENTS entries (never below one row)."""
    if block_rows is not None:
        rows = as_int(block_rows)
        if rows is None or rows < 1:
            raise TensorError("block_rows", block_rows, "None (automatic) or an integer >= 1")
    else:
        rows = max(1, min(DEFAULT_BLOCK_ROWS, MAX_BLOCK_ELEMENTS // max(1, batch * heads_q * seq_kv)))
    return max(1, min(rows, seq_q))


def row_blocks(seq_q: int, rows: int) -> list[tuple[int, int]]:
    """[i0, i1) ranges covering 0..seq_q in order."""
    return [(i0, min(i0 + rows, seq_q)) for i0 in range(0, seq_q, rows)]


def grouped_rows(x: torch.Tensor, heads_kv: int, i0: int, i1: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows [i0, i1) of a (B, Hq, S, ...) tensor as (B, Hkv, G, rows, ...) in `dtype`: query head h = g + G·kv
    sits at [kv, g], so a kv head broadcasts over its group without copying K or V."""
    block = x[:, :, i0:i1].to(dtype)
    b, hq = block.shape[:2]
    return block.reshape(b, heads_kv, hq // heads_kv, *block.shape[2:])


def empty_like_layout(ref: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised (B, H, S, D) tensor whose dims are ordered in memory like `ref`'s (a BSHD view in,
    a BSHD view out), so outputs keep the caller's layout."""
    order = sorted(range(ref.dim()), key=lambda d: (-ref.stride(d), d))
    storage = torch.empty([shape[d] for d in order], dtype=dtype, device=ref.device)
    return storage.permute([order.index(d) for d in range(ref.dim())])

"""Which band around the diagonal a transformers mask function keeps, exactly.

A band (left, right) keeps key position - query position in [-left, right] (None: unbounded). transformers' own
causal, bidirectional and sliding-window functions are recognised by their code objects and read without
evaluating them; any other function is evaluated in row chunks and compared entry by entry with the bands frost
runs. Either way the answer lists every band that keeps the same pairs on this grid of positions."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import torch
from transformers.masking_utils import (and_masks, bidirectional_mask_function, causal_mask_function, sdpa_mask,
                                        sliding_window_overlay)

from frost.integrations.transformers.errors import UnsupportedAttentionMask

Band = tuple[Optional[int], Optional[int]]
# transformers' mask functions: (batch_idx, head_idx, q_idx, kv_idx) -> whether key kv_idx is kept for query q_idx
MaskFunction = Callable[[int, int, int, int], bool]
CAUSAL: Band = (None, 0)
BIDIRECTIONAL: Band = (None, None)
_CHECK_ELEMENTS = 1 << 22   # mask entries compared per chunk when a mask function is checked densely
_AND_CODE = and_masks(causal_mask_function).__code__
_SLIDING_CODE = sliding_window_overlay(1).__code__


def mask_bands(mask_function: MaskFunction, batch_size: int, q_length: int, kv_length: int, q_offset: int,
               kv_offset: int, windows: list[int], use_vmap: bool, device: Union[torch.device, str]
               ) -> tuple[Band, ...]:
    """Every band, among causal, bidirectional, (W - 1, 0) and (W, W) for W in `windows`, that keeps exactly what
    `mask_function` keeps for queries at q_offset + [0, q_length) and keys at kv_offset + [0, kv_length)."""
    rel_range = (kv_offset - (q_offset + q_length - 1), kv_offset + kv_length - 1 - q_offset)
    candidates = [CAUSAL, BIDIRECTIONAL, *((w - 1, 0) for w in windows), *((w, w) for w in windows)]
    known = recognised_band(mask_function)
    if known is not None:
        return (known, *(c for c in candidates if c != known and same_on_grid(c, known, rel_range)))
    return checked_bands(mask_function, candidates, batch_size, q_length, kv_length, q_offset, kv_offset,
                         use_vmap, device)


def recognised_band(mask_function: MaskFunction) -> Optional[Band]:
    """The band of transformers' causal_mask_function, bidirectional_mask_function or
    sliding_window_causal_mask_function(W) (and_masks of sliding_window_overlay(W) and the causal function);
    None for anything else."""
    if mask_function is causal_mask_function:
        return CAUSAL
    if mask_function is bidirectional_mask_function:
        return BIDIRECTIONAL
    if getattr(mask_function, "__code__", None) is _AND_CODE:
        parts = closure_values(mask_function).get("mask_functions", ())
        if (len(parts) == 2 and parts[1] is causal_mask_function
                and getattr(parts[0], "__code__", None) is _SLIDING_CODE):
            window = closure_values(parts[0]).get("sliding_window")
            if isinstance(window, int) and window > 0:
                return (window - 1, 0)
    return None


def closure_values(fn: Callable[..., Any]) -> dict[str, Any]:
    """A function's closure variables by name (how transformers' mask factories hold their arguments)."""
    return dict(zip(fn.__code__.co_freevars, (cell.cell_contents for cell in fn.__closure__ or ())))


def same_on_grid(a: Band, b: Band, rel_range: tuple[int, int]) -> bool:
    """Whether two bands keep the same pairs when key - query positions span the integers in rel_range."""
    lo, hi = rel_range

    def kept(band: Band) -> tuple[int, int]:
        left, right = band
        return (lo if left is None else max(lo, -left), hi if right is None else min(hi, right))

    (a0, a1), (b0, b1) = kept(a), kept(b)
    return (a0, a1) == (b0, b1) or (a0 > a1 and b0 > b1)


def checked_bands(mask_function: MaskFunction, candidates: list[Band], batch_size: int, q_length: int,
                  kv_length: int, q_offset: int, kv_offset: int, use_vmap: bool, device: Union[torch.device, str]
                  ) -> tuple[Band, ...]:
    """The candidates equal to `mask_function`, evaluated (through transformers' sdpa_mask) in row chunks;
    UnsupportedAttentionMask when none is."""
    rows = max(1, _CHECK_ELEMENTS // max(1, batch_size * kv_length))
    kv_pos = torch.arange(kv_length, device=device) + kv_offset
    for i0 in range(0, q_length, rows):
        i1 = min(q_length, i0 + rows)
        kept = sdpa_mask(batch_size=batch_size, q_length=i1 - i0, kv_length=kv_length, q_offset=q_offset + i0,
                         kv_offset=kv_offset, mask_function=mask_function, attention_mask=None,
                         allow_is_causal_skip=False, allow_is_bidirectional_skip=False, use_vmap=use_vmap,
                         device=device)
        assert kept is not None   # sdpa_mask returns None only where a skip is allowed
        rel = kv_pos[None, :] - torch.arange(q_offset + i0, q_offset + i1, device=device)[:, None]
        candidates = [c for c in candidates if torch.equal(kept, band_keep(rel, c).expand_as(kept))]
        if not candidates:
            raise UnsupportedAttentionMask(
                "mask_function", getattr(mask_function, "__qualname__", repr(mask_function)),
                "causal, bidirectional or sliding-window masks (window from config.sliding_window), with right "
                "padding from the 2-D attention_mask",
                "chunked attention, or_mask/and_mask functions and block overlays build masks that frost does not "
                "express")
    return tuple(candidates)


def band_keep(rel: torch.Tensor, band: Band) -> torch.Tensor:
    """Which (query, key) pairs a band keeps, from rel = key position - query position."""
    left, right = band
    keep = torch.ones_like(rel, dtype=torch.bool)
    if left is not None:
        keep &= rel >= -left
    if right is not None:
        keep &= rel <= right
    return keep

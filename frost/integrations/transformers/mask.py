"""transformers' mask interface for frost: a mask request becomes a FrostMask (band, alignment, key lengths).

transformers builds one mask per mask type and forward (`create_causal_mask`, `create_sliding_window_causal_mask`,
...) through the function registered for the attention implementation, then hands it to every attention layer.
A materialised (B, 1, Sq, Skv) mask would cost O(S²) memory, so frost's mask function keeps only what frost's
kernels take: the band around the diagonal, the diagonal's alignment and the per-batch key lengths. It checks
exactly that this description equals the mask transformers asked for, and raises UnsupportedAttentionMask when it
does not (left padding, chunked attention, custom mask functions): never a different mask. A mask transformers
builds for packed rows (position_ids restarting within a row) is its per-document function wrapped in
transformers' packed-sequence functions: frost keeps the per-document band and the position_ids, from which the
attention function reads the documents (packed.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

import torch
from transformers.masking_utils import causal_mask_function, prepare_padding_mask

from frost.integrations.transformers.band import BIDIRECTIONAL, Band, MaskFunction, mask_bands, recognised_band
from frost.integrations.transformers.errors import UnsupportedAttentionMask
from frost.integrations.transformers.packed import DocumentsMemo, unpacked_mask_function
from frost.spec import Alignment

if TYPE_CHECKING:
    from transformers import PretrainedConfig


@dataclass(frozen=True, eq=False)
class FrostMask:
    """A mask in frost's terms: key j of query i (local indices) is kept iff j - i - diag lies in
    [-left, right] (None: unbounded) for the band (left, right), with diag 0 (top_left) or Skv - Sq (bottom_right),
    and j < seq_len_kv[b] (None: every key is valid). `bands` lists every band that keeps the same pairs on this
    grid (the first when the layer names none). Queries are never masked: a padded query row attends like any
    other row, as in transformers' own masks. position_ids is set when transformers' mask splits rows into packed
    documents (the band then holds within each document); memo keeps what the attention function reads once per
    mask (packed.call_documents)."""

    q_length: int
    kv_length: int
    bands: tuple[Band, ...]
    alignment: Alignment
    seq_len_kv: Optional[torch.Tensor]
    position_ids: Optional[torch.Tensor] = None
    memo: DocumentsMemo = field(default_factory=dict, repr=False)


def frost_mask(batch_size: int, q_length: int, kv_length: int, q_offset: int = 0, kv_offset: int = 0,
               mask_function: MaskFunction = causal_mask_function, attention_mask: Optional[torch.Tensor] = None,
               local_size: Optional[int] = None, config: Optional[PretrainedConfig] = None, use_vmap: bool = False,
               device: Union[torch.device, str] = "cpu", **kwargs: Any) -> FrostMask:
    """The AttentionMaskInterface entry for "frost" (same arguments as transformers.masking_utils.sdpa_mask)."""
    q_offset, kv_offset = int(q_offset), int(kv_offset)
    windows = sorted({w for w in (local_size, getattr(config, "sliding_window", None)) if w})
    per_document, position_ids = unpacked_mask_function(mask_function)
    if position_ids is not None and recognised_band(per_document) is None:
        raise UnsupportedAttentionMask(
            "mask_function", getattr(per_document, "__qualname__", repr(per_document)),
            "causal, bidirectional or sliding-window masks within each packed document",
            "packed rows (position_ids restarting within a row) with or_mask/and_mask functions or block overlays")
    bands = mask_bands(per_document, batch_size, q_length, kv_length, q_offset, kv_offset, windows, use_vmap,
                       device)
    seq_len_kv = right_padding_lengths(attention_mask, kv_length, kv_offset)
    alignment = diagonal_alignment(bands[0], q_offset - kv_offset, q_length, kv_length, padded=seq_len_kv is not None)
    return FrostMask(q_length, kv_length, bands, alignment, seq_len_kv, position_ids)


def right_padding_lengths(attention_mask: Optional[torch.Tensor], kv_length: int,
                          kv_offset: int) -> Optional[torch.Tensor]:
    """Per-batch valid key counts (int32) from the tokenizer's 2-D mask, when every row is right-padded (ones, then
    zeros); None when no key is padded. Left padding or holes raise: frost's keys are valid on [0, seq_len_kv)."""
    if attention_mask is None:
        return None
    if attention_mask.dim() != 2:
        raise UnsupportedAttentionMask("attention_mask", f"a {attention_mask.dim()}-D mask of shape "
                                       f"{tuple(attention_mask.shape)}", "a 2-D (batch, keys) padding mask")
    padding = prepare_padding_mask(attention_mask.bool(), kv_length, kv_offset)
    assert padding is not None   # None only for a None mask
    keys = padding[:, kv_offset:kv_offset + kv_length]
    lengths = keys.sum(dim=-1, dtype=torch.int32)
    expected = torch.arange(kv_length, device=keys.device)[None, :] < lengths[:, None]
    if not torch.equal(keys, expected):
        bad = int((keys != expected).any(dim=-1).nonzero()[0, 0])
        left_padded = torch.equal(keys[bad].flip(-1), expected[bad])
        raise UnsupportedAttentionMask(
            f"attention_mask[{bad}]", _row_summary(keys[bad]),
            "right padding (ones, then zeros), e.g. tokenizer(..., padding_side='right')",
            "left padding: frost's valid keys start at position 0" if left_padded else
            "a mask with holes: frost's valid keys are one prefix per batch row")
    if bool((lengths == kv_length).all()):
        return None
    return lengths


def _row_summary(row: torch.Tensor) -> str:
    """A short picture of one mask row: its first and last entries as 0/1."""
    bits = "".join("1" if b else "0" for b in row.tolist())
    return bits if len(bits) <= 24 else f"{bits[:12]}...{bits[-12:]}"


def diagonal_alignment(band: Band, diagonal: int, q_length: int, kv_length: int, padded: bool) -> Alignment:
    """frost's alignment for a mask whose diagonal sits at key position = query position + `diagonal` (local
    indices): top_left for 0, bottom_right for Skv - Sq when no key is padded (with padding, frost's bottom-right
    diagonal moves with each row's length, transformers' does not)."""
    if band == BIDIRECTIONAL or diagonal == 0:
        return "top_left"
    if diagonal == kv_length - q_length and not padded:
        return "bottom_right"
    accepted = "0 (queries and keys start at the same position)"
    if not padded:
        accepted += f" or {kv_length - q_length} (the last query sits on the last key)"
    raise UnsupportedAttentionMask(
        "q_offset - kv_offset", diagonal, accepted,
        "a cache with empty slots past the last query (a static cache), or padding while decoding, moves the "
        "diagonal where frost's alignments do not reach")

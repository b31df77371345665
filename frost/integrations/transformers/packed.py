"""Padding-free (packed) batches: which documents share a transformers row, read once per mask.

transformers marks documents packed into one row in two ways: `position_ids` that restart within a row (what
DataCollatorWithFlattening returns, and what its flash path reads), and the collator's `cu_seq_lens_q/k` with
`max_length_q/k` kwargs (return_flash_attn_kwargs=True), handed to every attention call. Either way each document
must attend only to itself, so the attention function runs frost.attention_varlen over the row's tokens with
these documents. Reading them costs a device-to-host read, so it happens once per FrostMask (transformers builds
one per mask type and forward and hands it to every layer) and is reused by every later layer of that forward.

A document starts where a position is not its predecessor plus one (transformers' masks split rows there) and all
documents must start at the same position (transformers' flash path splits where the row's smallest position
is): where the two readings agree, frost serves the batch; where they differ, or packing meets padding or a
cache, it raises instead of letting documents see each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import torch
from transformers.masking_utils import (and_masks, causal_mask_function, packed_sequence_mask_function,
                                        remap_positions_for_packed_sequence)

from frost.integrations.transformers.band import closure_values
from frost.integrations.transformers.errors import (UnsupportedAttentionMask, UnsupportedAttentionSetting,
                                                    describe_value)
from frost.spec import as_int

FLASH_KWARGS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")
_AND_CODE = and_masks(causal_mask_function).__code__
# only the code objects are read: the position tensors the factories close over are never used
_REMAP_CODE = remap_positions_for_packed_sequence(causal_mask_function, None).__code__  # type: ignore[arg-type]
_PACKED_CODE = packed_sequence_mask_function(None).__code__  # type: ignore[arg-type]
_MEMO = "documents"

if TYPE_CHECKING:
    from frost.integrations.transformers.band import MaskFunction
    from frost.integrations.transformers.mask import FrostMask


@dataclass(frozen=True)
class Documents:
    """Documents over a batch's B·S tokens flattened row by row: document d owns tokens
    [cu_seqlens[d], cu_seqlens[d + 1]). cu_seqlens is int32 on the queries' device; max_seqlen a host int."""

    cu_seqlens: torch.Tensor
    max_seqlen: int


# what a FrostMask keeps for the attention calls of its forward: {_MEMO: (the call's key, its documents)}
DocumentsMemo = dict[str, tuple[tuple[object, ...], Optional[Documents]]]


def unpacked_mask_function(mask_function: MaskFunction) -> tuple[MaskFunction, Optional[torch.Tensor]]:
    """(the per-document mask function, position_ids) when `mask_function` is transformers' packed-sequence
    wrapper (and_masks of remap_positions_for_packed_sequence(f, position_ids) and packed_sequence_mask_function);
    (mask_function, None) for anything else. Inside one document positions count up by one, so f evaluated on
    positions keeps the same pairs as f on the document's own indices, when f depends only on their difference."""
    if getattr(mask_function, "__code__", None) is not _AND_CODE:
        return mask_function, None
    parts = closure_values(mask_function).get("mask_functions", ())
    if (len(parts) != 2 or getattr(parts[0], "__code__", None) is not _REMAP_CODE
            or getattr(parts[1], "__code__", None) is not _PACKED_CODE):
        return mask_function, None
    remap = closure_values(parts[0])
    return remap["mask_function"], remap["position_ids"]


def call_documents(mask: Optional[FrostMask], kwargs: dict[str, Any], batch_size: int, q_length: int,
                   kv_length: int, device: torch.device) -> Optional[Documents]:
    """The documents of this attention call, or None for an ordinary (unpacked) batch. `mask` is the call's
    FrostMask (or None); the answer is kept on it for every later call with the same tensors."""
    flash = {name: kwargs.get(name) for name in FLASH_KWARGS}
    position_ids = getattr(mask, "position_ids", None)
    if position_ids is None:
        position_ids = kwargs.get("position_ids")
    key = (position_ids, *flash.values(), batch_size, q_length, kv_length, device)
    memo: Optional[DocumentsMemo] = getattr(mask, "memo", None)
    if memo is not None and _MEMO in memo and _same(memo[_MEMO][0], key):
        return memo[_MEMO][1]
    lengths = getattr(mask, "seq_len_kv", None)
    docs = _read_documents(flash, position_ids, lengths, batch_size, q_length, kv_length, device)
    if memo is not None:
        memo[_MEMO] = (key, docs)
    return docs


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Whether two memo keys name the same objects (tensors by identity: a tensor's values do not change while the
    forward that holds its FrostMask runs)."""
    return all(x is y if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor) else x == y
               for x, y in zip(a, b))


def _read_documents(flash: dict[str, Any], position_ids: object, lengths: Optional[torch.Tensor], batch_size: int,
                    q_length: int, kv_length: int, device: torch.device) -> Optional[Documents]:
    given = [name for name, value in flash.items() if value is not None]
    if given:
        if len(given) < len(FLASH_KWARGS):
            missing = next(name for name in FLASH_KWARGS if name not in given)
            raise UnsupportedAttentionSetting(missing, None, f"given with {', '.join(given)}: all four of "
                                              f"{', '.join(FLASH_KWARGS)} or none")
        if lengths is not None:
            raise UnsupportedAttentionMask(
                "attention_mask", "a padding mask with zeros, given with cu_seq_lens_q/k",
                "no attention_mask (or all ones) with packed documents",
                "transformers' implementations read the padding and ignore the documents; frost does neither")
        if q_length != kv_length:
            raise UnsupportedAttentionSetting(
                "cu_seq_lens_k", f"documents for {q_length} queries and {kv_length} keys",
                "packed documents whose keys are their own queries (no cache: use_cache=False)")
        docs = kwargs_documents(flash, batch_size * q_length, device)
        by_position = position_documents(position_ids, batch_size, q_length, None, device)
        if by_position is not None and not torch.equal(by_position.cu_seqlens, docs.cu_seqlens):
            raise UnsupportedAttentionMask(
                "position_ids", f"documents starting at tokens {_starts(by_position.cu_seqlens)}",
                f"documents starting where cu_seq_lens_q says: {_starts(docs.cu_seqlens)}")
        return docs
    if q_length == 1:   # one query per row: nothing can restart
        return None
    if q_length != kv_length:
        if lengths is None and position_documents(position_ids, batch_size, q_length, None, device) is not None:
            raise UnsupportedAttentionMask(
                "position_ids", f"positions that restart within a row, with {kv_length - q_length} cached keys",
                "positions that restart only without a cache (use_cache=False)")
        return None
    by_position = position_documents(position_ids, batch_size, q_length, lengths, device)
    if by_position is not None and lengths is not None:
        raise UnsupportedAttentionMask(
            "position_ids", "positions that restart within the valid tokens of a right-padded row",
            "packed rows without padding (no attention_mask, or all ones), or one document per padded row",
            "transformers' implementations let such documents attend to each other")
    return by_position


def position_documents(position_ids: object, batch_size: int, seq_len: int, lengths: Optional[torch.Tensor],
                       device: torch.device) -> Optional[Documents]:
    """The documents that position_ids mark (only the first lengths[b] tokens of row b when given), or None when
    no row holds more than one; position_ids that are not 2-D (e.g. multimodal 3-D positions) are not read."""
    if not isinstance(position_ids, torch.Tensor) or position_ids.dim() != 2:
        return None
    if position_ids.shape[1] != seq_len or position_ids.shape[0] not in (1, batch_size):
        raise UnsupportedAttentionMask("position_ids.shape", tuple(position_ids.shape),
                                       f"(batch, Sq) = ({batch_size}, {seq_len}) or (1, {seq_len})")
    pos = position_ids.expand(batch_size, seq_len)
    starts = torch.ones_like(pos, dtype=torch.bool)
    starts[:, 1:] = pos[:, 1:] != pos[:, :-1] + 1
    if lengths is not None:
        starts &= torch.arange(seq_len, device=pos.device)[None, :] < lengths.to(pos.device)[:, None]
    index = starts.flatten().nonzero().flatten()
    index, first = torch.stack([index, pos.flatten()[index]]).tolist() if index.numel() else ([], [])
    rows = [i // seq_len for i in index]
    if len(set(rows)) == len(rows):   # one document per row: not packed
        return None
    odd = next((n for n, p in enumerate(first) if p != first[0]), None)
    if odd is not None:
        raise UnsupportedAttentionMask(
            "position_ids", f"a document starting at position {first[odd]} (row {rows[odd]}, token "
            f"{index[odd] % seq_len}) where another starts at {first[0]}",
            "documents that count up by one from the same first position, as DataCollatorWithFlattening's do",
            "transformers' masks and its flash path would split these rows differently")
    cu = [*index, batch_size * seq_len]
    return Documents(torch.tensor(cu, dtype=torch.int32, device=device),
                     max(b - a for a, b in zip(cu, cu[1:])))


def kwargs_documents(flash: dict[str, Any], tokens: int, device: torch.device) -> Documents:
    """The documents of the collator's cu_seq_lens_q/k and max_length_q/k, checked in their names: the same
    offsets for queries and keys, from 0 to every token of the batch, never decreasing, within max_length."""
    cu_q, cu_k = flash["cu_seq_lens_q"], flash["cu_seq_lens_k"]
    for name, cu in (("cu_seq_lens_q", cu_q), ("cu_seq_lens_k", cu_k)):
        if not isinstance(cu, torch.Tensor) or cu.dim() != 1 or cu.numel() < 2 or cu.is_floating_point():
            raise UnsupportedAttentionSetting(name, describe_value(cu), "a 1-D integer tensor of document offsets "
                                              "(batch + 1 entries), as DataCollatorWithFlattening returns")
    max_q, max_k = (_host_int(name, flash[name]) for name in ("max_length_q", "max_length_k"))
    values = cu_q.tolist()
    if cu_k is not cu_q and cu_k.tolist() != values:
        raise UnsupportedAttentionSetting("cu_seq_lens_k", f"offsets {_short(cu_k.tolist())}",
                                          f"the offsets of cu_seq_lens_q, {_short(values)} (self-attention)")
    if max_k != max_q:
        raise UnsupportedAttentionSetting("max_length_k", max_k, f"max_length_q = {max_q} (self-attention)")
    if values[0] != 0 or values[-1] != tokens:
        raise UnsupportedAttentionSetting("cu_seq_lens_q", f"offsets {_short(values)}",
                                          f"offsets from 0 to {tokens}, every token of the batch (B·S)")
    sizes = [b - a for a, b in zip(values, values[1:])]
    if min(sizes) < 0:
        raise UnsupportedAttentionSetting("cu_seq_lens_q", f"offsets {_short(values)}", "never decreasing")
    if max(sizes) > max_q:
        raise UnsupportedAttentionSetting("max_length_q", max_q, f">= the longest document, {max(sizes)}")
    return Documents(cu_q.to(device=device, dtype=torch.int32), max_q)


def _host_int(name: str, value: Any) -> int:
    """max_length_q/k as a host int: an int (the collator's), or a one-element integer tensor (read once)."""
    if isinstance(value, torch.Tensor):
        if value.numel() == 1 and not value.is_floating_point() and value.dtype != torch.bool:
            return int(value)
    elif (n := as_int(value)) is not None:
        return n
    raise UnsupportedAttentionSetting(name, describe_value(value), "an int (or a one-element integer tensor)")


def _starts(cu: torch.Tensor) -> str:
    return _short(cu.tolist()[:-1])


def _short(values: list[int]) -> str:
    return str(values) if len(values) <= 12 else f"[{', '.join(map(str, values[:10]))}, ...] ({len(values)})"

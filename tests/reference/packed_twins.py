"""Packed (THD) problems and their dense padded twins: the same sequences stored once packed along a token axis
(frost.reference.varlen) and once as a (B, H, max_len, D) batch with per-batch lengths (the dense reference)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from helpers.tensors import cu_seqlens, int32

NAN = float("nan")


@dataclass
class Twin:
    """One packed problem (logical (H, T, D) tensors, offsets) and the dense padded batch of the same sequences."""

    packed: dict           # q, k, v, do, dlse (logical (H, T, ...)), cu_q, cu_kv, seqused_q, seqused_kv, sink
    dense: dict            # q, k, v, do, dlse (B, H, S, ...), seq_len_q, seq_len_kv, sink
    seg_q: list[int]       # segment lengths (packed tokens per sequence)
    seg_kv: list[int]
    off_q: list[int] = field(default_factory=list)
    off_kv: list[int] = field(default_factory=list)


def _pack(parts: list[torch.Tensor], extra: int, token_major: bool) -> torch.Tensor:
    """(H, L_b, ...) parts -> one logical (H, T, ...) tensor, T = sum L_b + extra; the `extra` trailing tokens (past
    cu[-1]) hold NaN. Stored token-major (packed THD memory) when `token_major`, else head-major."""
    h, rest = parts[0].shape[0], parts[0].shape[2:]
    tokens = sum(p.shape[1] for p in parts) + extra
    whole = torch.full((tokens, h, *rest), NAN, dtype=parts[0].dtype)
    at = 0
    for p in parts:
        whole[at:at + p.shape[1]] = p.transpose(0, 1)
        at += p.shape[1]
    view = whole.transpose(0, 1)
    return view if token_major else view.contiguous()


def _pad(parts: list[torch.Tensor], length: int, gen: torch.Generator) -> torch.Tensor:
    """(H, L_b, ...) parts -> (B, H, length, ...), finite garbage past each L_b (the lengths mask it)."""
    h, rest = parts[0].shape[0], parts[0].shape[2:]
    out = torch.randn((len(parts), h, length, *rest), generator=gen, dtype=torch.float64).to(parts[0].dtype) * 3
    for b, p in enumerate(parts):
        out[b, :, :p.shape[1]] = p
    return out


def make_twin(seg_q: list[int], seg_kv: list[int], *, heads_q: int = 4, heads_kv: int = 2, dim: int = 16,
              dim_v: int = 8, dtype: torch.dtype = torch.float64, used_q: list[int] | None = None,
              used_kv: list[int] | None = None, sink: bool = False, dlse: bool = False, extra: int = 3,
              seed: int = 0) -> Twin:
    """Random sequences (q, k, v, do, dlse per sequence), packed with `extra` NaN tokens past the end, and padded."""
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *shape: torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)  # noqa: E731
    per = {"q": [rnd(heads_q, n, dim) for n in seg_q], "do": [rnd(heads_q, n, dim_v) for n in seg_q],
           "k": [rnd(heads_kv, n, dim) for n in seg_kv], "v": [rnd(heads_kv, n, dim_v) for n in seg_kv]}
    if dlse:
        per["dlse"] = [torch.randn((heads_q, n), generator=gen, dtype=torch.float64).float() for n in seg_q]
    packed = {name: _pack(parts, extra, token_major=name != "dlse") for name, parts in per.items()}
    lengths = {"q": seg_q, "do": seg_q, "dlse": seg_q, "k": seg_kv, "v": seg_kv}
    dense = {name: _pad(parts, max(max(lengths[name]), 1), gen) for name, parts in per.items()}
    packed.update(cu_q=cu_seqlens(seg_q), cu_kv=cu_seqlens(seg_kv), seqused_q=int32(used_q), seqused_kv=int32(used_kv))
    dense.update(seq_len_q=int32(used_q or seg_q), seq_len_kv=int32(used_kv or seg_kv))
    if sink:
        packed["sink"] = dense["sink"] = torch.randn(heads_q, generator=gen, dtype=torch.float64).float()
    else:
        packed["sink"] = dense["sink"] = None
    return Twin(packed, dense, seg_q, seg_kv, packed["cu_q"].tolist(), packed["cu_kv"].tolist())

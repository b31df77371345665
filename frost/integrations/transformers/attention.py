"""transformers' attention-function signature on top of frost.attention.

transformers calls attention(module, query, key, value, attention_mask, dropout=, scaling=, sliding_window=,
s_aux=, ...) with BHSD query/key/value and expects (attn_output BSHD, attn_weights). frost takes BSHD, so the
transposed views go in as they are (frost accepts any strides with the head dim innermost) and frost's contiguous
BSHD output comes back unchanged. The mask arrives as the FrostMask that frost's mask function built. A packed
(padding-free) batch runs frost.attention_varlen on the row's tokens, each document with this layer's mask."""

from __future__ import annotations

from typing import Any, Optional

import torch

import frost
from frost.integrations.transformers.band import BIDIRECTIONAL, CAUSAL, Band
from frost.integrations.transformers.errors import (UnsupportedAttentionMask, UnsupportedAttentionSetting,
                                                    describe_value)
from frost.integrations.transformers.mask import FrostMask
from frost.integrations.transformers.packed import Documents, call_documents
from frost.spec import Alignment

# keyword arguments that change the math when set; frost has no counterpart for any of them
_UNSUPPORTED_KWARGS = {
    "softcap": "None (frost has no logit soft-capping)",
    "position_bias": "None (frost adds no bias to the scores)",
    "head_mask": "None (frost has no per-head output mask)",
}


def frost_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: Optional[FrostMask], dropout: float = 0.0, scaling: Optional[float] = None,
                            sliding_window: Optional[int] = None, s_aux: Optional[torch.Tensor] = None,
                            is_causal: Optional[bool] = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """The AttentionInterface entry for "frost": (B, Hq, Sq, D) query, (B, Hkv, Skv, D) key/value ->
    ((B, Sq, Hq, Dv) output, None). s_aux (the gpt-oss sinks, (Hq,), any float dtype) becomes frost's fp32 sink;
    its gradient flows back to the parameter through the cast. Packed documents (position_ids restarting within a
    row, or cu_seq_lens_q/k with max_length_q/k) attend each to itself."""
    _check_settings(dropout, kwargs)
    band, alignment, seq_len_kv = _resolve_mask(attention_mask, module, query, key, sliding_window, is_causal)
    sink = None
    if s_aux is not None:
        if s_aux.shape != (query.shape[1],):
            raise UnsupportedAttentionSetting("s_aux.shape", tuple(s_aux.shape),
                                              f"({query.shape[1]},): one sink per query head")
        sink = s_aux.to(torch.float32)
    docs = call_documents(attention_mask, kwargs, query.shape[0], query.shape[2], key.shape[2], query.device)
    if docs is not None:
        return _packed_attention(query, key, value, docs, scaling, band, sink), None
    out = frost.attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                          softmax_scale=scaling, causal=band[1] == 0, window_size=band, causal_alignment=alignment,
                          seq_len_kv=seq_len_kv, sink=sink)
    return out, None


def _packed_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, docs: Documents,
                      scaling: Optional[float], band: Band, sink: Optional[torch.Tensor]) -> torch.Tensor:
    """The B·S tokens of the batch as one packed sequence of documents, each with the layer's band (queries and
    keys of a document are the same tokens, so the diagonal is at 0): (B, Sq, Hq, Dv) output. The BSHD views of
    transformers' projections flatten to (T, H, D) without a copy."""
    b, hq, s, _ = query.shape
    q, k, v = (t.transpose(1, 2).reshape(b * s, t.shape[1], t.shape[3]) for t in (query, key, value))
    out = frost.attention_varlen(q, k, v, docs.cu_seqlens, docs.cu_seqlens, docs.max_seqlen, docs.max_seqlen,
                                 softmax_scale=scaling, causal=band[1] == 0, window_size=band,
                                 causal_alignment="top_left", sink=sink)
    return out.view(b, s, hq, out.shape[-1])


def _check_settings(dropout: float, kwargs: dict[str, Any]) -> None:
    if dropout:
        raise UnsupportedAttentionSetting("dropout", dropout, "0.0 (frost has no attention dropout: set "
                                          "config.attention_dropout = 0.0 or call model.eval())")
    for name, accepted in _UNSUPPORTED_KWARGS.items():
        if kwargs.get(name) is not None:
            raise UnsupportedAttentionSetting(name, describe_value(kwargs[name]), accepted)


def _resolve_mask(attention_mask: Optional[FrostMask], module: torch.nn.Module, query: torch.Tensor,
                  key: torch.Tensor, sliding_window: Optional[int], is_causal: Optional[bool]
                  ) -> tuple[Band, Alignment, Optional[torch.Tensor]]:
    """(band, alignment, seq_len_kv) for this call. A FrostMask is the model's mask and decides; without a mask the
    layer's own flags do (causal from is_causal or module.is_causal, the window from sliding_window), aligned
    bottom-right as FlashAttention aligns a causal mask."""
    if attention_mask is None:
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        if not causal:
            if sliding_window:
                raise UnsupportedAttentionSetting("sliding_window", sliding_window, "None for a non-causal layer "
                                                  "called without a mask (give the model its attention_mask)")
            return BIDIRECTIONAL, "top_left", None
        band = (sliding_window - 1, 0) if sliding_window else CAUSAL
        return band, "bottom_right", None
    if not isinstance(attention_mask, FrostMask):
        raise UnsupportedAttentionMask(
            "attention_mask", describe_value(attention_mask),
            "None, or the mask that frost's mask function builds (call frost.integrations.transformers.register() "
            "and give the model the tokenizer's 2-D attention_mask, not a prebuilt 4-D mask)")
    sizes = (query.shape[2], key.shape[2])
    if sizes != (attention_mask.q_length, attention_mask.kv_length):
        raise UnsupportedAttentionMask("attention_mask", f"a mask for (Sq, Skv) = "
                                       f"{(attention_mask.q_length, attention_mask.kv_length)}",
                                       f"a mask for this layer's (Sq, Skv) = {sizes}")
    band = attention_mask.bands[0]
    if sliding_window:
        band = (sliding_window - 1, 0)
        if band not in attention_mask.bands:
            raise UnsupportedAttentionMask(
                "attention_mask", f"a mask with band {attention_mask.bands[0]}",
                f"the band {band} of sliding_window={sliding_window}",
                "the layer's sliding_window and its mask disagree, so transformers' own implementations disagree")
    seq_len_kv = attention_mask.seq_len_kv
    if seq_len_kv is not None:
        seq_len_kv = seq_len_kv.to(device=query.device, dtype=torch.int32)
    return band, attention_mask.alignment, seq_len_kv

"""Facts: a frozen description of one matched attention op (sdpa_backward or sdpa_forward). They describe; they
never decide.

Plain Python values only (no torch, no cutlass), so the probe runs anywhere in microseconds."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

MemoryLayout = Literal["bshd", "bhsd", "thd", "strided"]


class Facts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    op_name: str
    op: Literal["sdpa_backward", "sdpa_forward"] = "sdpa_backward"   # the op kind (which capability table applies)
    dtype: str                      # io dtype of q, k, v, o (and a backward's do, dq, dk, dv)
    batch: int                      # a packed op: the number of sequences (its offsets' extent - 1)
    heads_q: int
    heads_kv: int
    gqa_group: int                  # heads_q // heads_kv (1 = MHA, heads_q = MQA)
    seq_q: int                      # padded (max) extents; per-batch lengths are runtime values (packed: max_len)
    seq_kv: int
    tokens_q: int                   # query rows in memory: batch * seq_q, or a packed op's T
    tokens_kv: int
    varlen: bool = False            # packed variable-length sequences (ragged tensors over cu_seqlens)
    head_dim_qk: int
    head_dim_v: int
    attn_scale: float               # resolved: 1/sqrt(head_dim_qk) when the graph says None
    mask: Literal["none", "causal", "band"]
    alignment: Literal["top_left", "bottom_right"]
    band_left: int | None           # None = unbounded
    band_right: int | None
    has_padding_q: bool             # a seq_len_q tensor is given (a packed op: seqused)
    has_padding_kv: bool
    has_sink: bool
    has_dlse: bool                  # always False for a forward (no LSE gradient)
    deterministic: bool             # always False for a forward (it has no reduction across CTAs)
    layout: MemoryLayout            # of the op's io tensors, when they all agree; else "strided" (packed: "thd")
    head_dim_contiguous: bool       # every io tensor has stride 1 on its head dim
    strides_16b_aligned: bool       # every non-unit io stride is a multiple of 16 bytes
    lse_contiguous: bool            # lse has stride 1 along S (packed: along T)
    needs_int64_offsets: bool       # some io tensor spans >= 2**31 elements
    seq_strides_32bit: bool         # q's and do's (a forward: q's and o's) sequence strides are below SEQ_STRIDE_LIMIT

    @property
    def empty(self) -> bool:
        """Nothing to compute: no batch (sequence), no query or no key."""
        return 0 in (self.batch, self.seq_q, self.seq_kv, self.tokens_q, self.tokens_kv)

"""Facts: a frozen description of one matched attention op (sdpa_backward or sdpa_forward), and facts_for, which
reads them off the op and its tensors. They describe; they never decide, so the same Facts serve the probe, the
lowering and the compile key.

Plain values only (ints, strs, bools, floats, computed from shapes, strides and attributes, and frost.spec's Mask of
them; no torch, no cutlass), so the probe runs anywhere in microseconds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from frost.ir.ops import AttentionOp, SdpaBackwardOp, SdpaForwardOp, SdpaOp
from frost.ir.tensors import Layout, TensorSpec, contiguous_strides, layout_strides
from frost.limits import SEQ_STRIDE_LIMIT, strides_aligned
from frost.spec import Mask, features

if TYPE_CHECKING:
    from frost.ir import Graph

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
    mask: Mask                      # causal folded in (frost.spec.Mask)
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


# preference order when a tensor fits several (extent-1 dims make strides ambiguous)
LAYOUTS: tuple[Layout, ...] = ("bshd", "bhsd")
INT32_SPAN = 2**31


@dataclass(frozen=True)
class _Memory:
    """What one tensor's shape, strides and item size say about how it sits in memory."""

    layouts: tuple[Layout, ...]  # the LAYOUTS its strides fit
    head_dim_contiguous: bool
    strides_16b_aligned: bool
    span: int                   # elements from the first to one past the last one addressed


@lru_cache(maxsize=1024)
def _memory(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> _Memory:
    """Memoised on plain tuples: the io tensors of an op share a handful of shapes, and a training loop repeats them."""
    live = [(s, e) for s, e in zip(strides, shape) if e > 1]           # dims that step through memory
    fits = tuple(lay for lay in LAYOUTS
                 if all(e == 1 or s == w for s, w, e in zip(strides, layout_strides(shape, lay), shape)))
    return _Memory(layouts=fits, head_dim_contiguous=shape[-1] == 1 or strides[-1] == 1,
                   strides_16b_aligned=strides_aligned(shape, strides, itemsize),
                   span=1 + sum((e - 1) * s for s, e in live))


def _memory_of(t: TensorSpec) -> _Memory:
    return _memory(t.shape, t.strides if t.strides is not None else contiguous_strides(t.shape), t.itemsize)


def _layout(mems: list[_Memory]) -> MemoryLayout:
    common = [lay for lay in LAYOUTS if all(lay in m.layouts for m in mems)]
    return common[0] if common else "strided"


def _is_thd(t: TensorSpec) -> bool:
    """A ragged (H, T, D) tensor in packed THD memory order: token stride > head stride > head-dim stride = 1 (dims
    of extent 1 say nothing)."""
    strides = t.effective_strides
    live = [d for d, extent in enumerate(t.shape) if extent > 1]
    outer_first = sorted(live, key=lambda d: -strides[d])
    return (t.shape[2] == 1 or strides[2] == 1) and outer_first == [d for d in (1, 0, 2) if d in live]


def _sizes(q: TensorSpec, k: TensorSpec, ts: dict[str, TensorSpec], op: SdpaOp) -> tuple[int, int, int, int, int]:
    """(batch, seq_q, seq_kv, tokens_q, tokens_kv): a dense op's from its (B, H, S, D) shapes; a packed op's from
    its offsets (B), max_len (the longest sequence) and token axis (T)."""
    if op.ragged:
        # the IR checked it: a ragged op names its offsets, and its q-side and kv-side tensors are ragged
        assert op.inputs.cu_seqlens_q is not None and q.ragged is not None and k.ragged is not None
        batch = ts[op.inputs.cu_seqlens_q].shape[0] - 1
        return batch, q.ragged.max_len, k.ragged.max_len, q.shape[1], k.shape[1]
    batch, seq_q, seq_kv = q.shape[0], q.shape[2], k.shape[2]
    return batch, seq_q, seq_kv, batch * seq_q, batch * seq_kv


def _resolve(graph: Graph, op: object) -> AttentionOp:
    if isinstance(op, str):
        op = next((o for o in graph.ops if o.name == op), None) or op
    if not isinstance(op, (SdpaBackwardOp, SdpaForwardOp)):
        raise TypeError(f"facts_for: got {op!r}; accepted: an attention op of the graph (or its name)")
    return op


def _io_names(op: AttentionOp) -> tuple[tuple[str, ...], str, tuple[str, str]]:
    """(the op's io tensors (rank 4, or rank 3 when packed), its lse, the two whose sequence strides must stay 32-bit
    addressable)."""
    if isinstance(op, SdpaBackwardOp):
        ins, outs = op.inputs, op.outputs
        return (ins.q, ins.k, ins.v, ins.o, ins.do, outs.dq, outs.dk, outs.dv), ins.lse, (ins.q, ins.do)
    fwd_ins, fwd_outs = op.inputs, op.outputs
    return (fwd_ins.q, fwd_ins.k, fwd_ins.v, fwd_outs.o), fwd_outs.lse, (fwd_ins.q, fwd_outs.o)


def facts_for(graph: Graph, op: SdpaOp | str) -> Facts:
    """Describe `op` (an attention op of `graph`, or its name) as Facts. Heads come from the axis before the
    sequence (token) axis and head dims from the last one, so dense (B, H, S, D) and packed (H, T, D) read alike."""
    op = _resolve(graph, op)
    ts = graph.tensor_map()
    ins = op.inputs
    io, lse_name, seq_strided = _io_names(op)
    q, k, v, lse = ts[ins.q], ts[ins.k], ts[ins.v], ts[lse_name]
    mems = [_memory_of(ts[n]) for n in io]
    batch, seq_q, seq_kv, tokens_q, tokens_kv = _sizes(q, k, ts, op)
    heads_q, heads_kv, head_dim_qk = q.shape[-3], k.shape[-3], q.shape[-1]
    return Facts(
        op_name=op.name, op=op.op, dtype=q.dtype, batch=batch, heads_q=heads_q, heads_kv=heads_kv,
        gqa_group=heads_q // heads_kv, seq_q=seq_q, seq_kv=seq_kv, tokens_q=tokens_q, tokens_kv=tokens_kv,
        varlen=op.ragged, head_dim_qk=head_dim_qk, head_dim_v=v.shape[-1],
        attn_scale=op.attn_scale if op.attn_scale is not None else 1.0 / math.sqrt(head_dim_qk),
        mask=op.mask,
        **features(ins),
        deterministic=getattr(op, "deterministic", False),
        layout=("thd" if all(_is_thd(ts[n]) for n in io) else "strided") if op.ragged else _layout(mems),
        head_dim_contiguous=all(m.head_dim_contiguous for m in mems),
        strides_16b_aligned=all(m.strides_16b_aligned for m in mems),
        lse_contiguous=lse.shape[-1] == 1 or lse.effective_strides[-1] == 1,
        needs_int64_offsets=any(m.span >= INT32_SPAN for m in mems),
        seq_strides_32bit=all(ts[n].shape[-2] <= 1 or ts[n].effective_strides[-2] < SEQ_STRIDE_LIMIT
                              for n in seq_strided),
    )

"""The backward's hot path. Everything that depends only on the problem (sizes, scale, mask bounds, feature flags)
is packed once into a Launch; a call then only reads pointers and strides off its tensors (one BackwardTensors) and
calls the compiled backward once (chain.BackwardChain through TVM-FFI: pointers as ints, the stream as a raw handle;
see compile.py), which launches the three kernels. Launch.arguments is the one place a call's tensors and the
problem's values become that entry's flat argument list. On a CUDA device a call whose arguments repeat replays a
CUDA graph of those launches instead (graph_replay: one graph launch, the same work).

A Launch checks nothing and decides nothing: it runs the kernel set its config's key names (select.select chose it
for this problem), and its caller has checked the tensors (CompiledBackward.__call__ does, through checks.py; the
engine relies on the lowering's executor, which checks every tensor against the plan before it runs the engine)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, NamedTuple

from frost.kernels import optional_inputs
from frost.kernels.geometry import LOG2_E
from frost.kernels.graph_replay import GraphReplay, replay_enabled
from frost.kernels.mask import FLAG_ORDERED_DQ, mask_flags, runtime_bounds
from frost.kernels.strides import htd_strides, strides_reader
from frost.limits import packed_acc_rows, seq_pad
from frost.spec import Mask

if TYPE_CHECKING:
    from frost.kernels.packed import Packed


class BackwardTensors(NamedTuple):
    """The memory of one backward call: the io tensors, the caller-owned workspace and the optional tensors given,
    by frost.spec role (per-batch lengths, a packed call's seqused; a sink with its dsink output, any buffer of
    >= 4 * Hq bytes; dlse, any strides). Dense tensors are logical (B, H, S, D), a packed call's (H, T, D) with lse
    and dlse (Hq, Tq) (a seq-major launch takes (B, S, H, D) or (T, H, D) instead). A NamedTuple: immutable, and
    cheap enough to build on every call."""
    q: object
    k: object
    v: object
    o: object
    do: object
    lse: object
    dq: object
    dk: object
    dv: object
    workspace: dict                # api.workspace_regions' names -> tensors (only their addresses are read)
    optional: Mapping[str, object] = optional_inputs.NONE
    packed: Packed | None = None   # a packed call's segments (their prefix sums are read)


@dataclass(frozen=True)
class Problem:
    """The per-plan values of a backward: sizes, scale, mask, and which optional tensors a call passes (their
    frost.spec roles)."""

    batch: int
    heads: int
    heads_kv: int
    seq_q: int
    seq_kv: int
    scale: float
    mask: Mask = Mask()
    deterministic: bool = False
    optional: frozenset[str] = frozenset()
    tokens_q: int = 0           # a packed (varlen) problem's tokens: seq_q and seq_kv are then its max_seqlens
    tokens_kv: int = 0


def _flags(p: Problem, ordered: bool) -> int:
    return mask_flags(p.mask) | (FLAG_ORDERED_DQ if ordered else 0) | optional_inputs.flags(p.optional)


class Launch:
    """``launch(tensors, stream=None, seq_major=False)`` enqueues the backward of one Problem on a call's
    BackwardTensors."""

    def __init__(self, kernels, cfg, p: Problem, graph_replay: bool | None = None):
        left, right = runtime_bounds(p.mask)
        self.kernels = kernels
        flags, scale = _flags(p, cfg.key.ordered), float(p.scale)
        self.empty = p.batch == 0 or p.heads == 0
        # the chain writes its optional outputs (dsink) in its preprocess and convert, which run only when there
        # are query rows
        self.zero_outputs = self.empty or p.seq_q == 0
        self.backward = kernels.backward
        seq_q_pad = seq_pad(p.seq_q)
        self.packed = cfg.key.varlen
        acc_rows = packed_acc_rows(p.tokens_q, p.batch) if self.packed else seq_q_pad
        self.sizes = (p.batch, p.heads, p.heads_kv, p.seq_q, p.seq_kv, seq_q_pad, cfg.head_dim_qk, cfg.head_dim_v,
                      p.tokens_q, p.tokens_kv, acc_rows)
        self.tail = (scale, scale * LOG2_E, left, right, flags)
        self.current_stream, self.current_device = _current_stream_getter(), _current_device_getter()
        # None: FROST_GRAPH_REPLAY decides (on unless "0")
        use_graphs = replay_enabled() if graph_replay is None else graph_replay
        self.replay = GraphReplay(lambda args, stream: self.backward(*args, stream)) if use_graphs else None

    def __call__(self, tensors: BackwardTensors, stream=None, seq_major: bool = False) -> None:
        """``seq_major``: the eight io tensors are given in (B, S, H, D) order, a packed call's in (T, H, D) order
        (memory not transposed into logical views: a view costs more host time than reading its strides in
        another order)."""
        if self.zero_outputs:
            for role in optional_inputs.OUTPUTS["backward"]:
                if role in tensors.optional:
                    tensors.optional[role].zero_()  # type: ignore[attr-defined]
        if self.empty:
            return
        device = tensors.q.get_device()   # -1 off CUDA (test fakes)
        s = self.current_stream(device) if stream is None else _raw_stream(stream)
        args = self.arguments(tensors, seq_major)
        if device >= 0 and device != self.current_device():
            # the launches go to the current device's context: make the tensors' device current for them
            # (graphs are captured in the current context too, so this path launches directly)
            with _device_guard(device):
                self.backward(*args, s)
        elif self.replay is not None and device >= 0:
            self.replay(args, s)
        else:
            self.backward(*args, s)

    def arguments(self, t: BackwardTensors, seq_major: bool = False) -> tuple:
        """chain.BackwardChain's arguments but the stream, in its order: the tensors' pointers and strides, this
        problem's sizes, scale, mask bounds and flags. Absent optional inputs get a stand-in address (never
        dereferenced: their flag is off)."""
        q, k, v, o, do, lse, dq, dk, dv, workspace, optional, packed = t
        delta = workspace["delta"].data_ptr()
        dlse = optional.get("dlse")
        dlse_st = (0, 0, 0) if dlse is None else dlse.stride()  # type: ignore[attr-defined]
        st = strides_reader(self.packed, seq_major)
        if self.packed:
            seqlens_p = (packed.cu_seqlens_q.data_ptr(), packed.cu_seqlens_kv.data_ptr())
            lse_st, dlse_st = htd_strides(lse), (0, *dlse_st[:2])
        else:
            seqlens_p, lse_st = (delta, delta), lse.stride()
        return (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), do.data_ptr(), lse.data_ptr(),
                dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), workspace["dq_accum"].data_ptr(),
                workspace["lse_log2"].data_ptr(), delta, workspace["dq_sem"].data_ptr(),
                workspace["dsink_part"].data_ptr(), *optional_inputs.pointers("backward", optional, delta), *seqlens_p,
                *self.sizes,
                *st(q), *st(k), *st(v), *st(o), *st(do), *lse_st, *dlse_st, *st(dq), *st(dk), *st(dv), *self.tail)


def _raw_stream(stream) -> int:
    """A torch.cuda.Stream (or anything with .cuda_stream), a cuda.CUstream or a raw handle."""
    handle = getattr(stream, "cuda_stream", None)
    return int(stream) if handle is None else handle


def _current_stream_getter():
    """device index -> torch's current raw stream handle (the private torch call skips building a Stream object)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)


def _device_guard(index: int):
    import torch

    return torch.cuda.device(index)


def _current_device_getter():
    """() -> torch's current CUDA device index."""
    import torch

    return getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)

"""The backward's hot path. Everything that depends only on the problem (sizes, scale, mask bounds, feature flags)
is packed once into a Launch; a call then only reads pointers and strides off the tensors and calls the compiled
backward once (chain.BackwardChain through TVM-FFI: pointers as ints, the stream as a raw handle; see compile.py),
which launches the three kernels. On a CUDA device a call whose arguments repeat replays a CUDA graph of those
launches instead (graph_replay: one graph launch, the same work).

A Launch checks nothing: its caller has checked the tensors (CompiledBackward.__call__ does; the engine relies on
the lowering's executor, which checks every tensor against the plan before it runs the engine)."""

from __future__ import annotations

from dataclasses import dataclass

from frost.kernels.backward.rowwise import seq_pad
from frost.kernels.backward.compile import DQ_GEMM_DEFAULT_PADS, has_dq_gemm_set
from frost.kernels.backward.dq_gemm import dq_gemm_fits
from frost.kernels.backward.tiles import has_narrow_set
from frost.kernels.graph_replay import GraphReplay, replay_enabled
from frost.kernels.mask import FLAG_ORDERED_DQ, FLAG_DLSE, FLAG_SEQ_KV, FLAG_SEQ_Q, FLAG_SINK, MaskSpec
from frost.kernels.backward.preprocess import LOG2_E


@dataclass(frozen=True)
class Problem:
    """The per-plan values of a backward: sizes, scale, band, and which optional inputs a call passes."""

    batch: int
    heads: int
    heads_kv: int
    seq_q: int
    seq_kv: int
    scale: float
    band_left: int | None = None
    band_right: int | None = None
    deterministic: bool = False
    seq_len_q: bool = False     # a seq_len_q tensor is passed
    seq_len_kv: bool = False
    sink: bool = False          # sink and dsink are passed
    dlse: bool = False          # a dlse tensor (gradient on the forward's LSE output) is passed


# Per padded Q/K head dim: the widest band (L + R) on which the default mode orders dQ too, where ordering measured
# faster than atomic adds (benchmarks/bench_ordered_dq.py, on the kernel sets compiled for each order). Ordered /
# atomic time, MHA B2 H16 S4096 bf16 + sink, L = 64 / 128 / 256 / 512 (H200, 2026-11-30, thirteenth session):
# d32 0.937/0.978/0.996/1.035, d48 0.947/0.993/1.021/1.053, d64 0.910/0.954/0.972/1.004, d80 0.876/0.899/0.918/
# 0.942 (L 1024: 0.999), d96 0.930/0.986/1.031/1.088, d128 0.883/0.926/0.946/0.980, d160 1.045/1.096/1.144/1.198,
# d224 (a pad then) 1.051/1.081/1.114/1.157, d256 0.932/0.965/1.004/1.058. A width within noise is not taken (d32
# L 256: 0.996, 0.998 in a rerun). d128 stays at 256 and does not take 512 (MHA 0.980, but GQA B2 H32/8 D128 1.042
# at L 512; 1.016 at L 256, S 16384 1.013). gpt-oss B2 H64/8 D64: 0.983 at L 256, 1.027 at L 512. d160 since its
# ordered set adds dQ in one chunk (tiles._ORDERED_CHANGES; fourteenth session, twice): 0.923/0.956/0.993/1.032 (L 256
# within noise, not taken). Not listed: never.
ORDERED_BAND = {32: 128, 48: 128, 64: 256, 80: 512, 96: 128, 128: 256, 160: 128, 256: 128}


def orders_dq(tile, mask: MaskSpec, deterministic: bool) -> bool:
    """Whether a problem adds dQ in KV-tile order (FLAG_ORDERED_DQ, on the kernel set compiled for it:
    KernelKey.ordered): in deterministic mode always; in the default mode on bands of L + R <= ORDERED_BAND[tile],
    where a query tile has 2-3 visitors that reach it one after the other and the ordered mode, writing dQ
    directly (no accumulator zeroing, no convert pass), is faster. Either way the result is bitwise
    reproducible."""
    left, right = mask.bounds()
    return deterministic or (tile.dq_direct and left + right <= ORDERED_BAND.get(tile.head_dim_pad, -1))


def narrow_band_set(tile, mask: MaskSpec) -> bool:
    """Whether an ordered problem runs on the narrow-band set (compile.KernelKey.narrow), in either mode: a band the
    default mode orders (orders_dq) at a pad that has that set (tiles.has_narrow_set)."""
    return orders_dq(tile, mask, False) and has_narrow_set(tile.head_dim_pad, tile.head_dim_v_pad)


def wide_band_dq_gemm(tile, mask: MaskSpec) -> bool:
    """Whether a problem on this tile and mask may take a dq_gemm set (compile.has_dq_gemm_set): not on the narrow
    bands the default mode orders (their relay writes dQ directly and has 2-3 visitors per query tile; a dS
    workspace of the whole score matrix would be mostly unused there)."""
    return has_dq_gemm_set(tile.head_dim_pad, tile.head_dim_v_pad) and not orders_dq(tile, mask, False)


def wants_dq_gemm(tile, mask: MaskSpec, deterministic: bool) -> bool:
    """Whether a problem should run on a dq_gemm set: a wide band, in deterministic mode or at the pads whose
    default mode takes it too (compile.DQ_GEMM_DEFAULT_PADS)."""
    return (deterministic or tile.head_dim_pad in DQ_GEMM_DEFAULT_PADS) and wide_band_dq_gemm(tile, mask)


def takes_dq_gemm(cfg, p: Problem) -> bool:
    """Whether a problem bound to a dq_gemm config (KernelConfig.dq_gemm) runs on that set: wants_dq_gemm, and a dS
    workspace within dq_gemm.DQ_GEMM_MAX_BYTES (what api.workspace_regions sized)."""
    return (wants_dq_gemm(cfg.tile, problem_mask(cfg, p), p.deterministic)
            and dq_gemm_fits(p.batch, p.heads, p.seq_q, p.seq_kv))


def problem_mask(cfg, p: Problem) -> MaskSpec:
    """A problem's mask on a compiled config (causality and alignment are compiled in, the band is per problem)."""
    return MaskSpec(cfg.causal, cfg.alignment, p.band_left, p.band_right)


def problem_orders_dq(cfg, p: Problem) -> bool:
    """orders_dq for one problem: which of a config's two kernel sets (KernelKey.ordered) runs it."""
    return orders_dq(cfg.tile, problem_mask(cfg, p), p.deterministic)


def _flags(mask: MaskSpec, p: Problem, ordered: bool) -> int:
    return (mask.flags() | (FLAG_ORDERED_DQ if ordered else 0) | (FLAG_SEQ_Q if p.seq_len_q else 0)
            | (FLAG_SEQ_KV if p.seq_len_kv else 0) | (FLAG_SINK if p.sink else 0) | (FLAG_DLSE if p.dlse else 0))


class Launch:
    """``launch(q, k, v, o, do, lse, dq, dk, dv, workspace, stream=None, seq_len_q=None, seq_len_kv=None,
    sink=None, dsink=None, dlse=None)`` enqueues the backward of one Problem. ``workspace`` maps the region names of
    api.workspace_regions to tensors (only their addresses are read); ``dsink`` may be any buffer of >= 4*Hq bytes."""

    def __init__(self, kernels, cfg, p: Problem, graph_replay: bool | None = None):
        mask = problem_mask(cfg, p)
        left, right = mask.bounds()
        orders = orders_dq(cfg.tile, mask, p.deterministic)
        ordered = orders and not cfg.dq_gemm
        narrow = ordered and narrow_band_set(cfg.tile, mask)
        if ordered != cfg.ordered or narrow != cfg.narrow or cfg.dq_gemm and not takes_dq_gemm(cfg, p):
            # (CompiledBackward.bind picks the set of the problem's kind)
            raise ValueError(f"a problem with {'ordered' if orders else 'atomic'} dQ{' (narrow band)' * narrow} on "
                             f"the kernel set of {cfg.kernel_key.as_str()}")
        flags, scale = _flags(mask, p, ordered), float(p.scale)
        self.empty = p.batch == 0 or p.heads == 0
        # the chain writes dsink in its preprocess and convert, which run only when there are query rows
        self.zero_dsink = self.empty or p.seq_q == 0
        self.backward = kernels.backward
        self.sizes = (p.batch, p.heads, p.heads_kv, p.seq_q, p.seq_kv, seq_pad(p.seq_q), cfg.head_dim_qk,
                      cfg.head_dim_v)
        self.tail = (scale, scale * LOG2_E, left, right, flags)
        self.current_stream, self.current_device = _current_stream_getter(), _current_device_getter()
        # None: FROST_GRAPH_REPLAY decides (on unless "0")
        use_graphs = replay_enabled() if graph_replay is None else graph_replay
        self.replay = GraphReplay(lambda args, stream: self.backward(*args, stream)) if use_graphs else None

    def __call__(self, q, k, v, o, do, lse, dq, dk, dv, workspace, stream=None, seq_len_q=None, seq_len_kv=None,
                 sink=None, dsink=None, dlse=None, seq_major: bool = False) -> None:
        """``seq_major``: the eight 4-D tensors are given in (B, S, H, D) order (BSHD memory not transposed into
        logical BHSD views: a view costs more host time than reading its strides in another order)."""
        if self.zero_dsink and dsink is not None:
            dsink.zero_()
        if self.empty:
            return
        s = self.current_stream(q.get_device()) if stream is None else _raw_stream(stream)
        delta = workspace["delta"].data_ptr()
        # absent optional inputs get a stand-in address (never dereferenced: their flag is off)
        sq = delta if seq_len_q is None else seq_len_q.data_ptr()
        skv = delta if seq_len_kv is None else seq_len_kv.data_ptr()
        sink_p, dsink_p = (delta, delta) if sink is None else (sink.data_ptr(), dsink.data_ptr())
        dlse_p, dlse_st = (delta, (0, 0, 0)) if dlse is None else (dlse.data_ptr(), dlse.stride())
        st = _bshd_strides if seq_major else _bhsd_strides
        args = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), do.data_ptr(), lse.data_ptr(),
                dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), workspace["dq_accum"].data_ptr(),
                workspace["lse_log2"].data_ptr(), delta, workspace["dq_sem"].data_ptr(),
                workspace["dsink_part"].data_ptr(), sq, skv, sink_p, dsink_p, dlse_p, *self.sizes,
                *st(q), *st(k), *st(v), *st(o), *st(do), *lse.stride(), *dlse_st, *st(dq), *st(dk), *st(dv),
                *self.tail)
        device = q.get_device()   # -1 off CUDA (test fakes)
        if device >= 0 and device != self.current_device():
            # the launches go to the current device's context: make the tensors' device current for them
            # (graphs are captured in the current context too, so this path launches directly)
            with _device_guard(device):
                self.backward(*args, s)
        elif self.replay is not None and device >= 0:
            self.replay(args, s)
        else:
            self.backward(*args, s)


def _bhsd_strides(t) -> tuple:
    """(batch, head, seq) strides of a logical (B, H, S, D) tensor."""
    return t.stride()[:3]


def _bshd_strides(t) -> tuple:
    """(batch, head, seq) strides of a (B, S, H, D) tensor."""
    s = t.stride()
    return s[0], s[2], s[1]


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

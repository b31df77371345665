"""The fused attention-backward main kernel (FlashAttention-2 style, KV-stationary).

One CTA owns a KV tile (``n_block`` keys) of one (batch, kv head) and walks the query tiles that can see it, from
the last one down, each for every query head of the kv head's GQA group in head order (dK/dV of the group summed
in registers in a fixed order: no partials, deterministic). Per query
tile it recomputes P^T = exp2(S^T * scale * log2e - LSE * log2e) from K, Q and the LSE (no max or sum), then runs
the five GEMMs on mma.sync m16n8k16 with ldmatrix operands:

    S^T  = K . Q^T          (A = K,        B = Q)
    dP^T = V . dO^T         (A = V,        B = dO)
    dS^T = P^T o (dP^T - delta)
    dV  += P^T . dO         (A = P^T from registers, B = dO^T via ldmatrix.trans)
    dK  += dS^T . Q         (A = dS^T from registers, B = Q^T via ldmatrix.trans)
    dQ   = dS . K           (A = dS via shared memory + ldmatrix.trans, B = K^T via ldmatrix.trans)

S^T and dP^T are issued together, k-block by k-block (more independent MMA chains per warp); with ``k_in_regs``
each warp holds its K rows (S^T's A operand) in registers for the whole pass. Each warp owns 16 (or 32) whole key
rows of S^T, so P^T and dS^T never leave registers for dV and dK. dK and dV stay in fp32 registers for the whole
walk and are written once; dQ is added into an fp32 accumulator with red.global.add.v2, or .v4 with
TileConfig.dq_red_v4 (rows padded to 128 in the workspace, so the adds need no predicate), or, where dQ is
ordered, stored by a query tile's first visitor and written out in the io dtype by its last (see
ordering.dq_order_wait). Large head dims walk the query tiles twice
(pass 1: dV; pass 2: dK and dQ) so that only one of the two big accumulators is live.

Loads are cp.async (16 B per thread), with Q (+ LSE, delta) and dO double-buffered where shared memory allows;
a single-buffered operand is refilled right after the mid-step barrier, overlapping the dQ GEMM. Everything outside
the batch's valid range (rows past seq_len_q[b] / keys past seq_len_kv[b], columns past the head dim) is
zero-filled in shared memory, so padded keys get zero dK/dV rows (the whole tile is stored, padded keys selected
to zeros: _store_dkv) and padded rows add zeros to dQ (NaN where a non-finite K or V row of their tile meets their
zero-filled Q or dO: the dQ convert and the dQ GEMM write zeros for them, an ordered set's direct store writes what
it holds, docs/nonfinite.md). The walk is trimmed to the query tiles the band and the lengths let see the KV tile
(mask.py), so a window-W backward costs O(S*W). Deterministic mode (and narrow bands) order the dQ adds (see
ordering.dq_order_wait). d80 runs bwd_main_lag's step instead (dQ one step behind, one CTA barrier per step), d96
and d128 that step on per-stage mbarriers with three Q/dO stages (bwd_main_pipe), in both dQ orders. The dq_gemm sets (d96/d128 deterministic mode, d160 both modes) store dS^T
for a dQ GEMM of their own instead (bwd_main_ds, dq_gemm.py).

Batch, heads, GQA group, sequence lengths (full and per batch), logical head dims, strides, the scale, the band
bounds, the alignment and the feature flags are runtime values; the compiled code depends only on the dtype and
the tile config (see tiles.py).
"""


from types import SimpleNamespace

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64
from cutlass.cute.nvgpu import warp

from frost.kernels import cute_utils as cutil
from frost.kernels.arch import ArchConfig, launch_smem_bytes
from frost.kernels.mask import FLAG_SEQ_KV, MaskBounds, batch_length
from frost.kernels.backward.ordering import block_order, kv_tile_of_block
from frost.kernels.backward.rowwise import packed_acc_layout, segment_acc
from frost.kernels.segments import rebased, segment
from frost.kernels.backward.preprocess import SEM_ROWS
from frost.kernels.backward.tiles import TileConfig
from frost.kernels.backward.bwd_main_dq import MainDq
from frost.kernels.backward.bwd_main_setup import MainSetup


class BwdMainKernel(MainSetup, MainDq):
    def __init__(self, dtype, tile: TileConfig, arch: ArchConfig, ordered: bool = False, varlen: bool = False):
        """``ordered`` (select.KernelKey.ordered): compiled for ordered dQ only, reading each query tile's
        semaphore early (dq_order_peek). Else FLAG_ORDERED_DQ decides at run time: the Launch never sends this
        kernel an ordered problem, but it keeps that path (without it ptxas spills d64; see dq_order_wait).
        ``varlen``: packed sequences (kernels/segments.py; _segment_args)."""
        tile.check()
        self.varlen = varlen
        self.dtype = dtype
        self.tile = tile
        self.arch = arch
        self.ordered = ordered
        self.release_at_top = ordered and tile.release_at_top  # (TileConfig.release_at_top: the ordered set only)
        self.N, self.M, self.D = tile.n_block, tile.m_block, tile.head_dim_pad
        self.DV = tile.dv_pad  # V, dO and dV tiles (narrower than D only in the grid kernel)
        # threads that load a Q / dO tile (fewer than all where a 64-row tile cannot take them: cutil.copy_threads)
        self.q_threads = cutil.copy_threads(tile.num_threads, self.M, self.D)
        self.do_threads = cutil.copy_threads(tile.num_threads, self.M, self.DV)
        assert all(cutil.copy_threads(tile.num_threads, self.N, c) == tile.num_threads for c in (self.D, self.DV)), tile
        self.num_threads = tile.num_threads
        # (does dV, does dK + dQ) per walk over the query tiles
        self.passes = ((True, False), (False, True)) if tile.two_pass else ((True, True),)
        self.v_in_regs = False  # each warp holds its V rows (dP^T's A operand) in registers (bwd_main_lag)
        self.smem_bytes = None  # filled at trace time: the bytes the kernel allocates

    # ------------------------------------------------------------------------------------------------ host side
    @cute.jit
    def __call__(self, pQ: cute.Pointer, pK: cute.Pointer, pV: cute.Pointer, pdO: cute.Pointer,
                 pLSE2: cute.Pointer, pDelta: cute.Pointer, pdQacc: cute.Pointer, pdQ: cute.Pointer,
                 pdK: cute.Pointer, pdV: cute.Pointer, pSeqQ: cute.Pointer, pSeqKV: cute.Pointer, pSem: cute.Pointer,
                 pCuQ: cute.Pointer, pCuKV: cute.Pointer,
                 batch: Int32, heads: Int32, heads_kv: Int32, seqlen_q: Int32, seqlen_kv: Int32,
                 seqlen_q_pad: Int32, head_dim: Int32, head_dim_v: Int32, tokens_q: Int32, tokens_kv: Int32,
                 acc_rows: Int32,
                 q_sb: Int64, q_sh: Int64, q_ss: Int64, k_sb: Int64, k_sh: Int64, k_ss: Int64,
                 v_sb: Int64, v_sh: Int64, v_ss: Int64, do_sb: Int64, do_sh: Int64, do_ss: Int64,
                 dq_sb: Int64, dq_sh: Int64, dq_ss: Int64, dk_sb: Int64, dk_sh: Int64, dk_ss: Int64,
                 dv_sb: Int64, dv_sh: Int64, dv_ss: Int64, scale: Float32, scale_log2: Float32, bounds: MaskBounds,
                 flags: Int32, stream: cuda.CUstream):
        def bhsd(p, h, s, d, sb, sh, ss):
            return cutil.bhsd_tensor(p, batch, h, s, d, sb, sh, ss)

        sqp = cute.assume(seqlen_q_pad, divby=128)
        row_stride = cute.assume(Int64(sqp), divby=128)
        vec_layout = cute.make_layout((batch, heads, sqp),
                                      stride=(cute.assume(row_stride * heads, divby=128), row_stride, 1))
        acc_rs = cute.assume(row_stride * self.D, divby=128)
        n_sem = sqp // SEM_ROWS
        t = SimpleNamespace(
            Q=bhsd(pQ, heads, seqlen_q, head_dim, q_sb, q_sh, q_ss),
            K=bhsd(pK, heads_kv, seqlen_kv, head_dim, k_sb, k_sh, k_ss),
            V=bhsd(pV, heads_kv, seqlen_kv, head_dim_v, v_sb, v_sh, v_ss),
            dO=bhsd(pdO, heads, seqlen_q, head_dim_v, do_sb, do_sh, do_ss),
            dQ=bhsd(pdQ, heads, seqlen_q, head_dim, dq_sb, dq_sh, dq_ss),
            dK=bhsd(pdK, heads_kv, seqlen_kv, head_dim, dk_sb, dk_sh, dk_ss),
            dV=bhsd(pdV, heads_kv, seqlen_kv, head_dim_v, dv_sb, dv_sh, dv_ss),
            LSE2=cute.make_tensor(pLSE2, vec_layout), Delta=cute.make_tensor(pDelta, vec_layout),
            dQacc=cute.make_tensor(pdQacc, cute.make_layout(
                (batch, heads, sqp, self.D), stride=(cute.assume(acc_rs * heads, divby=128), acc_rs, self.D, 1))),
            SeqQ=cute.make_tensor(pSeqQ, cute.make_layout(batch)),
            SeqKV=cute.make_tensor(pSeqKV, cute.make_layout(batch)),
            Sem=cute.make_tensor(pSem, cute.make_layout((batch, heads, n_sem), stride=(n_sem * heads, n_sem, 1))),
            CuQ=cute.make_tensor(pCuQ, cute.make_layout(batch + 1)),
            CuKV=cute.make_tensor(pCuKV, cute.make_layout(batch + 1)))
        if cutlass.const_expr(self.varlen):
            t.dQacc = cute.make_tensor(pdQacc, packed_acc_layout(batch, heads, sqp, acc_rows, self.D))
        smem = self._smem_layouts()
        storage_cls = self._storage_cls(smem)
        self.smem_bytes = storage_cls.size_in_bytes()
        grid, flags = block_order(cute.ceil_div(seqlen_kv, self.N), heads_kv, batch, bounds, flags)
        self.kernel(t.Q, t.K, t.V, t.dO, t.LSE2, t.Delta, t.dQacc, t.dQ, t.dK, t.dV, t.SeqQ, t.SeqKV, t.Sem,
                    t.CuQ, t.CuKV, tokens_q, tokens_kv, heads // heads_kv, scale, scale_log2, bounds, flags,
                    storage_cls).launch(
            grid=grid, block=[self.num_threads, 1, 1], stream=stream, min_blocks_per_mp=self.tile.min_blocks,
            smem=launch_smem_bytes(self.arch, self.smem_bytes), preferred_smem_carveout=100)

    def _smem_layouts(self):
        t, N, M, D = self.tile, self.N, self.M, self.D
        return SimpleNamespace(
            K=cutil.smem_tile_layout(N, D), V=cutil.smem_tile_layout(N, self.DV),
            Q=cutil.smem_tile_layout(M, D, t.q_stages), dO=cutil.smem_tile_layout(M, self.DV, t.do_stages),
            dSt=cutil.smem_tile_layout(N, M))

    def _storage_cls(self, smem):
        return smem_storage(self.dtype, {"sK": cute.cosize(smem.K), "sV": cute.cosize(smem.V),
                                         "sQ": cute.cosize(smem.Q), "sdO": cute.cosize(smem.dO),
                                         "sdSt": cute.cosize(smem.dSt)}, self.M * self.tile.q_stages)

    def _tiled_mmas(self):
        op = warp.MmaF16BF16Op(self.dtype, Float32, (16, 8, 16))
        w = self.tile.num_warps
        wm, wd = self.tile.dq_warps
        # S^T, dP^T, dV and dK share one warp layout (warps along key rows): that is what lets P^T and dS^T be
        # reused from the accumulator registers as A operands.
        kv = cute.make_tiled_mma(op, (w, 1, 1), permutation_mnk=(w * 16, 16, 16))
        dq_cols = wd * self.tile.dq_col_step
        if self.tile.dq_red_v4 and wd > 2:  # a warp's two atoms in one 128-byte line of dQ (see dq_red_v4)
            dq_cols = cute.make_layout((8, wd, 2), stride=(1, 16, 8))
        dq = cute.make_tiled_mma(op, (wm, wd, 1), permutation_mnk=(wm * 16, dq_cols, 16))
        return SimpleNamespace(kv=kv, dq=dq)

    # ------------------------------------------------------------------------------------------------ the kernel
    @cute.kernel
    def kernel(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mdO: cute.Tensor, mLSE2: cute.Tensor,
               mDelta: cute.Tensor, mdQacc: cute.Tensor, mdQ: cute.Tensor, mdK: cute.Tensor, mdV: cute.Tensor,
               mSeqQ: cute.Tensor, mSeqKV: cute.Tensor, mSem: cute.Tensor, mCuQ: cute.Tensor, mCuKV: cute.Tensor,
               tokens_q: Int32, tokens_kv: Int32, group: Int32, scale: Float32, scale_log2: Float32,
               bounds: MaskBounds, flags: Int32, storage_cls: cutlass.Constexpr):
        args = SimpleNamespace(Q=mQ, K=mK, V=mV, dO=mdO, LSE2=mLSE2, Delta=mDelta, dQacc=mdQacc, dQ=mdQ, dK=mdK,
                               dV=mdV, SeqQ=mSeqQ, SeqKV=mSeqKV, Sem=mSem, group=group, bounds=bounds,
                               flags=flags, scale=scale, scale_log2=scale_log2, CuQ=mCuQ,
                               CuKV=mCuKV, tokens_q=tokens_q, tokens_kv=tokens_kv)
        self._body(args, storage_cls)

    @cute.jit
    def _body(self, args, storage_cls: cutlass.Constexpr):
        tidx, _, _ = cute.arch.thread_idx()
        s = self._smem_tensors(self._smem_layouts(), storage_cls)
        mm = self._mma_operands(self._tiled_mmas(), s, tidx)
        for p in cutlass.range_constexpr(len(self.passes)):
            do_dv, do_dk = self.passes[p]
            # everything per pass is re-derived from the kernel arguments (constant bank) so that nothing but
            # the accumulators stays live across a pass (two-pass tiles run at the register limit)
            a = self._segment_args(args)
            mask, g, ld, walk = self._setup(a, s, tidx)
            self._load_pass(ld, mask, walk, p == 0, do_dk)
            acc = self._make_acc(mm, do_dv, do_dk)
            self._walk(ld, mm, mask, acc, walk, args.scale_log2, do_dv, do_dk)
            cute.arch.cp_async_wait_group(0)
            cute.arch.sync_threads()
            if cutlass.const_expr(do_dk):
                self._dq_release_last(ld, walk)
            self._store_dkv(mm, acc, self._epilogue_views(a, g), a.K.shape[2], self._epilogue_keys(a, mask),
                            a.Q.shape[3], a.V.shape[3], a.scale, do_dv, do_dk)

    def _segment_args(self, a):
        """The kernel's arguments, for a packed problem (``varlen``) with every tensor re-based onto this CTA's
        segments (segments.rebased: its batch's tokens, S its segment's extent; the dQ accumulator on its rows).
        Traced inline."""
        if cutlass.const_expr(not self.varlen):
            return a
        _, _, batch = kv_tile_of_block(a.flags)
        start_q, extent_q = segment(a.CuQ, batch, a.tokens_q, a.Q.shape[2])
        start_kv, extent_kv = segment(a.CuKV, batch, a.tokens_kv, a.K.shape[2])
        moved = SimpleNamespace(**vars(a))
        for name in ("Q", "dO", "dQ"):
            setattr(moved, name, rebased(getattr(a, name), start_q, extent_q))
        for name in ("K", "V", "dK", "dV"):
            setattr(moved, name, rebased(getattr(a, name), start_kv, extent_kv))
        moved.dQacc = segment_acc(a.dQacc, start_q, batch, self.D)
        return moved

    @cute.jit
    def _epilogue_keys(self, a, mask):
        """Hook: the batch's key length (seq_len_kv[b]) for the epilogue's padded-key zeros, derived again from the
        kernel's arguments (through cutil.opaque_i32, so that nothing of the walk's stays live across it)."""
        _, _, batch = kv_tile_of_block(cutil.opaque_i32(a.flags))
        return batch_length(a.SeqKV, a.flags, FLAG_SEQ_KV, batch, a.K.shape[2])

    def _epilogue_views(self, a, g):
        """Hook: the gmem views a pass stores dK/dV through (its own, made before the walk)."""
        return g

    def _commit_groups(self, do_dk: bool) -> tuple[bool, bool]:
        """Whether a pass's first loads commit (K and V, Q, dO) as one cp.async group (False, False), or K/V
        and/or dO in groups of their own (the grid kernel waits for them apart)."""
        return False, False

    @cute.jit
    def _load_pass(self, ld, mask, walk, first: cutlass.Constexpr, do_dk: cutlass.Constexpr):
        """A pass's first loads: K (first pass only: it stays), V (passes with dK), the first Q and dO."""
        kv_apart, do_apart = self._commit_groups(do_dk)
        if cutlass.const_expr(first):
            cutil.load_tile_zfill(ld.copy, ld.tKgK, ld.tKsK, ld.tKcK, mask.seqlen_kv, ld.head_dim, self.tile.async_zfill)
        if cutlass.const_expr(do_dk):
            cutil.load_tile_zfill(ld.copy_v, ld.tVgV, ld.tVsV, ld.tVcV, mask.seqlen_kv, ld.head_dim_v,
                               self.tile.async_zfill)
        if cutlass.const_expr(kv_apart):
            cute.arch.cp_async_commit_group()
        if walk.n_iter > 0:
            self._load_q(ld, walk.head0, walk.m_first, 0, do_dk)
        if cutlass.const_expr(do_apart):
            cute.arch.cp_async_commit_group()
        if walk.n_iter > 0:
            self._load_do(ld, walk.head0, walk.m_first, 0)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def _walk(self, ld, mm, mask, acc, walk, scale_log2, do_dv: cutlass.Constexpr, do_dk: cutlass.Constexpr):
        """The pass's steps: query tiles from the last down, the GQA group's heads inner (TileConfig.heads_outer:
        all of a head's tiles before the next head's)."""
        if cutlass.const_expr(self.tile.k_in_regs):  # K's A fragments for the pass (K, first Q/dO landed)
            cute.arch.cp_async_wait_group(0)
            cute.arch.sync_threads()
            cute.copy(mm.cA, mm.sK, mm.rK_v)
        if cutlass.const_expr(self.tile.heads_outer):
            for it in cutlass.range(0, walk.n_iter, 1):
                head, m_block = self._walk_pos(walk, it)
                self._walk_step(ld, mm, mask, acc, walk, it, head, m_block, scale_log2, do_dv, do_dk)
        else:
            for m_i in cutlass.range(0, walk.n_m, 1):
                for h_i in cutlass.range(0, walk.group, 1):
                    self._walk_step(ld, mm, mask, acc, walk, m_i * walk.group + h_i, walk.head0 + h_i,
                                    walk.m_first - m_i, scale_log2, do_dv, do_dk)

    # ------------------------------------------------------------------------------------------------ one query tile
    @cute.jit
    def _walk_pos(self, walk, it):
        """(query head, query tile) of step ``it`` (for loops that carry only the step index)."""
        if cutlass.const_expr(self.tile.heads_outer):
            return walk.head0 + it // walk.n_m, walk.m_first - it % walk.n_m
        return walk.head0 + it % walk.group, walk.m_first - it // walk.group

    @cute.jit
    def _walk_next(self, walk, head, m_block):
        """(query head, query tile) of the step after (head, m_block): the next head, or the next tile down
        (TileConfig.heads_outer: the next tile down, or the next head from the top)."""
        if cutlass.const_expr(self.tile.heads_outer):
            head_next, m_next = head, m_block - 1
            if m_block == walk.m_last:
                head_next, m_next = head + 1, walk.m_first
        else:
            head_next, m_next = head + 1, m_block
            if head_next == walk.head0 + walk.group:
                head_next, m_next = walk.head0, m_block - 1
        return head_next, m_next

    @cute.jit
    def _walk_prev(self, walk, head, m_block):
        """(query head, query tile) of the step before (head, m_block) (undefined for the first step)."""
        if cutlass.const_expr(self.tile.heads_outer):
            head_prev, m_prev = head, m_block + 1
            if m_block == walk.m_first:
                head_prev, m_prev = head - 1, walk.m_last
        else:
            head_prev, m_prev = head - 1, m_block
            if head == walk.head0:
                head_prev, m_prev = walk.head0 + walk.group - 1, m_block + 1
        return head_prev, m_prev

    @cute.jit
    def _walk_step(self, ld, mm, mask, acc, walk, it, head, m_block, scale_log2, do_dv: cutlass.Constexpr,
                   do_dk: cutlass.Constexpr):
        """Step ``it`` of the walk: query tile ``m_block`` of query head ``head``."""
        t = self.tile
        q_stage, do_stage = it % t.q_stages, it % t.do_stages
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()
        if cutlass.const_expr(do_dk and self.release_at_top):
            self._dq_release_prev(ld, walk, it, head, m_block)  # the top barrier follows every warp's adds
        # the next position is derived where it is used (computed once for the whole step, it holds registers
        # the two-pass rows tile lacks)
        next_pos = lambda: self._walk_next(walk, head, m_block)  # noqa: E731
        self._load_next(ld, walk, it, next_pos, 1 - q_stage, 1 - do_stage, t.q_stages == 2, t.do_stages == 2,
                        do_dk)

        # atom_skip: the LSE and delta partitions made once before the runtime branches (the cubins measured; made in
        # each branch, d48/d64 compile differently). Elsewhere where each is used: made up front, d64's atomic and
        # ordered sets spill 16-24 bytes on sm_120a.
        vecs = (self._row_vec_part(mm, mm.sLSE2, q_stage), self._row_vec_part(mm, mm.sDelta, q_stage)) \
            if cutlass.const_expr(t.atom_skip) else None
        step_gemms = lambda atoms=None: self._step_gemms(  # noqa: E731
            mm, mask, acc, walk, m_block, q_stage, do_stage, scale_log2, do_dv, do_dk, vecs, atoms)
        if cutlass.const_expr(t.atom_skip):
            live = self._live_atoms(mask, walk.n_block, m_block)
            if live[0] & live[1]:
                step_gemms()
            elif live[1]:
                step_gemms((1,))
            elif live[0]:
                step_gemms((0,))
            else:  # 32-row query tiles: at a narrow walk's ends some warps see none of their keys (dS^T stays 0)
                step_gemms(())
        else:
            step_gemms()

        if cutlass.const_expr(do_dk or t.q_stages == 1 or t.do_stages == 1):
            cute.arch.sync_threads()  # dS^T complete in smem; every warp is done with this tile's Q and dO
        if cutlass.const_expr(do_dk and not self.release_at_top):
            self._dq_release_prev(ld, walk, it, head, m_block)  # before the refills: the fence has less to wait for
        self._load_next(ld, walk, it, next_pos, 0, 0, t.q_stages == 1, t.do_stages == 1, do_dk)
        if cutlass.const_expr(do_dk):
            self._dq_step(mm, ld, mask, walk, it, head, m_block)

    def _step_gemms(self, mm, mask, acc, walk, m_block, q_stage, do_stage, scale_log2, do_dv: cutlass.Constexpr,
                    do_dk: cutlass.Constexpr, vecs=None, atoms=None):
        """A step's work up to its dS^T in shared memory: S^T, P^T, dP^T, dV, dS^T, dK (traced inline). ``vecs``:
        the stage's (LSE, delta) _row_vec_part made by the caller (None: here, where each is used); ``atoms``: the
        MMA_M atoms whose GEMMs run (TileConfig.atom_skip; None: all)."""
        accP, accdP = self._score_gemms(mm, q_stage, do_stage, do_dk, atoms)
        lse2 = self._row_vec_part(mm, mm.sLSE2, q_stage) if vecs is None else vecs[0]
        self._probabilities(mm, mask, accP, m_block, walk.n_block, lse2, scale_log2, atoms)
        if cutlass.const_expr(do_dv):
            rP = cutil.convert(accP, self.dtype)
            cutil.gemm_rs(mm.kv, acc.dV, cutil.acc_as_a_operand(rP), mm.cBt, mm.sdOt[None, None, None, do_stage],
                       mm.rdOt, mm.rdOt_v, atoms)
        if cutlass.const_expr(do_dk):
            delta = self._row_vec_part(mm, mm.sDelta, q_stage) if vecs is None else vecs[1]
            rdS = self._softmax_grad(accP, accdP, delta, atoms)
            cute.copy(mm.dS_store, mm.dS_store.retile(rdS), mm.sdSt_dst)
            self._dk_gemm(mm, acc, rdS, q_stage, atoms)

    @cute.jit
    def _live_atoms(self, mask, n_block, m_block):
        """Per MMA_M atom of this warp (TileConfig.atom_skip): whether the step's query tile sees one of its 16
        key rows (the kv MMA gives warp w the rows 16 w + 16 W a of atom a, W warps)."""
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        key0 = n_block * self.N + warp * 16
        rows_apart = 16 * self.tile.num_warps
        return tuple(mask.block_sees(m_block * self.M, self.M, key0 + a * rows_apart, 16)
                     for a in range(self.N // rows_apart))

    def _row_vec_part(self, mm, vec: cute.Tensor, q_stage):
        """This thread's entries of a row vector of stage ``q_stage`` (mm.sLSE2: LSE * log2(e), or mm.sDelta),
        broadcast onto its S^T entries (accumulator layout)."""
        return mm.thr_kv.partition_C(vec[None, None, q_stage])

    @cute.jit
    def _load_next(self, ld, walk, it, next_pos, q_stage, do_stage, q: cutlass.Constexpr, do: cutlass.Constexpr,
                   with_delta: cutlass.Constexpr):
        """Issue the next step's Q (+ LSE, delta) into buffer ``q_stage`` and/or dO into ``do_stage``, as one
        commit group (none when neither is asked for). ``next_pos()`` gives the next step's (head, query tile);
        it is traced inside the has-next branch, so whatever it computes there is live nowhere else."""
        if cutlass.const_expr(q or do):
            if it + 1 < walk.n_iter:
                head_next, m_next = next_pos()
                if cutlass.const_expr(q):
                    self._load_q(ld, head_next, m_next, q_stage, with_delta)
                if cutlass.const_expr(do):
                    self._load_do(ld, head_next, m_next, do_stage)
            cute.arch.cp_async_commit_group()

    @cute.jit
    def _dk_gemm(self, mm, acc, rdS, q_stage, atoms: cutlass.Constexpr = None):
        """dK += dS^T . Q with dS^T from this warp's registers (``atoms``: see _step_gemms)."""
        cutil.gemm_rs(mm.kv, acc.dK, cutil.acc_as_a_operand(rdS), mm.cBt, mm.sQt[None, None, None, q_stage], mm.rQt,
                   mm.rQt_v, atoms)

    def _score_gemms(self, mm, q_stage, do_stage, with_dp: cutlass.Constexpr, atoms=None):
        """S^T = K.Q^T and (when ``with_dp``) dP^T = V.dO^T in fp32 registers, the two GEMMs interleaved: a warp's
        16-row tiles have only 4 MMA chains each, 8 together hide more ldmatrix latency."""
        shape = mm.thr_kv.partition_shape_C((self.N, self.M))
        accS, accdP = cute.make_rmem_tensor(shape, Float32), None
        accS.fill(0.0)
        copy_k = None if self.tile.k_in_regs else mm.cA  # (None: K's fragments were loaded for the pass)
        gemms = ((accS, copy_k, mm.sK, mm.rK, mm.rK_v, mm.cB, mm.sQ[None, None, None, q_stage], mm.rQ, mm.rQ_v),)
        if with_dp:
            accdP = cute.make_rmem_tensor(shape, Float32)
            accdP.fill(0.0)
            copy_v = None if self.v_in_regs else mm.cA  # (None: V's fragments were loaded for the walk)
            gemms += ((accdP, copy_v, mm.sV, mm.rV, mm.rV_v, mm.cB, mm.sdO[None, None, None, do_stage], mm.rdO,
                       mm.rdO_v),)
        cutil.gemm_ss_interleaved(mm.kv, gemms, atoms)
        return accS, accdP

    @cute.jit
    def _probabilities(self, mm, mask, accS, m_block, n_block, lse2, scale_log2, atoms: cutlass.Constexpr = None):
        """S^T -> P^T in place in fp32 registers; hidden entries exactly 0. ``lse2``: the LSE's _row_vec_part;
        ``atoms``: only these MMA_M atoms (see _step_gemms: the others' S^T are zeros no row sees, left as P^T)."""
        for acc_v, lse2_v, coords_v in cutil.by_atom(atoms, accS, lse2, mm.cS):
            p_mn = cutil.acc_mn_view(acc_v)
            scores_to_probs(cutil.mn_transpose(p_mn), cutil.mn_transpose(cutil.acc_mn_view(lse2_v)), scale_log2)
            if mask.tile_needs_mask(m_block, n_block, self.M, self.N):
                mask.zero_hidden(p_mn, cutil.acc_mn_view(coords_v), m_block, n_block, self.M, self.N,
                                 keys_on_rows=True, by_difference=self.tile.diff_mask)

    @cute.jit
    def _softmax_grad(self, accP, accdP, delta, atoms: cutlass.Constexpr = None):
        """dS^T = P^T o (dP^T - delta), returned in the io dtype (MMA accumulator layout). ``delta``: delta's
        _row_vec_part; ``atoms``: only these MMA_M atoms (the others' dP^T are zeros, their dS^T then too)."""
        for p_v, dp_v, delta_v in cutil.by_atom(atoms, accP, accdP, delta):
            softmax_grad(cutil.mn_transpose(cutil.acc_mn_view(p_v)), cutil.mn_transpose(cutil.acc_mn_view(dp_v)),
                         cutil.mn_transpose(cutil.acc_mn_view(delta_v)))
        return cutil.convert(accdP, self.dtype)

    # ------------------------------------------------------------------------------------------------ epilogue
    @cute.jit
    def _store_dkv(self, mm, acc, g, seqlen_kv, keys, hd, hdv, scale, do_dv: cutlass.Constexpr,
                   do_dk: cutlass.Constexpr):
        """dK/dV of the whole tile up to the tensor's extent; keys past the batch's length ``keys`` (padding, never
        visible) are stored as zeros, selected at the store (cutil.store_acc): their accumulators hold zeros for finite
        inputs, but a hidden P = 0 or dS = 0 times a NaN (a NaN dO row or delta of the tile's query rows) is NaN."""
        coords = mm.thr_acc.partition_C(g.cdKV)
        if cutlass.const_expr(do_dv):
            coords_v = coords if self.DV == self.D else mm.thr_acc.partition_C(g.cdV)
            cutil.store_acc(cutil.convert(acc.dV, self.dtype), mm.thr_acc.partition_C(g.gdV), coords_v, seqlen_kv, hdv,
                            zero_from_row=keys)
        if cutlass.const_expr(do_dk):
            for i in cutlass.range_constexpr(cute.size(acc.dK)):
                acc.dK[i] = acc.dK[i] * scale
            cutil.store_acc(cutil.convert(acc.dK, self.dtype), mm.thr_acc.partition_C(g.gdK), coords, seqlen_kv, hd,
                            zero_from_row=keys)


def smem_storage(dtype, tiles: dict, vec_len: int = 0, mbarriers: int = 0):
    """The kernel's shared-memory struct: the io-dtype tiles (name -> elements, 1024-byte aligned for the
    swizzle) in order, then the fp32 row vectors sLSE2 and sDelta (``vec_len`` each, 128-byte aligned; none for
    0: dq_gemm's kernel), then ``mbarriers`` mbarrier words ("mbar") where asked for."""
    def buf(dt, n, align=1024):
        return cute.struct.Align[cute.struct.MemRange[dt, n], align]

    fields = {name: buf(dtype, n) for name, n in tiles.items()}
    if vec_len:
        fields.update(sLSE2=buf(Float32, vec_len, 128), sDelta=buf(Float32, vec_len, 128))
    if mbarriers:
        fields.update(mbar=buf(cutlass.Int64, mbarriers, 8))
    return cute.struct(type("Storage", (), {"__annotations__": fields}))


# Elementwise steps on an accumulator in (query row, key) MN view (bwd_main passes its P^T transposed with
# cutil.mn_transpose). ``*_mn`` row vectors are broadcast over the keys (stride 0): read once per query row.
@cute.jit
def scores_to_probs(p_mn: cute.Tensor, lse2_mn: cute.Tensor, scale_log2: Float32):
    """S -> P = exp2(S * scale * log2(e) - LSE * log2(e)), in place."""
    for r in cutlass.range_constexpr(cute.size(p_mn, mode=[0])):
        lse2 = lse2_mn[r, 0]
        for c in cutlass.range_constexpr(cute.size(p_mn, mode=[1])):
            p_mn[r, c] = cute.math.exp2(p_mn[r, c] * scale_log2 - lse2, fastmath=True)


@cute.jit
def softmax_grad(p_mn: cute.Tensor, dp_mn: cute.Tensor, delta_mn: cute.Tensor):
    """dP -> dS = P o (dP - delta), in place in ``dp_mn``."""
    for r in cutlass.range_constexpr(cute.size(p_mn, mode=[0])):
        delta = delta_mn[r, 0]
        for c in cutlass.range_constexpr(cute.size(p_mn, mode=[1])):
            dp_mn[r, c] = p_mn[r, c] * (dp_mn[r, c] - delta)

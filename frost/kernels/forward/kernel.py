"""The attention forward kernel (FlashAttention-2 style, Q-stationary).

One CTA owns a query tile (``m_block`` rows) of one (batch, query head) and walks, from the last down, the KV
tiles the mask lets it see (mask.AttentionMask.n_block_range: a band walks only its own tiles). Query head h reads
kv head h // G. Per KV tile, on mma.sync m16n8k16 with ldmatrix operands:

    S  = Q . K^T                 (A = Q,  B = K; fp32 registers)
    hidden entries of S -inf (only on tiles that straddle a bound: tile_needs_mask)
    online softmax in log2 units: row max m, P = exp2(S * scale * log2(e) - m), row sum l, O rescaled by
    exp2(m_old - m)
    O += P . V                   (A = P from the S registers, B = V^T through ldmatrix.trans)

Each warp owns whole query rows, so P never leaves registers and the row reductions stay in a lane quad. With
tiles.ForwardTile.q_in_regs the warp's Q fragments are read from shared memory once, before the walk, and each step
reads only K and V by ldmatrix (fewer shared-memory reads a step). Loads are
cp.async (16 B), zero-filled outside the batch's rows/keys and the logical head dims; with two K/V stages
(tiles.ForwardTile.kv_stages) the next KV tile loads during this one, with one the next K loads while P.V runs and
V while Q.K^T runs. The epilogue folds in the sink (natural-log units, not scaled): with M = max(m,
sink * log2(e)), LSE = ln2 * (M + log2(l * 2^(m - M) + 2^(sink log2(e) - M))) and O = O * 2^(m - M) / that sum.
A padded row (i >= seq_len_q[b]) gets O = 0 and LSE = -inf; a valid row that sees no key O = 0 and LSE = sink
(-inf without one); rows past Sq are not written. Non-finite inputs follow the math (finish_row): NaN scores reach
the row sum (fmax skips them in the max), a +inf score or sink gives LSE = +inf, a NaN sink LSE = NaN. Within a
visited tile P.V multiplies a masked P = 0 by every V row of the tile, so a NaN or inf in V reaches column d of O in
the tile's rows that do not see that key (docs/nonfinite.md).

Batch, heads, GQA group, sequence lengths (full and per batch), logical head dims, strides, scale, band bounds,
alignment and the sink are runtime values; the compiled code depends on the dtype and the tile (tiles.py)."""

from types import SimpleNamespace

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64
from cutlass.cute.nvgpu import warp

from frost.kernels import cute_utils as cutil
from frost.kernels.arch import ArchConfig, launch_smem_bytes
from frost.kernels.forward.tiles import ForwardTile
from frost.kernels.geometry import LOG2_E
from frost.kernels.mask import FLAG_SEQ_KV, FLAG_SEQ_Q, MaskBounds, batch_length, make_mask
from frost.kernels.segments import rebased, segment
from frost.spec import kernel_flag

LN_2 = 0.6931471805599453
NEG_INF = float("-inf")
POS_INF = float("inf")
NAN = float("nan")


class FwdKernel:
    def __init__(self, dtype, tile: ForwardTile, arch: ArchConfig, varlen: bool = False):
        """``varlen``: compiled for packed sequences (segments.py): batch b's tokens are [cu_q[b], cu_q[b+1]) of
        Q and O, [cu_kv[b], cu_kv[b+1]) of K and V."""
        tile.check()
        self.dtype, self.tile, self.arch, self.varlen = dtype, tile, arch, varlen
        self.M, self.N, self.D, self.DV = tile.m_block, tile.n_block, tile.head_dim_pad, tile.head_dim_v_pad
        self.num_threads = tile.num_threads
        self.stages = tile.kv_stages
        self.q_threads = cutil.copy_threads(self.num_threads, self.M, self.D)
        assert all(cutil.copy_threads(self.num_threads, self.N, c) == self.num_threads for c in (self.D, self.DV)), tile
        self.smem_bytes = None  # filled at trace time

    # ------------------------------------------------------------------------------------------------ host side
    @cute.jit
    def __call__(self, pQ: cute.Pointer, pK: cute.Pointer, pV: cute.Pointer, pO: cute.Pointer, pLSE: cute.Pointer,
                 pSeqQ: cute.Pointer, pSeqKV: cute.Pointer, pSink: cute.Pointer, pCuQ: cute.Pointer,
                 pCuKV: cute.Pointer, batch: Int32, heads: Int32, heads_kv: Int32, seqlen_q: Int32, seqlen_kv: Int32,
                 head_dim: Int32, head_dim_v: Int32, tokens_q: Int32, tokens_kv: Int32,
                 q_sb: Int64, q_sh: Int64, q_ss: Int64, k_sb: Int64, k_sh: Int64, k_ss: Int64,
                 v_sb: Int64, v_sh: Int64, v_ss: Int64, o_sb: Int64, o_sh: Int64, o_ss: Int64,
                 lse_sb: Int64, lse_sh: Int64, lse_ss: Int64,
                 scale_log2: Float32, band_left: Int32, band_right: Int32, flags: Int32, stream: cuda.CUstream):
        def bhsd(p, h, s, d, sb, sh, ss):
            return cutil.bhsd_tensor(p, batch, h, s, d, sb, sh, ss)

        mQ = bhsd(pQ, heads, seqlen_q, head_dim, q_sb, q_sh, q_ss)
        mK = bhsd(pK, heads_kv, seqlen_kv, head_dim, k_sb, k_sh, k_ss)
        mV = bhsd(pV, heads_kv, seqlen_kv, head_dim_v, v_sb, v_sh, v_ss)
        mO = bhsd(pO, heads, seqlen_q, head_dim_v, o_sb, o_sh, o_ss)
        mLSE = cute.make_tensor(pLSE, cute.make_layout((batch, heads, seqlen_q), stride=(lse_sb, lse_sh, lse_ss)))
        mSeqQ = cute.make_tensor(pSeqQ, cute.make_layout(batch))
        mSeqKV = cute.make_tensor(pSeqKV, cute.make_layout(batch))
        mSink = cute.make_tensor(pSink, cute.make_layout(heads))
        cu_seqlens = SimpleNamespace(q=cute.make_tensor(pCuQ, cute.make_layout(batch + 1)),
                                     kv=cute.make_tensor(pCuKV, cute.make_layout(batch + 1)),
                                     tokens_q=tokens_q, tokens_kv=tokens_kv)
        storage_cls = self._storage_cls()
        self.smem_bytes = storage_cls.size_in_bytes()
        grid = (cute.ceil_div(seqlen_q, self.M), heads, batch)
        bounds = MaskBounds(band_left, band_right)
        self.kernel(mQ, mK, mV, mO, mLSE, mSeqQ, mSeqKV, mSink, cu_seqlens.q, cu_seqlens.kv, tokens_q, tokens_kv,
                    heads // cutlass.max(heads_kv, 1), scale_log2, bounds, flags, storage_cls).launch(
            grid=grid, block=[self.num_threads, 1, 1], stream=stream, min_blocks_per_mp=self.tile.min_blocks,
            smem=launch_smem_bytes(self.arch, self.smem_bytes), preferred_smem_carveout=100)

    def _smem_layouts(self):
        return SimpleNamespace(Q=cutil.smem_tile_layout(self.M, self.D),
                               K=cutil.smem_tile_layout(self.N, self.D, self.stages),
                               V=cutil.smem_tile_layout(self.N, self.DV, self.stages))

    def _storage_cls(self):
        smem = self._smem_layouts()

        def buf(n):
            return cute.struct.Align[cute.struct.MemRange[self.dtype, n], 1024]

        fields = {"sQ": buf(cute.cosize(smem.Q)), "sK": buf(cute.cosize(smem.K)), "sV": buf(cute.cosize(smem.V))}
        return cute.struct(type("FwdStorage", (), {"__annotations__": fields}))

    # ------------------------------------------------------------------------------------------------ the kernel
    @cute.kernel
    def kernel(self, mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor, mO: cute.Tensor, mLSE: cute.Tensor,
               mSeqQ: cute.Tensor, mSeqKV: cute.Tensor, mSink: cute.Tensor, mCuQ: cute.Tensor, mCuKV: cute.Tensor,
               tokens_q: Int32, tokens_kv: Int32, group: Int32, scale_log2: Float32, bounds: MaskBounds,
               flags: Int32, storage_cls: cutlass.Constexpr):
        tidx, _, _ = cute.arch.thread_idx()
        bx, head, batch = cute.arch.block_idx()
        gx, _, _ = cute.arch.grid_dim()
        m_block = gx - 1 - bx  # the longest causal rows first
        if cutlass.const_expr(self.varlen):
            start_q, extent_q = segment(mCuQ, batch, tokens_q, mQ.shape[2])
            start_kv, extent_kv = segment(mCuKV, batch, tokens_kv, mK.shape[2])
            mQ, mO, mLSE = rebased(mQ, start_q, extent_q), rebased(mO, start_q, extent_q), \
                rebased(mLSE, start_q, extent_q)
            mK, mV = rebased(mK, start_kv, extent_kv), rebased(mV, start_kv, extent_kv)
        seqlen_q = batch_length(mSeqQ, flags, FLAG_SEQ_Q, batch, mQ.shape[2])
        seqlen_kv = batch_length(mSeqKV, flags, FLAG_SEQ_KV, batch, mK.shape[2])
        mask = make_mask(seqlen_q, seqlen_kv, bounds, flags)
        n_begin, n_end = mask.n_block_range(m_block, self.N, self.M)
        n_iter = cutlass.max(n_end - n_begin, 0)
        head_kv = head // group

        st = cutlass.memory.SmemAllocator().allocate(storage_cls)
        smem = self._smem_layouts()
        sQ, sK, sV = st.sQ.get_tensor(smem.Q), st.sK.get_tensor(smem.K), st.sV.get_tensor(smem.V)
        g = self._gmem_tiles(mQ, mK, mV, batch, head, head_kv, m_block)
        ld = self._loaders(g, sQ, sK, sV, tidx)
        mm = self._mma_operands(sQ, sK, sV, tidx)

        cutil.load_tile_zfill_by(self.q_threads, self.num_threads, tidx, ld.copy_q, ld.tQgQ, ld.tQsQ, ld.tQcQ,
                              seqlen_q, mQ.shape[3], True)
        if cutlass.const_expr(self.tile.q_in_regs):
            cute.arch.cp_async_commit_group()  # Q alone, so that it can be waited for before the first K/V
        if n_iter > 0:
            self._load_kv(ld.copy, ld.tKgK, ld.tKsK, ld.tKcK, n_end - 1, 0, seqlen_kv, mK.shape[3])
            if cutlass.const_expr(self.stages == 2):
                self._load_kv(ld.copy_v, ld.tVgV, ld.tVsV, ld.tVcV, n_end - 1, 0, seqlen_kv, mV.shape[3])
        cute.arch.cp_async_commit_group()
        if cutlass.const_expr(self.tile.q_in_regs):
            cute.arch.cp_async_wait_group(1)
            cute.arch.sync_threads()  # Q landed (every thread's part)
            cute.copy(mm.cA, mm.sQ, mm.rQ_v)

        acc_o = cute.make_rmem_tensor(mm.thr.partition_shape_C((self.M, self.DV)), Float32)
        acc_o.fill(0.0)
        rows = cute.size(cutil.acc_mn_view(acc_o), mode=[0])
        row_max = cute.make_rmem_tensor(cute.make_layout(rows), Float32)
        row_sum = cute.make_rmem_tensor(cute.make_layout(rows), Float32)
        row_max.fill(NEG_INF)
        row_sum.fill(0.0)
        soft = SimpleNamespace(mask=mask, m_block=m_block, scale_log2=scale_log2, row_max=row_max, row_sum=row_sum)
        kv = SimpleNamespace(ld=ld, seqlen_kv=seqlen_kv, d=mK.shape[3], dv=mV.shape[3])
        for it in cutlass.range(0, n_iter, 1):
            if cutlass.const_expr(self.stages == 2):
                self._step_pipelined(mm, kv, soft, acc_o, it, n_end - 1 - it, it + 1 < n_iter)
            else:
                self._step_single(mm, kv, soft, acc_o, n_end - 1 - it, it + 1 < n_iter)
        cute.arch.cp_async_wait_group(0)

        sink2 = Float32(NEG_INF)
        if (flags & kernel_flag("sink")) != 0:
            sink2 = mSink[head] * LOG2_E
        self._epilogue(mm, acc_o, row_max, row_sum, sink2, mO, mLSE, batch, head, m_block, seqlen_q)

    # ------------------------------------------------------------------------------------------------ setup helpers
    @cute.jit
    def _gmem_tiles(self, mQ, mK, mV, batch, head, head_kv, m_block):
        """This CTA's Q tile, and its head's K and V as (N, D, tiles) stacks, with their coordinate tensors."""
        q_bh, k_bh, v_bh = mQ[batch, head, None, None], mK[batch, head_kv, None, None], mV[batch, head_kv, None, None]
        return SimpleNamespace(
            gQ=cute.local_tile(q_bh, (self.M, self.D), (m_block, 0)),
            cQ=cute.local_tile(cute.make_identity_tensor(q_bh.shape), (self.M, self.D), (m_block, 0)),
            gK=cute.local_tile(k_bh, (self.N, self.D), (None, 0)),
            cK=cute.local_tile(cute.make_identity_tensor(k_bh.shape), (self.N, self.D), (None, 0)),
            gV=cute.local_tile(v_bh, (self.N, self.DV), (None, 0)),
            cV=cute.local_tile(cute.make_identity_tensor(v_bh.shape), (self.N, self.DV), (None, 0)))

    def _loaders(self, g, sQ, sK, sV, tidx):
        copy_q = cutil.make_gmem_copy(self.dtype, self.q_threads, self.D)
        thr_q = copy_q.get_slice(tidx % self.q_threads)
        copy = cutil.make_gmem_copy(self.dtype, self.num_threads, self.D)
        thr = copy.get_slice(tidx)
        copy_v = copy if self.DV == self.D else cutil.make_gmem_copy(self.dtype, self.num_threads, self.DV)
        thr_v = thr if self.DV == self.D else copy_v.get_slice(tidx)
        return SimpleNamespace(
            copy_q=copy_q, copy=copy, copy_v=copy_v,
            tQgQ=thr_q.partition_S(g.gQ), tQsQ=thr_q.partition_D(sQ), tQcQ=thr_q.partition_S(g.cQ),
            tKgK=thr.partition_S(g.gK), tKsK=thr.partition_D(sK), tKcK=thr.partition_S(g.cK),
            tVgV=thr_v.partition_S(g.gV), tVsV=thr_v.partition_D(sV), tVcV=thr_v.partition_S(g.cV))

    @cute.jit
    def _load_kv(self, copy, t_src, t_dst, t_coord, n_block, stage, seqlen_kv, cols):
        """cp.async KV tile ``n_block`` into ``stage`` (keys past ``seqlen_kv`` and columns past ``cols``
        zero-filled)."""
        cutil.load_tile_zfill(copy, t_src[None, None, None, n_block], t_dst[None, None, None, stage],
                           t_coord[None, None, None, n_block], seqlen_kv, cols, True)

    def _mma_operands(self, sQ, sK, sV, tidx):
        op = warp.MmaF16BF16Op(self.dtype, Float32, (16, 8, 16))
        w = self.tile.num_warps
        tiled = cute.make_tiled_mma(op, (w, 1, 1), permutation_mnk=(w * 16, 16, 16))
        thr = tiled.get_slice(tidx)
        ldsm = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=False, num_matrices=4), self.dtype)
        ldsm_t = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=4), self.dtype)
        cA = cute.make_tiled_copy_A(ldsm, tiled).get_slice(tidx)
        cB = cute.make_tiled_copy_B(ldsm, tiled).get_slice(tidx)
        cBt = cute.make_tiled_copy_B(ldsm_t, tiled).get_slice(tidx)
        sVt = cutil.transpose_view(sV, self.N, self.DV, self.stages)
        rQ = thr.make_fragment_A(thr.partition_A(sQ))
        rK = thr.make_fragment_B(thr.partition_B(sK[None, None, 0]))
        rVt = thr.make_fragment_B(thr.partition_B(sVt[None, None, 0]))
        return SimpleNamespace(
            tiled=tiled, thr=thr, cA=cA, cB=cB, cBt=cBt,
            cS=thr.partition_C(cute.make_identity_tensor((self.M, self.N))),
            cO=thr.partition_C(cute.make_identity_tensor((self.M, self.DV))),
            **cutil.ldsm_operands({"Q": (cA, rQ, sQ), "K": (cB, rK, sK), "Vt": (cBt, rVt, sVt)}))

    # ------------------------------------------------------------------------------------------------ one KV tile
    @cute.jit
    def _step_pipelined(self, mm, kv, soft, acc_o, it, n_block, has_next):
        """Two K/V stages: this tile's K and V landed during the last step; the next tile's load into the other
        stage as soon as every warp is done with it (one barrier a step)."""
        stage = it % 2
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()  # this tile landed; every warp is done with the other stage
        if has_next:
            self._load_kv(kv.ld.copy, kv.ld.tKgK, kv.ld.tKsK, kv.ld.tKcK, n_block - 1, 1 - stage, kv.seqlen_kv, kv.d)
            self._load_kv(kv.ld.copy_v, kv.ld.tVgV, kv.ld.tVsV, kv.ld.tVcV, n_block - 1, 1 - stage, kv.seqlen_kv,
                          kv.dv)
        cute.arch.cp_async_commit_group()
        rP = self._scores_to_probs(mm, soft, acc_o, n_block, stage)
        cutil.gemm_rs(mm.tiled, acc_o, cutil.acc_as_a_operand(rP), mm.cBt, mm.sVt[None, None, None, stage], mm.rVt,
                   mm.rVt_v)

    @cute.jit
    def _step_single(self, mm, kv, soft, acc_o, n_block, has_next):
        """One K and one V buffer: V loads while Q.K^T runs, the next K while P.V runs (two barriers a step)."""
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()  # K landed; every warp is done with the last V
        self._load_kv(kv.ld.copy_v, kv.ld.tVgV, kv.ld.tVsV, kv.ld.tVcV, n_block, 0, kv.seqlen_kv, kv.dv)
        cute.arch.cp_async_commit_group()
        rP = self._scores_to_probs(mm, soft, acc_o, n_block, 0)
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()  # V landed; every warp is done with this K
        if has_next:
            self._load_kv(kv.ld.copy, kv.ld.tKgK, kv.ld.tKsK, kv.ld.tKcK, n_block - 1, 0, kv.seqlen_kv, kv.d)
        cute.arch.cp_async_commit_group()
        cutil.gemm_rs(mm.tiled, acc_o, cutil.acc_as_a_operand(rP), mm.cBt, mm.sVt[None, None, None, 0], mm.rVt, mm.rVt_v)

    @cute.jit
    def _scores_to_probs(self, mm, soft, acc_o, n_block, stage):
        """S = Q.K^T of KV tile ``n_block`` (K in ``stage``), masked where the tile straddles a bound, through the
        online softmax: P in the io dtype (accumulator layout); O rescaled."""
        acc_s = cute.make_rmem_tensor(mm.thr.partition_shape_C((self.M, self.N)), Float32)
        acc_s.fill(0.0)
        copy_q = None if cutlass.const_expr(self.tile.q_in_regs) else mm.cA
        cutil.gemm_ss_interleaved(mm.tiled, ((acc_s, copy_q, mm.sQ, mm.rQ, mm.rQ_v, mm.cB,
                                           mm.sK[None, None, None, stage], mm.rK, mm.rK_v),))
        s_mn = cutil.acc_mn_view(acc_s)
        if soft.mask.tile_needs_mask(soft.m_block, n_block, self.M, self.N):
            hide_scores(soft.mask, s_mn, cutil.acc_mn_view(mm.cS), soft.m_block, n_block, self.M, self.N)
        online_softmax(s_mn, cutil.acc_mn_view(acc_o), soft.row_max, soft.row_sum, soft.scale_log2,
                       self.tile.lazy_rescale)
        return cutil.convert(acc_s, self.dtype)

    # ------------------------------------------------------------------------------------------------ epilogue
    @cute.jit
    def _epilogue(self, mm, acc_o, row_max, row_sum, sink2, mO, mLSE, batch, head, m_block, seqlen_q):
        """O = acc * 2^(m - M) / denominator in the io dtype, LSE in natural log (see the module doc)."""
        o_mn = cutil.acc_mn_view(acc_o)
        c_mn = cutil.acc_mn_view(mm.cO)
        lse_row = cute.make_rmem_tensor(cute.make_layout(cute.size(o_mn, mode=[0])), Float32)
        row0 = m_block * self.M
        for r in cutlass.range_constexpr(cute.size(o_mn, mode=[0])):
            row = row0 + c_mn[r, 0][0]
            total = quad_sum(row_sum[r])
            o_scale, lse2 = finish_row(total, row_max[r], sink2)
            if row >= seqlen_q:
                lse2 = Float32(NEG_INF)
            # a padded row, and a row that weighed no key (sum 0: none visible, or every score -inf), read nothing:
            # O = 0 selected, not multiplied (a NaN in a V row its tile loaded reaches its accumulator as 0 * NaN)
            empty = (row >= seqlen_q) | (total == Float32(0.0))
            lse_row[r] = lse2 * LN_2
            for c in cutlass.range_constexpr(cute.size(o_mn, mode=[1])):
                o_mn[r, c] = Float32(0.0) if empty else o_mn[r, c] * o_scale
        o_bh = mO[batch, head, None, None]
        gO = cute.local_tile(o_bh, (self.M, self.DV), (m_block, 0))
        cO = cute.local_tile(cute.make_identity_tensor(o_bh.shape), (self.M, self.DV), (m_block, 0))
        cutil.store_acc(cutil.convert(acc_o, self.dtype), mm.thr.partition_C(gO), mm.thr.partition_C(cO), o_bh.shape[0],
                     o_bh.shape[1])
        lane = cute.arch.lane_idx()
        if lane % 4 == 0:  # a lane quad shares its rows
            for r in cutlass.range_constexpr(cute.size(o_mn, mode=[0])):
                row = row0 + c_mn[r, 0][0]
                if row < o_bh.shape[0]:
                    mLSE[batch, head, row] = lse_row[r]


# Elementwise steps on an accumulator in (query row, key) MN view.
@cute.jit
def hide_scores(mask, s_mn: cute.Tensor, c_mn: cute.Tensor, m_block: Int32, n_block: Int32,
                m_block_size: cutlass.Constexpr, n_block_size: cutlass.Constexpr):
    """Entries the mask hides become -inf. The band test (mask.AttentionMask.visible's) is one unsigned compare
    per entry, key - row - left_offset <= right_offset - left_offset (as in AttentionMask.zero_hidden's
    by_difference), the key bound a second loop run only on a tile that straddles seqlen_kv."""
    row0, key0 = m_block * m_block_size, n_block * n_block_size
    base, width = key0 - row0 - mask.left_offset, mask.right_offset - mask.left_offset
    for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
        for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
            vis = cutil.unsigned_le(base + c_mn[0, c][1] - c_mn[r, 0][0], width)
            s_mn[r, c] = s_mn[r, c] if vis else Float32(NEG_INF)
    if key0 + n_block_size > mask.seqlen_kv:
        limit = mask.seqlen_kv - key0
        for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
            for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
                s_mn[r, c] = s_mn[r, c] if c_mn[0, c][1] < limit else Float32(NEG_INF)


@cute.jit
def quad_max(x: Float32) -> Float32:
    x = cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=2))
    return cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=1))


@cute.jit
def quad_sum(x: Float32) -> Float32:
    x = x + cute.arch.shuffle_sync_bfly(x, offset=2)
    return x + cute.arch.shuffle_sync_bfly(x, offset=1)


@cute.jit
def online_softmax(s_mn: cute.Tensor, o_mn: cute.Tensor, row_max: cute.Tensor, row_sum: cute.Tensor,
                   scale_log2: Float32, lazy_rescale: cutlass.Constexpr = False):
    """Raw scores S -> P = exp2(S * scale * log2(e) - m) in place (one FFMA and one exp2 per entry), m the running
    row max in log2 units (the scale is > 0, so the raw max scales to it); O and this thread's part of the row sum
    are rescaled by exp2(m_old - m). A row that has seen no key keeps m = -inf and P = 0 (the exponent's offset is
    0 then, never -inf - -inf). ``lazy_rescale``: O's row is left as it is when m did not move (its factor is
    exp2(0) = 1; a row still at -inf holds zeros), which late in a walk is most steps."""
    for r in cutlass.range_constexpr(cute.size(s_mn, mode=[0])):
        m_old = row_max[r]
        m_raw = s_mn[r, 0]
        for c in cutlass.range_constexpr(1, cute.size(s_mn, mode=[1])):
            m_raw = cute.arch.fmax(m_raw, s_mn[r, c])
        m = cute.arch.fmax(m_old, quad_max(m_raw) * scale_log2)
        row_max[r] = m
        offset = m if m != Float32(NEG_INF) else Float32(0.0)
        corr = cute.math.exp2(m_old - offset, fastmath=True)
        part = Float32(0.0)
        for c in cutlass.range_constexpr(cute.size(s_mn, mode=[1])):
            p = cute.math.exp2(s_mn[r, c] * scale_log2 - offset, fastmath=True)
            s_mn[r, c] = p
            part = part + p
        row_sum[r] = row_sum[r] * corr + part
        if cutlass.const_expr(lazy_rescale):
            if m != m_old:
                rescale_row(o_mn, r, corr)
        else:
            rescale_row(o_mn, r, corr)


@cute.jit
def rescale_row(o_mn: cute.Tensor, r: cutlass.Constexpr, corr: Float32):
    for c in cutlass.range_constexpr(cute.size(o_mn, mode=[1])):
        o_mn[r, c] = o_mn[r, c] * corr


@cute.jit
def finish_row(total: Float32, m: Float32, sink2: Float32):
    """(O's factor, LSE in log2 units) of a row from its sum of exp2(S - m), its max m (log2 units; -inf: no key;
    fmax skips NaN scores, whose exp2 makes the sum NaN) and the sink * log2(e) (-inf: none). Non-finite inputs
    follow the math: a +inf score or sink takes all the weight (LSE = +inf; factor 0, so O is 0, or NaN where a P
    was NaN); a NaN sink, or a NaN score without a +inf one, makes LSE and the factor NaN."""
    top = cute.arch.fmax(m, sink2)
    o_scale, lse2 = Float32(0.0), Float32(NEG_INF)
    if top != Float32(NEG_INF):
        kept = cute.math.exp2(m - top, fastmath=True)
        denom = total * kept + cute.math.exp2(sink2 - top, fastmath=True)
        o_scale = kept / denom
        lse2 = top + cute.math.log2(denom, fastmath=False)
    if top == Float32(POS_INF):
        o_scale, lse2 = Float32(0.0), Float32(POS_INF)
    if (sink2 != sink2) | ((total != total) & (m != Float32(POS_INF))):
        o_scale, lse2 = Float32(NAN), Float32(NAN)
    return o_scale, lse2

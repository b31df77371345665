"""dQ as a GEMM of its own over the dS the main kernel stored, instead of fp32 adds from every KV tile.

In deterministic mode the relay (ordering.dq_order_wait) makes the KV tiles visiting a query tile add their dQ
one after the other, paying its acquires and releases. The grid kernel (d192, d256) and the rows kernel at d160
have 64-key tiles, so their dQ adds are twice as many per score as a 128-key tile's, in the default mode too.
docs/performance.md has what both cost. A set compiled with KernelKey.dq_gemm runs
instead (catalogue.DQ_GEMM_TILES; deterministic mode at d96/d128, both modes at d160/d192/d256):
- the main kernel (bwd_main_ds) without its dQ GEMM and adds: each step stores its dS tile (the io-dtype values
  the dQ GEMM would have read) into a workspace (ds_workspace: dS^T from the rows kernel, dS from the grid
  kernel) in the dq_accum region (api.workspace_regions: B x Hq x Skv x Sq x 2 bytes, up to DQ_GEMM_MAX_BYTES);
- this kernel: dQ = scale * dS . K per query tile, its visiting KV tiles summed in ascending order in fp32
  registers (bitwise reproducible, no atomics, no fp32 accumulator, no convert pass), written once in the io dtype.
The main kernel without its dQ GEMM and adds is faster than the default mode's, and this kernel takes most of
that back: deterministic mode costs a few percent over the default mode instead of the relay's tenth and more, and
at the 64-key tiles (d160, d192, d256) the set is faster than the atomic one in both modes.

CTA (DqGemmTile): ``tiles`` of the main kernel's query tiles (QM rows each) of one (batch, head), a group of
``tile_warps`` warps per query tile splitting the head dim. The keys are walked in ``kn``-row chunks through
``stages`` cp.async stages of K (zero-filled past the batch's key length and the head dim) and of every tile's
dS chunk, laid out like the workspace (the smem stage index is tile * stages + stage, so a group's stages are one
block; A = dS through ldmatrix, transposed from dS^T), in trips of
``stages`` steps so that each step's stage is a constant. A group adds a chunk only when the chunk's KV tile
visited its query tile (mask.n_block_range, the inverse of the main kernel's walk), so its sum runs over exactly
the tiles the main kernel stored; the others' dS chunks are loaded anyway (workspace never written, inside the
region, never multiplied: cheaper than predicating the loads). Rows of a query tile no KV tile visits come out
as zeros; rows past the batch's length are not written (the preprocess zeroed them: their dS, exactly zero for
finite inputs, is NaN where a non-finite K or V row shares their tile). One CTA barrier per chunk (per-stage
mbarriers, letting warps drift a chunk apart, cost a stage and gain nothing here).

Grid: (ceil(seqlen_q / (tiles * QM)), heads, batch), or on causal-like walks (heads, batch, query tile groups)
from the last group down (ordering.dq_gemm_block_order); per (dtype, head_dim_pad)."""

from types import SimpleNamespace

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64
from cutlass.cute.nvgpu import warp

from frost.kernels import cute_utils as cutil
from frost.kernels.arch import ArchConfig, launch_smem_bytes
from frost.kernels.backward.bwd_main import smem_storage
from frost.kernels.mask import FLAG_SEQ_KV, FLAG_SEQ_Q, MaskBounds, batch_length, make_mask
from frost.kernels.backward.ordering import dq_gemm_block_order, q_tile_of_block
from frost.kernels.backward.ds_workspace import MAIN_KN
from frost.kernels.backward.tiles import DQ_GEMM_QM as QM, DqGemmTile



def ds_workspace(ptr: cute.Pointer, batch, heads, seqlen_kv, seqlen_q_pad, keys_major: bool) -> cute.Tensor:
    """The dS workspace over ``ptr`` (the dq_accum region, recast to the io dtype by the caller), keys padded to
    MAIN_KN and queries to the workspace's row pad: (batch, head, key, query), dS^T, where the main kernel holds
    dS^T (the rows kernel), else (batch, head, query, key) (the grid kernel holds dS)."""
    keys = cute.assume(cute.ceil_div(seqlen_kv, MAIN_KN) * MAIN_KN, divby=MAIN_KN)
    rows, cols = (keys, seqlen_q_pad) if keys_major else (seqlen_q_pad, keys)
    row_stride = cute.assume(Int64(cols), divby=128)
    head_stride = cute.assume(row_stride * rows, divby=128)
    return cute.make_tensor(ptr, cute.make_layout((batch, heads, rows, cols),
                                                  stride=(head_stride * heads, head_stride, row_stride, 1)))


class DqGemmKernel:
    def __init__(self, dtype, head_dim_pad: int, arch: ArchConfig, tile: DqGemmTile = DqGemmTile(),
                 main_kn: int = MAIN_KN, keys_major: bool = True):
        """``main_kn``: the main kernel's KV tile (its walks say which tiles it stored); ``keys_major``: the
        workspace holds dS^T (ds_workspace)."""
        self.dtype, self.D, self.arch, self.t = dtype, head_dim_pad, arch, tile
        self.main_kn, self.keys_major = main_kn, keys_major
        # columns per warp and MMA step (ldmatrix .x4 / .x2)
        self.col_step = 16 if head_dim_pad % (16 * tile.tile_warps) == 0 else 8
        assert head_dim_pad % (self.col_step * tile.tile_warps) == 0 and tile.smem_bytes(head_dim_pad) <= 99 * 1024
        assert MAIN_KN % main_kn == 0 and main_kn % tile.kn == 0
        # a query tile's dS chunk in shared memory: (keys, queries) or (queries, keys), like the workspace
        self.ds_tile = (tile.kn, QM) if keys_major else (QM, tile.kn)
        # threads that load a K / dS chunk (fewer than all where the chunk is short: cutil.copy_threads)
        self.k_threads = cutil.copy_threads(tile.threads, tile.kn, head_dim_pad)
        self.ds_threads = cutil.copy_threads(tile.threads, *self.ds_tile)

    # ------------------------------------------------------------------------------------------------ host side
    # (pdQacc: the workspace's dq_accum region, which holds dS in these sets; the chain names arguments alike)
    @cute.jit
    def __call__(self, pdQacc: cute.Pointer, pK: cute.Pointer, pdQ: cute.Pointer, pSeqQ: cute.Pointer,
                 pSeqKV: cute.Pointer, batch: Int32, heads: Int32, heads_kv: Int32, seqlen_q: Int32,
                 seqlen_kv: Int32, seqlen_q_pad: Int32, head_dim: Int32, k_sb: Int64, k_sh: Int64, k_ss: Int64,
                 dq_sb: Int64, dq_sh: Int64, dq_ss: Int64, scale: Float32, bounds: MaskBounds,
                 flags: Int32, stream: cuda.CUstream):
        mdsT = ds_workspace(cute.recast_ptr(pdQacc, dtype=self.dtype), batch, heads, seqlen_kv,
                            cute.assume(seqlen_q_pad, divby=128), self.keys_major)
        storage_cls = self._storage_cls()
        grid, flags = dq_gemm_block_order(cute.ceil_div(seqlen_q, QM * self.t.tiles), heads, batch, bounds, flags)
        self.kernel(mdsT, cutil.bhsd_tensor(pK, batch, heads_kv, seqlen_kv, head_dim, k_sb, k_sh, k_ss),
                    cutil.bhsd_tensor(pdQ, batch, heads, seqlen_q, head_dim, dq_sb, dq_sh, dq_ss),
                    cute.make_tensor(pSeqQ, cute.make_layout(batch)), cute.make_tensor(pSeqKV, cute.make_layout(batch)),
                    heads // heads_kv, scale, bounds, flags, storage_cls).launch(
            grid=grid, block=[self.t.threads, 1, 1],
            stream=stream, smem=launch_smem_bytes(self.arch, self.t.smem_bytes(self.D)))

    def _layouts(self):
        t = self.t
        return SimpleNamespace(K=cutil.smem_tile_layout(t.kn, self.D, t.stages),
                               dSt=cutil.smem_tile_layout(*self.ds_tile, t.tiles * t.stages))

    def _storage_cls(self):
        lay = self._layouts()
        return smem_storage(self.dtype, {"sK": cute.cosize(lay.K), "sdSt": cute.cosize(lay.dSt)})

    # ------------------------------------------------------------------------------------------------ the kernel
    @cute.kernel
    def kernel(self, mdsT: cute.Tensor, mK: cute.Tensor, mdQ: cute.Tensor, mSeqQ: cute.Tensor, mSeqKV: cute.Tensor,
               group: Int32, scale: Float32, bounds: MaskBounds, flags: Int32,
               storage_cls: cutlass.Constexpr):
        t = self.t
        tidx, _, _ = cute.arch.thread_idx()
        blk, head, batch = q_tile_of_block(cute.arch.block_idx(), cute.arch.grid_dim()[2], flags)
        seqlen_q = batch_length(mSeqQ, flags, FLAG_SEQ_Q, batch, mdQ.shape[2])
        seqlen_kv = batch_length(mSeqKV, flags, FLAG_SEQ_KV, batch, mK.shape[2])
        mask = make_mask(seqlen_q, seqlen_kv, bounds, flags)
        group_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx()) // t.tile_warps
        m_tile = blk * t.tiles + group_idx
        own_begin, own_end = mask.n_block_range(m_tile, self.main_kn, QM)  # the KV tiles that stored this tile's dS
        first, n_chunks = self._chunk_range(mask, blk)
        st = cutlass.memory.SmemAllocator().allocate(storage_cls)
        lay = self._layouts()
        s = SimpleNamespace(K=st.sK.get_tensor(lay.K), dSt=st.sdSt.get_tensor(lay.dSt))
        mm = self._operands(s, tidx, group_idx)
        ld = self._loaders(s, tidx, mK[batch, head // group, None, None], mdsT[batch, head, None, None], blk)
        out = self._output(mm, mdQ[batch, head, None, None], m_tile)  # (made outside the runtime branches)
        acc = cute.make_rmem_tensor(mm.thr.partition_shape_C((QM, self.D)), Float32)
        acc.fill(0.0)
        for i in cutlass.range_constexpr(t.stages - 1):  # the first chunks, one commit group each
            self._load_chunk(ld, first, n_chunks, i, i, seqlen_kv)
        # trips of t.stages steps, so that every step's stage is a constant (runtime stages cost address arithmetic)
        for trip in cutlass.range(0, n_chunks, t.stages):
            for j in cutlass.range_constexpr(t.stages):
                i = trip + j
                if i < n_chunks:
                    cute.arch.cp_async_wait_group(t.stages - 2)
                    cute.arch.sync_threads()  # chunk i landed; every warp is done with chunk i - 1 (refilled now)
                    self._load_chunk(ld, first, n_chunks, i + t.stages - 1, (j + t.stages - 1) % t.stages, seqlen_kv)
                    kv_tile = (first + i) // (self.main_kn // t.kn)
                    if (kv_tile >= own_begin) & (kv_tile < own_end):
                        cutil.gemm_ss(mm.mma, acc, mm.cA, mm.sdS[None, None, None, j], mm.rA, mm.rA_v, mm.cB,
                                   mm.sKt[None, None, None, j], mm.rB, mm.rB_v)
        # rows past the batch's length keep the preprocess's zeros (its _zero_unwritten_dq)
        cutil.store_acc(acc, out.g, out.coords, seqlen_q, mK.shape[3], scale)

    # ------------------------------------------------------------------------------------------------ helpers
    @cute.jit
    def _chunk_range(self, mask, blk):
        """(first chunk, chunk count): the KV tiles visiting any of the CTA's query tiles, in chunks (the visitors
        of a query tile are contiguous and both ends grow with the tile, mask.m_block_range)."""
        t = self.t
        begin, end = Int32(0), Int32(0)
        for j in cutlass.range_constexpr(t.tiles - 1, -1, -1):  # the first tile with visitors sets the start
            b, e = mask.n_block_range(blk * t.tiles + j, self.main_kn, QM)
            if b < e:
                begin = b
                if end == 0:
                    end = e
        per_tile = self.main_kn // t.kn
        return begin * per_tile, cutlass.max(end - begin, 0) * per_tile

    @cute.jit
    def _operands(self, s, tidx, group_idx):
        """The group's dQ MMA (its warps along the head dim) and its ldmatrix operands per stage: A = dS (the group's
        dS tile, or the transposed view of its dS^T tile), B = K^T."""
        t = self.t
        op = warp.MmaF16BF16Op(self.dtype, Float32, (16, 8, 16))
        mma = cute.make_tiled_mma(op, (1, t.tile_warps, 1), permutation_mnk=(16, t.tile_warps * self.col_step, 16))
        lane = tidx % (32 * t.tile_warps)
        ldsm_a = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=self.keys_major, num_matrices=4), self.dtype)
        ldsm_b = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=self.col_step // 4),
                                     self.dtype)
        thr = mma.get_slice(lane)
        cA = cute.make_tiled_copy_A(ldsm_a, mma).get_slice(lane)
        cB = cute.make_tiled_copy_B(ldsm_b, mma).get_slice(lane)
        # the group's (ds_tile, stages) block of the (ds_tile, tiles * stages) buffer (stage index j * stages + stage;
        # the block offset is a multiple of the swizzle's period, so the view swizzles alike); A = dS is (QM, kn)
        block = cute.assume(group_idx * (t.stages * t.kn * QM), divby=t.stages * t.kn * QM)
        own = cute.make_tensor(s.dSt.iterator + block, cutil.smem_tile_layout(*self.ds_tile, t.stages))
        sdS = cutil.transpose_view(own, t.kn, QM, t.stages) if self.keys_major else own
        sKt = cutil.transpose_view(s.K, t.kn, self.D, t.stages)
        rA = thr.make_fragment_A(thr.partition_A(sdS[None, None, 0]))
        rB = thr.make_fragment_B(thr.partition_B(sKt[None, None, 0]))
        return SimpleNamespace(mma=mma, thr=thr, cA=cA, cB=cB, rA=rA, rA_v=cA.retile(rA), rB=rB, rB_v=cB.retile(rB),
                               sdS=cA.partition_S(sdS), sKt=cB.partition_S(sKt))

    @cute.jit
    def _loaders(self, s, tidx, k_bh: cute.Tensor, ds_bh: cute.Tensor, blk):
        """Per-thread partitions of K and of the CTA's dS tiles over every chunk (a chunk mode), made once."""
        t = self.t
        copy_k = cutil.make_gmem_copy(self.dtype, self.k_threads, self.D)
        copy_ds = cutil.make_gmem_copy(self.dtype, self.ds_threads, self.ds_tile[1])
        thr_k, thr_ds = copy_k.get_slice(tidx % self.k_threads), copy_ds.get_slice(tidx % self.ds_threads)
        gK = cute.local_tile(k_bh, (t.kn, self.D), (None, 0))                               # (kn, D, chunks)
        cK = cute.local_tile(cute.make_identity_tensor(k_bh.shape), (t.kn, self.D), (None, 0))
        gdS = cute.local_tile(ds_bh, self.ds_tile, (None, None))      # (ds_tile, chunks, tiles) or (.., tiles, chunks)
        return SimpleNamespace(copy_k=copy_k, copy_ds=copy_ds, tidx=tidx, blk=blk, head_dim=k_bh.shape[1],
                               gK=thr_k.partition_S(gK), cK=thr_k.partition_S(cK), sK=thr_k.partition_D(s.K),
                               gdS=thr_ds.partition_S(gdS), sdSt=thr_ds.partition_D(s.dSt))

    @cute.jit
    def _load_chunk(self, ld, first, n_chunks, i, stage: cutlass.Constexpr, seqlen_kv):
        """Chunk ``i`` of the walk into ``stage``: K (zero-filled outside the batch's keys and the head dim) and the
        dS of every query tile of the CTA (where the chunk's KV tile did not visit a tile this loads workspace
        it never wrote, inside the region: that tile's group skips the MMA); one commit group, empty past the
        walk."""
        t = self.t
        if i < n_chunks:
            chunk = first + i
            cutil.load_tile_zfill_by(self.k_threads, t.threads, ld.tidx, ld.copy_k, ld.gK[None, None, None, chunk],
                                  ld.sK[None, None, None, stage], ld.cK[None, None, None, chunk], seqlen_kv,
                                  ld.head_dim)
            if ld.tidx < self.ds_threads:
                for j in cutlass.range_constexpr(t.tiles):
                    m_tile = ld.blk * t.tiles + j
                    src = ld.gdS[None, None, None, chunk, m_tile] if cutlass.const_expr(self.keys_major) \
                        else ld.gdS[None, None, None, m_tile, chunk]
                    cute.copy(ld.copy_ds, src, ld.sdSt[None, None, None, j * t.stages + stage])
        cute.arch.cp_async_commit_group()

    @cute.jit
    def _output(self, mm, dq_bh: cute.Tensor, m_tile):
        """This thread's part of the group's query tile of dQ, with coordinates."""
        return SimpleNamespace(
            g=mm.thr.partition_C(cute.local_tile(dq_bh, (QM, self.D), (m_tile, 0))),
            coords=mm.thr.partition_C(cute.local_tile(cute.make_identity_tensor(dq_bh.shape), (QM, self.D),
                                                      (m_tile, 0))))

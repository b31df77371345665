"""The main backward kernel with a 2-D warp grid per GEMM: P and dS go through shared memory, V lives in registers.

Why a second layout: in bwd_main every warp owns whole key rows of S^T, so every warp reads the whole Q and dO
tile from shared memory for four of the five GEMMs, and dK/dV of its rows cost 2 x 16 x D / 32 fp32 registers per
thread: at d192 that forces two passes of 4 warps. Here a CTA of 8 warps owns 64 keys and walks 32- or 64-row
query tiles, and each GEMM gets its own warp grid (tiles.TileConfig.sdp_warps / dkv_warps / dq_warps):

    S   = Q . K^T     (queries x keys; A = Q and B = K by ldmatrix)
    dP  = dO . V^T    (same grid; B = V, loaded into registers once for the whole walk)
    dS  = P o (dP - delta); P and dS go to shared memory in the io dtype, into V's buffer
    dV += P^T . dO    (keys x head dim; A = P^T by ldmatrix.trans)
    dK += dS^T . Q    (same grid)
    dQ  = dS . K      (queries x head dim), red.global.add into the fp32 accumulator

dK/dV cost an eighth of the 64 x D tile per warp (96 registers per thread at d192), which leaves room for V and a
single pass. At d256 both with V spill, so it walks twice like bwd_main's large tiles (pass 1: dV from S alone, P
in V's buffer; pass 2: V into registers, dK and dQ). Served at d192 and d256, where it is faster than the two-pass
rows kernel; at d128 the rows kernel is faster. Q and dO are double-buffered
(two CTA barriers per query tile) or, at d256, single-buffered (a third barrier, see _grid_step). The walk, loads,
mask, padding, GQA order, deterministic dQ order and the epilogue are bwd_main's (see there). Its served sets store dS
for a dQ GEMM of their own instead of the dQ GEMM and adds here (bwd_main_ds.BwdMainGridDsKernel, dq_gemm.py: 64-key
tiles make twice the fp32 adds per score of a 128-key tile); this kernel's own dQ path serves d256's narrow bands
and problems past the dS workspace's limit."""

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import Float32
from cutlass.cute.nvgpu import warp

from frost.kernels import cute_utils as cutil
from frost.kernels.backward.bwd_main import BwdMainKernel, scores_to_probs, smem_storage, softmax_grad


class BwdMainGridKernel(BwdMainKernel):
    def __init__(self, dtype, tile, arch, ordered: bool = False, varlen: bool = False):
        assert tile.warp_grid and tile.q_stages == tile.do_stages, tile
        super().__init__(dtype, tile, arch, ordered, varlen)

    # ------------------------------------------------------------------------------------------------ layouts
    def _smem_layouts(self):
        t, N, M, D = self.tile, self.N, self.M, self.D
        return SimpleNamespace(
            K=cutil.smem_tile_layout(N, D), V=cutil.smem_tile_layout(N, self.DV),
            Q=cutil.smem_tile_layout(M, D, t.q_stages), dO=cutil.smem_tile_layout(M, self.DV, t.do_stages),
            PdS=cutil.smem_tile_layout(M, N, 2))

    def _storage_cls(self, smem):
        # V until it is in registers, then P and dS ("sVP")
        return smem_storage(self.dtype, {"sK": cute.cosize(smem.K),
                                         "sVP": max(cute.cosize(smem.V), cute.cosize(smem.PdS)),
                                         "sQ": cute.cosize(smem.Q), "sdO": cute.cosize(smem.dO)},
                            self.M * self.tile.q_stages)

    @cute.jit
    def _smem_tensors(self, smem: cutlass.Constexpr, storage_cls: cutlass.Constexpr):
        M, N = self.M, self.N
        st = cutlass.memory.SmemAllocator().allocate(storage_cls)
        sPdS = st.sVP.get_tensor(smem.PdS)
        sPdSt = cutil.transpose_view(sPdS, M, N, 2)
        # LSE/delta broadcast along the keys of S: (M, N, stages) with stride 0 on the keys
        s = self._q_side_smem(st, smem, cute.make_layout((M, N, self.tile.q_stages), stride=(1, 0, M)))
        s.V, s.P, s.dS = st.sVP.get_tensor(smem.V), sPdS[None, None, 0], sPdS[None, None, 1]
        s.Pt, s.dSt = sPdSt[None, None, 0], sPdSt[None, None, 1]
        return s

    def _tiled_mmas(self):
        op = warp.MmaF16BF16Op(self.dtype, Float32, (16, 8, 16))

        def grid(wm, wn):
            return cute.make_tiled_mma(op, (wm, wn, 1), permutation_mnk=(wm * 16, wn * 16, 16))

        t = self.tile
        return SimpleNamespace(sdp=grid(*t.sdp_warps), dkv=grid(*t.dkv_warps), dq=grid(*t.dq_warps))

    @cute.jit
    def _mma_operands(self, mmas: cutlass.Constexpr, s, tidx):
        sdp, dkv, dq = mmas.sdp, mmas.dkv, mmas.dq
        ldsm = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=False, num_matrices=4), self.dtype)
        ldsm_t = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=4), self.dtype)
        thr_s, thr_kv, thr_dq = sdp.get_slice(tidx), dkv.get_slice(tidx), dq.get_slice(tidx)
        cA = cute.make_tiled_copy_A(ldsm, sdp).get_slice(tidx)      # Q, dO
        cB = cute.make_tiled_copy_B(ldsm, sdp).get_slice(tidx)      # K, V
        cAt = cute.make_tiled_copy_A(ldsm_t, dkv).get_slice(tidx)   # P^T, dS^T
        cBt = cute.make_tiled_copy_B(ldsm_t, dkv).get_slice(tidx)   # dO^T, Q^T
        cAq = cute.make_tiled_copy_A(ldsm, dq).get_slice(tidx)      # dS
        cBq = cute.make_tiled_copy_B(ldsm_t, dq).get_slice(tidx)    # K^T
        rQ = thr_s.make_fragment_A(thr_s.partition_A(s.Q[None, None, 0]))
        rdO = thr_s.make_fragment_A(thr_s.partition_A(s.dO[None, None, 0]))
        rK = thr_s.make_fragment_B(thr_s.partition_B(s.K))
        rV = thr_s.make_fragment_B(thr_s.partition_B(s.V))
        rPt = thr_kv.make_fragment_A(thr_kv.partition_A(s.Pt))
        rdSt = thr_kv.make_fragment_A(thr_kv.partition_A(s.dSt))
        rdOt = thr_kv.make_fragment_B(thr_kv.partition_B(s.dOt[None, None, 0]))
        rQt = thr_kv.make_fragment_B(thr_kv.partition_B(s.Qt[None, None, 0]))
        rdS = thr_dq.make_fragment_A(thr_dq.partition_A(s.dS))
        rKt = thr_dq.make_fragment_B(thr_dq.partition_B(cute.local_tile(s.Kt, (self.tile.dq_chunk, self.N), (0, 0))))
        ps_store = cute.make_tiled_copy_C(
            cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.dtype, num_bits_per_copy=32), sdp).get_slice(tidx)
        return SimpleNamespace(
            sdp=sdp, dkv=dkv, dq=dq, thr_s=thr_s, thr_acc=thr_kv, thr_dq=thr_dq, cA=cA, cB=cB, cAt=cAt, cBt=cBt,
            cAq=cAq, cBq=cBq,
            **cutil.ldsm_operands({"Q": (cA, rQ, s.Q), "dO": (cA, rdO, s.dO), "K": (cB, rK, s.K), "V": (cB, rV, s.V),
                                "Pt": (cAt, rPt, s.Pt), "dSt": (cAt, rdSt, s.dSt), "dOt": (cBt, rdOt, s.dOt),
                                "Qt": (cBt, rQt, s.Qt), "dS": (cAq, rdS, s.dS)}),
            rKt=rKt, rKt_v=cBq.retile(rKt), sKt=s.Kt,
            ps_store=ps_store, sP_dst=ps_store.partition_D(s.P), sdS_dst=ps_store.partition_D(s.dS),
            cS_mn=cutil.acc_mn_view(thr_s.partition_C(cute.make_identity_tensor((self.M, self.N)))),
            sLSE2=s.LSE2_b, sDelta=s.Delta_b)

    # ------------------------------------------------------------------------------------------------ the walk
    def _commit_groups(self, do_dk: bool) -> tuple[bool, bool]:
        """K/V apart (a pass with dK moves V into registers as soon as it lands); dO apart where it lags
        (_do_lags)."""
        return True, self._do_lags(do_dk)

    @cute.jit
    def _walk(self, ld, mm, mask, acc, walk, scale_log2, do_dv: cutlass.Constexpr, do_dk: cutlass.Constexpr):
        """The pass's steps (a dV-only pass needs no V: P alone uses V's buffer)."""
        if cutlass.const_expr(do_dk):
            cute.arch.cp_async_wait_group(1)  # K/V landed (the first Q and dO may not have)
            cute.arch.sync_threads()
            # V into registers for the pass; the first step's barrier keeps P/dS from overwriting it early
            cute.copy(mm.cB, mm.sV, mm.rV_v)
        if cutlass.const_expr(self.tile.q_stages == 2):
            # two steps per trip so that the buffer stage is a constant (a runtime stage costs ~7 registers
            # of swizzled addresses, and the kernel is at the register limit)
            for it in cutlass.range(0, walk.n_iter, 2):
                self._grid_step(ld, mm, mask, acc, walk, it, scale_log2, 0, do_dv, do_dk)
                if it + 1 < walk.n_iter:
                    self._grid_step(ld, mm, mask, acc, walk, it + 1, scale_log2, 1, do_dv, do_dk)
        else:
            for it in cutlass.range(0, walk.n_iter, 1):
                self._grid_step(ld, mm, mask, acc, walk, it, scale_log2, 0, do_dv, do_dk)

    @cute.jit
    def _grid_step(self, ld, mm, mask, acc, walk, it, scale_log2, stage: cutlass.Constexpr,
                   do_dv: cutlass.Constexpr, do_dk: cutlass.Constexpr):
        """Step ``it`` of the walk (its Q and dO in buffer ``stage``). Double-buffered tiles load the next Q and
        dO at the top. Single-buffered ones refill each operand after the first barrier past its last use: Q
        (only S reads it) after the P/dS barrier in a dV-only pass, dO (only dP) there in a dK + dQ pass, the
        other after one more barrier past the dV/dK GEMMs, overlapping dQ where there is one."""
        head, m_block = self._walk_pos(walk, it)
        nxt = self._walk_next(walk, head, m_block)  # once per step (derived at each load, d192 spills)
        next_pos = lambda: nxt  # noqa: E731
        double = self.tile.q_stages == 2
        q_early, do_early = not double and not do_dk, not double and not do_dv
        do_lags = self._do_lags(do_dk)
        cute.arch.cp_async_wait_group(1 if do_lags else 0)
        cute.arch.sync_threads()  # this tile landed; every warp is done with the last tile's P, dS and buffers
        stage_next = 1 - stage if double else 0
        self._load_next(ld, walk, it, next_pos, stage_next, stage_next, double, double, do_dk)

        accP = self._probs(mm, mask, m_block, walk.n_block, stage, scale_log2)
        rdS = self._grad_scores(mm, accP, stage) if do_dk else None
        if cutlass.const_expr(do_dv):
            cute.copy(mm.ps_store, mm.ps_store.retile(cutil.convert(accP, self.dtype)), mm.sP_dst)
        if cutlass.const_expr(do_dk):
            cute.copy(mm.ps_store, mm.ps_store.retile(rdS), mm.sdS_dst)
        if cutlass.const_expr(do_lags):
            cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()  # P and dS complete in shared memory (and a lagging dO landed)
        if cutlass.const_expr(do_dk):
            self._dq_release_prev(ld, walk, it, head, m_block)
        if cutlass.const_expr(q_early or do_early):
            self._load_next(ld, walk, it, next_pos, 0, 0, q_early, do_early, do_dk)
        if cutlass.const_expr(do_dv):
            cutil.gemm_ss(mm.dkv, acc.dV, mm.cAt, mm.sPt, mm.rPt, mm.rPt_v, mm.cBt, mm.sdOt[None, None, None, stage],
                       mm.rdOt, mm.rdOt_v)
        if cutlass.const_expr(do_dk):
            cutil.gemm_ss(mm.dkv, acc.dK, mm.cAt, mm.sdSt, mm.rdSt, mm.rdSt_v, mm.cBt,
                       mm.sQt[None, None, None, stage], mm.rQt, mm.rQt_v)
        if cutlass.const_expr(not double):
            cute.arch.sync_threads()  # every warp is done with this tile's Q and dO
            self._load_next(ld, walk, it, next_pos, 0, 0, not q_early, not do_early, do_dk)
        if cutlass.const_expr(do_dk):
            self._dq_step(mm, ld, mask, walk, it, head, m_block)

    def _do_lags(self, do_dk: bool) -> bool:
        """A single-buffered dV-only pass refills dO last, after dV, but first reads it in dV: dO gets its own
        commit group and is waited for only at the P barrier, so that it lands while S runs."""
        return self.tile.q_stages == 1 and not do_dk

    @cute.jit
    def _probs(self, mm, mask, m_block, n_block, stage, scale_log2):
        """P of this tile (query rows x keys) in fp32 registers; hidden entries exactly 0."""
        accS = cute.make_rmem_tensor(mm.thr_s.partition_shape_C((self.M, self.N)), Float32)
        accS.fill(0.0)
        cutil.gemm_ss(mm.sdp, accS, mm.cA, mm.sQ[None, None, None, stage], mm.rQ, mm.rQ_v, mm.cB, mm.sK, mm.rK,
                   mm.rK_v)
        p_mn = cutil.acc_mn_view(accS)
        scores_to_probs(p_mn, cutil.acc_mn_view(mm.thr_s.partition_C(mm.sLSE2[None, None, stage])), scale_log2)
        if mask.tile_needs_mask(m_block, n_block, self.M, self.N):
            mask.zero_hidden(p_mn, mm.cS_mn, m_block, n_block, self.M, self.N, keys_on_rows=False,
                             by_difference=self.tile.diff_mask)
        return accS

    @cute.jit
    def _grad_scores(self, mm, accP, stage):
        """dS = P o (dP - delta) in the io dtype (MMA accumulator layout); dP = dO . V^T with V in registers."""
        accdP = cute.make_rmem_tensor(mm.thr_s.partition_shape_C((self.M, self.N)), Float32)
        accdP.fill(0.0)
        cutil.gemm_sr(mm.sdp, accdP, mm.cA, mm.sdO[None, None, None, stage], mm.rdO, mm.rdO_v, mm.rV)
        softmax_grad(cutil.acc_mn_view(accP), cutil.acc_mn_view(accdP),
                     cutil.acc_mn_view(mm.thr_s.partition_C(mm.sDelta[None, None, stage])))
        return cutil.convert(accdP, self.dtype)

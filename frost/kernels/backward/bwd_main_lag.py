"""The rows kernel with dQ one step behind: one CTA barrier per query tile instead of two.

bwd_main's step has two CTA barriers: the top one (this step's Q and dO landed, every warp done with the step
before) and a mid-step one (dS^T complete before the dQ GEMM reads it, and every warp done with a single-buffered
operand before its refill). Here the dQ GEMM of step i runs at the end of step i + 1, from the other of two dS^T
buffers, so the top barrier of step i + 1 is all it needs, and with dO double-buffered too nothing is refilled
mid-step. The room comes from V: each warp holds its V rows (dP^T's A operand) in registers for the walk, and
V's shared memory then holds dO's two stages and the two dS^T buffers (at d128: 2 x 8 KB + 2 x 8 KB in V's
32 KB). K stays in shared memory (S^T's A operand and dQ's B operand). The first dO lands after V has moved to
registers (one more barrier per walk). dK and dV are bitwise equal to bwd_main's.

The ordered set (deterministic mode, narrow bands) takes the same step at d80: the lagged adds of step i follow
its semaphores' order like bwd_main's (dQ is bitwise equal to bwd_main's ordered set), and step i's release is
issued after the top barrier of trip i + 2 (where every warp's adds of step i are behind the barrier), before that
trip's own wait, so no CTA waits while it holds a release. TileConfig.release_late (the release after trip
i + 2's GEMMs) is bwd_main_pipe's: on this barrier step it is slower.

The trip's synchronisation points are hooks (_trip_sync, _before_loads, ...): one CTA barrier here, per-stage
mbarriers in bwd_main_pipe. Everything else (walk order, masks, padding, loads, the epilogue) is bwd_main's."""

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute

from frost.kernels import cute_utils as cutil
from frost.kernels.backward.bwd_main import BwdMainKernel, smem_storage
from frost.kernels.backward.ordering import dq_order_release


class BwdMainLagKernel(BwdMainKernel):
    def __init__(self, dtype, tile, arch, ordered: bool = False, varlen: bool = False):
        assert tile.dq_lag, tile
        super().__init__(dtype, tile, arch, ordered, varlen)
        self.v_in_regs = True
        self.mbarriers = 0  # (bwd_main_pipe: its per-stage mbarriers)

    # ------------------------------------------------------------------------------------------------ layouts
    def _smem_layouts(self):
        N, M, D, S = self.N, self.M, self.D, self.tile.q_stages
        return SimpleNamespace(K=cutil.smem_tile_layout(N, D), V=cutil.smem_tile_layout(N, D),
                               Q=cutil.smem_tile_layout(M, D, S), dO=cutil.smem_tile_layout(M, D, S),
                               dSt=cutil.smem_tile_layout(N, M, 2))

    def _storage_cls(self, smem):
        # V until it is in registers, then dO's stages and the dS^T buffers ("sVX")
        vx = max(cute.cosize(smem.V), cute.cosize(smem.dO) + cute.cosize(smem.dSt))
        return smem_storage(self.dtype, {"sK": cute.cosize(smem.K), "sVX": vx, "sQ": cute.cosize(smem.Q)},
                            self.M * self.tile.q_stages, self.mbarriers)

    @cute.jit
    def _smem_tensors(self, smem: cutlass.Constexpr, storage_cls: cutlass.Constexpr):
        N, M = self.N, self.M
        st = cutlass.memory.SmemAllocator().allocate(storage_cls)
        sdO = st.sVX.get_tensor(smem.dO)
        sdSt = cute.make_tensor(sdO.iterator + cute.cosize(smem.dO), smem.dSt)  # (1024-byte aligned: 16 KB in)
        s = self._q_side_smem(st, smem, cute.make_layout((N, M, self.tile.q_stages), stride=(0, 1, M)), sdO=sdO)
        s.V, s.dSt, s.dS = st.sVX.get_tensor(smem.V), sdSt, cutil.transpose_view(sdSt, N, M, 2)
        if cutlass.const_expr(self.mbarriers):
            s.mbar = st.mbar.data_ptr()
        return s

    @cute.jit
    def _ordered_at_run_time(self, flags):
        """(the atomic set never orders: the ordered set is compiled as such)"""
        return False

    # ------------------------------------------------------------------------------------------------ the walk
    @cute.jit
    def _load_pass(self, ld, mask, walk, first: cutlass.Constexpr, do_dk: cutlass.Constexpr):
        """K, V and the first Q; the first dO waits for V's buffer (_walk)."""
        cutil.load_tile_zfill(ld.copy, ld.tKgK, ld.tKsK, ld.tKcK, mask.seqlen_kv, ld.head_dim, self.tile.async_zfill)
        cutil.load_tile_zfill(ld.copy_v, ld.tVgV, ld.tVsV, ld.tVcV, mask.seqlen_kv, ld.head_dim_v, self.tile.async_zfill)
        if walk.n_iter > 0:
            self._load_q(ld, walk.head0, walk.m_first, 0, True)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def _walk(self, ld, mm, mask, acc, walk, scale_log2, do_dv: cutlass.Constexpr, do_dk: cutlass.Constexpr):
        """V into registers, the first dO into V's buffer, then the steps and one more trip for the last step's
        dQ."""
        self._init_sync(walk)
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()
        cute.copy(mm.cA, mm.sV, mm.rV_v)
        cute.arch.sync_threads()  # every warp holds its V rows: the buffer takes dO and dS^T from here on
        if walk.n_iter > 0:
            self._load_do(ld, walk.head0, walk.m_first, 0)
        cute.arch.cp_async_commit_group()
        self._after_loads(walk, 0)
        for j in cutlass.range_constexpr(1, self.tile.q_stages - 1):  # the steps loaded ahead of the first trip
            self._load_next(ld, walk, j - 1, lambda: self._walk_pos(walk, j), j, j, True, True, True)
            self._after_loads(walk, j)
        for it in cutlass.range(0, walk.n_iter + 1, 1):  # (the last trip only adds the last step's dQ)
            self._lag_step(ld, mm, mask, acc, walk, it, scale_log2)

    @cute.jit
    def _lag_step(self, ld, mm, mask, acc, walk, it, scale_log2):
        """Step ``it``, then the previous step's dQ."""
        self._trip_sync(walk, it)
        if cutlass.const_expr(self.ordered and not self.tile.release_late):
            self._release_done(ld, walk, it)
        if it < walk.n_iter:
            self._lag_gemms(ld, mm, mask, acc, walk, it, scale_log2)
        if cutlass.const_expr(self.ordered and self.tile.release_late):
            self._release_done(ld, walk, it)
        if it > 0:  # the step before's dQ, after this step's GEMMs
            head_prev, m_prev = self._walk_pos(walk, it - 1)
            self._before_ds_reads(walk, it - 1)
            self._dq_step(mm, ld, mask, walk, it - 1, head_prev, m_prev, mm.sdS[None, None, None, 1 - it % 2])
            self._after_dq_adds(walk, it - 1)

    @cute.jit
    def _release_done(self, ld, walk, it):
        """Ordered dQ: release step it - 2's query tile, whose adds every warp issued in trip it - 1 (behind the
        trip's barrier here; bwd_main_pipe waits for them on an mbarrier first)."""
        if it >= 2:
            head_done, m_done = self._walk_pos(walk, it - 2)
            self._before_release(walk, it - 2)
            dq_order_release(*self._dq_semaphore(ld, head_done, m_done), True, self._release_warp(it - 2))

    def _release_warp(self, step):
        """The warp whose lane releases step ``step``'s tile (TileConfig.release_rotate: each warp in turn)."""
        return step % self.tile.num_warps if self.tile.release_rotate else 0

    @cute.jit
    def _lag_gemms(self, ld, mm, mask, acc, walk, it, scale_log2):
        """Step ``it`` up to its dS^T: the loads of the step q_stages - 1 ahead, S^T, P^T, dP^T, dV, dS^T, dK."""
        S = self.tile.q_stages
        stage, ahead = it % S, it + S - 1
        _, m_block = self._walk_pos(walk, it)
        ahead_pos = lambda: self._walk_pos(walk, ahead)  # noqa: E731
        self._before_loads(walk, ahead)
        self._load_next(ld, walk, ahead - 1, ahead_pos, ahead % S, ahead % S, True, True, True)
        self._after_loads(walk, ahead)
        if cutlass.const_expr(self.tile.atom_skip):  # one atom per warp: a warp no row sees runs no GEMM
            if self._live_atoms(mask, walk.n_block, m_block)[0]:
                self._lag_until_dk(mm, mask, acc, walk, it, m_block, stage, scale_log2)
            else:
                self._lag_until_dk(mm, mask, acc, walk, it, m_block, stage, scale_log2, ())
        else:
            self._lag_until_dk(mm, mask, acc, walk, it, m_block, stage, scale_log2)
        self._after_step_reads(walk, it)

    def _lag_until_dk(self, mm, mask, acc, walk, it, m_block, stage, scale_log2, atoms=None):
        """S^T, P^T, dP^T, dV, dS^T (into its buffer) and dK of step ``it`` (traced inline; ``atoms``: see
        BwdMainKernel._step_gemms; () for none)."""
        accP, accdP = self._score_gemms(mm, stage, stage, True, atoms)
        self._probabilities(mm, mask, accP, m_block, walk.n_block, self._row_vec_part(mm, mm.sLSE2, stage),
                            scale_log2, atoms)
        rP = cutil.convert(accP, self.dtype)
        cutil.gemm_rs(mm.kv, acc.dV, cutil.acc_as_a_operand(rP), mm.cBt, mm.sdOt[None, None, None, stage], mm.rdOt,
                   mm.rdOt_v, atoms)
        rdS = self._softmax_grad(accP, accdP, self._row_vec_part(mm, mm.sDelta, stage), atoms)
        self._before_ds_store(walk, it)
        cute.copy(mm.dS_store, mm.dS_store.retile(rdS), mm.sdSt_dst[None, None, None, it % 2])
        self._after_ds_store(walk, it)
        self._dk_gemm(mm, acc, rdS, stage, atoms)

    # synchronisation points of a trip (here: one CTA barrier at its top; bwd_main_pipe: mbarriers)
    @cute.jit
    def _trip_sync(self, walk, it):
        cute.arch.cp_async_wait_group(self.tile.q_stages - 2)
        cute.arch.sync_threads()  # this step's Q and dO landed; every warp is done with the step before

    def _init_sync(self, walk):
        """(no mbarriers to set up)"""

    def _covered_by_the_barrier(self, walk, i):
        """A synchronisation point the trip's top barrier already covers (bwd_main_pipe: an mbarrier's wait or
        arrival)."""

    _before_loads = _after_loads = _before_ds_store = _after_ds_store = _covered_by_the_barrier
    _after_step_reads = _before_ds_reads = _before_release = _after_dq_adds = _covered_by_the_barrier

"""The rows kernel with dQ one step behind: one CTA barrier per query tile instead of two.

bwd_main's step has two CTA barriers: the top one (this step's Q and dO landed, every warp done with the step
before) and a mid-step one (dS^T complete before the dQ GEMM reads it, and every warp done with a single-buffered
operand before its refill). Here the dQ GEMM of step i runs at the end of step i + 1, from the other of two dS^T
buffers, so the top barrier of step i + 1 is all it needs, and with dO double-buffered too nothing is refilled
mid-step. The room comes from V: each warp holds its V rows (dP^T's A operand) in registers for the walk, and
V's shared memory then holds dO's two stages and the two dS^T buffers (at d128: 2 x 8 KB + 2 x 8 KB in V's
32 KB). K stays in shared memory (S^T's A operand and dQ's B operand). The first dO lands after V has moved to
registers (one more barrier per walk). On the H200 (B4 H16 S4096 bf16, same process, sixteenth session) the
backward is 4 % faster than on bwd_main's step at d128, 8-9 % at d96 and 10 % at d80, with bitwise-equal dK and dV.

Atomic dQ only: the ordered set (deterministic mode, narrow bands) keeps bwd_main's step (tiles.tile_for_order
drops the flag there); an ordered lagged step is on a branch, not yet run on a GPU (docs/performance.md).
Everything else (walk order, masks, padding, loads, the epilogue) is bwd_main's."""

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute

from frost.kernels import cute_utils as cu
from frost.kernels.bwd_main import BwdMainKernel, smem_storage


class BwdMainLagKernel(BwdMainKernel):
    def __init__(self, dtype, tile, arch, ordered: bool = False):
        assert tile.dq_lag and not ordered, (tile, ordered)
        super().__init__(dtype, tile, arch, ordered)
        self.v_in_regs = True

    # ------------------------------------------------------------------------------------------------ layouts
    def _smem_layouts(self):
        N, M, D = self.N, self.M, self.D
        return SimpleNamespace(K=cu.smem_tile_layout(N, D), V=cu.smem_tile_layout(N, D),
                               Q=cu.smem_tile_layout(M, D, 2), dO=cu.smem_tile_layout(M, D, 2),
                               dSt=cu.smem_tile_layout(N, M, 2))

    def _storage_cls(self, smem):
        # V until it is in registers, then dO's stages and the dS^T buffers ("sVX")
        vx = max(cute.cosize(smem.V), cute.cosize(smem.dO) + cute.cosize(smem.dSt))
        return smem_storage(self.dtype, {"sK": cute.cosize(smem.K), "sVX": vx, "sQ": cute.cosize(smem.Q)},
                            self.M * 2)

    @cute.jit
    def _smem_tensors(self, smem: cutlass.Constexpr, storage_cls: cutlass.Constexpr):
        N, M = self.N, self.M
        st = cutlass.memory.SmemAllocator().allocate(storage_cls)
        sdO = st.sVX.get_tensor(smem.dO)
        sdSt = cute.make_tensor(sdO.iterator + cute.cosize(smem.dO), smem.dSt)  # (1024-byte aligned: 16 KB in)
        s = self._q_side_smem(st, smem, cute.make_layout((N, M, 2), stride=(0, 1, M)), sdO=sdO)
        s.V, s.dSt, s.dS = st.sVX.get_tensor(smem.V), sdSt, cu.transpose_view(sdSt, N, M, 2)
        return s

    @cute.jit
    def _ordered_at_run_time(self, flags):
        return False

    # ------------------------------------------------------------------------------------------------ the walk
    @cute.jit
    def _load_pass(self, ld, mask, walk, first: cutlass.Constexpr, do_dk: cutlass.Constexpr):
        """K, V and the first Q; the first dO waits for V's buffer (_walk)."""
        cu.load_tile_zfill(ld.copy, ld.tKgK, ld.tKsK, ld.tKcK, mask.seqlen_kv, ld.head_dim)
        cu.load_tile_zfill(ld.copy_v, ld.tVgV, ld.tVsV, ld.tVcV, mask.seqlen_kv, ld.head_dim_v)
        if walk.n_iter > 0:
            self._load_q(ld, walk.head0, walk.m_first, 0, True)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def _walk(self, ld, mm, mask, acc, walk, scale_log2, do_dv: cutlass.Constexpr, do_dk: cutlass.Constexpr):
        """V into registers, the first dO into V's buffer, then the steps and one more trip for the last step's
        dQ."""
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()
        cute.copy(mm.cA, mm.sV, mm.rV_v)
        cute.arch.sync_threads()  # every warp holds its V rows: the buffer takes dO and dS^T from here on
        if walk.n_iter > 0:
            self._load_do(ld, walk.head0, walk.m_first, 0)
        cute.arch.cp_async_commit_group()
        for it in cutlass.range(0, walk.n_iter + 1, 1):  # (the last trip only adds the last step's dQ)
            self._lag_step(ld, mm, mask, acc, walk, it, scale_log2)

    @cute.jit
    def _lag_step(self, ld, mm, mask, acc, walk, it, scale_log2):
        """Step ``it``, then the previous step's dQ."""
        stage = it % 2
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()  # this step's Q and dO landed; every warp is done with the step before
        if it < walk.n_iter:
            self._lag_gemms(ld, mm, mask, acc, walk, it, scale_log2, stage)
        if it > 0:  # (after the step's GEMMs: issued before them, right after the barrier, it measured 3-7 % slower)
            head_prev, m_prev = self._walk_pos(walk, it - 1)
            self._dq_lagged(mm, ld, head_prev, m_prev, 1 - stage)

    @cute.jit
    def _lag_gemms(self, ld, mm, mask, acc, walk, it, scale_log2, stage):
        """Step ``it`` up to its dS^T: the next step's loads, S^T, P^T, dP^T, dV, dS^T, dK."""
        _, m_block = self._walk_pos(walk, it)
        next_pos = lambda: self._walk_pos(walk, it + 1)  # noqa: E731
        self._load_next(ld, walk, it, next_pos, 1 - stage, 1 - stage, True, True, True)
        accP, accdP = self._score_gemms(mm, stage, stage, True)
        self._probabilities(mm, mask, accP, m_block, walk.n_block, stage, scale_log2)
        rP = cu.convert(accP, self.dtype)
        cu.gemm_rs(mm.kv, acc.dV, cu.acc_as_a_operand(rP), mm.cBt, mm.sdOt[None, None, None, stage], mm.rdOt,
                   mm.rdOt_v)
        rdS = self._softmax_grad(mm, accP, accdP, stage)
        cute.copy(mm.dS_store, mm.dS_store.retile(rdS), mm.sdSt_dst[None, None, None, stage])
        self._dk_gemm(mm, acc, rdS, stage)

    @cute.jit
    def _dq_lagged(self, mm, ld, head, m_block, stage):
        """dQ[tile] += dS . K from dS^T buffer ``stage``, red.global.add into the fp32 accumulator."""
        chunk = self.tile.dq_chunk
        gdQacc = self._dq_acc_tile(ld, head, m_block)
        for c in cutlass.range_constexpr(self.D // chunk):
            accdQ = self._dq_chunk_gemm(mm, mm.sdS[None, None, None, stage], c)
            cu.red_add_acc(mm.thr_dq.partition_C(cute.local_tile(gdQacc, (self.M, chunk), (0, c))), accdQ)

    @cute.jit
    def _dq_release_last(self, ld, walk):
        """(atomic dQ: nothing to release)"""

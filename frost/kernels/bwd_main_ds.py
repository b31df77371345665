"""bwd_main_pipe with dQ left to a GEMM of its own (dq_gemm): each step stores its dS^T instead of adding dQ.

Where the pipe runs its lagged dQ GEMM (the end of the next trip, once the step's dS^T buffer is complete), this
kernel copies that buffer (N keys x M queries, io dtype, exactly what the dQ GEMM would have read) into the
workspace (dq_gemm.ds_workspace) at (batch, head, KV tile, query tile): 16-byte shared loads and global stores,
two per thread at d96/d128, in place of the GEMM's ldmatrix, MMAs and fp32 adds. The buffer is released to the
store two steps later (the pipe's dS-empty mbarrier) after the global stores, which consume the loaded registers.
Nothing else changes: the walk, loads, masks and dK/dV are bwd_main_pipe's, so dK and dV are bitwise equal to its
atomic set's. Compiled for the dq_gemm sets only (KernelKey.dq_gemm: deterministic mode at d96/d128)."""

import cutlass
import cutlass.cute as cute

from frost.kernels import cute_utils as cu
from frost.kernels.bwd_main_pipe import BwdMainPipeKernel
from frost.kernels.dq_gemm import MAIN_KN, QM, ds_workspace


class BwdMainDsKernel(BwdMainPipeKernel):
    def __init__(self, dtype, tile, arch, ordered: bool = False):
        assert not ordered and tile.dq_lag_mbar and (tile.n_block, tile.m_block) == (MAIN_KN, QM), tile
        super().__init__(dtype, tile, arch, ordered)

    @cute.jit
    def _setup(self, a, s, tidx):
        mask, g, ld, walk = BwdMainPipeKernel._setup(self, a, s, tidx)  # (not super(): see there)
        ld.dsT = ds_workspace(cute.recast_ptr(a.dQacc.iterator, dtype=self.dtype), a.Q.shape[0], a.Q.shape[1],
                              a.K.shape[2], a.dQacc.shape[2])
        return mask, g, ld, walk

    @cute.jit
    def _mma_operands(self, mmas: cutlass.Constexpr, s, tidx):
        mm = BwdMainPipeKernel._mma_operands(self, mmas, s, tidx)
        mm.ds_copy = cu.make_gmem_copy(self.dtype, self.num_threads, self.M, async_copy=False)
        mm.ds_thr = mm.ds_copy.get_slice(tidx)
        mm.ds_src = mm.ds_thr.partition_S(s.dSt)
        return mm

    @cute.jit
    def _dq_step(self, mm, ld, mask, walk, it, head, m_block, sdS=None):
        """Step ``it``'s dS^T (complete in buffer it % 2) into the workspace; then the buffer is free."""
        dst = mm.ds_thr.partition_D(cute.local_tile(ld.dsT[ld.batch, head, None, None], (self.N, self.M),
                                                    (walk.n_block, m_block)))
        src = mm.ds_src[None, None, None, it % 2]
        frag = cute.make_fragment_like(src)
        cute.copy(mm.ds_copy, src, frag)
        cute.copy(mm.ds_copy, frag, dst)
        self._after_ds_reads(walk, it)

"""The main kernels of the dq_gemm sets (KernelKey.dq_gemm): each step stores its dS tile instead of adding dQ,
which dq_gemm.DqGemmKernel then computes. BwdMainDsKernel (bwd_main_pipe, d96/d128) and BwdMainGridDsKernel
(bwd_main_grid, d192/d256).

Where the pipe runs its lagged dQ GEMM (the end of the next trip, once the step's dS^T buffer is complete), this
kernel copies that buffer (N keys x M queries, io dtype, exactly what the dQ GEMM would have read) into the
workspace (dq_gemm.ds_workspace) at (batch, head, KV tile, query tile): 16-byte shared loads and global stores,
two per thread at d96/d128, in place of the GEMM's ldmatrix, MMAs and fp32 adds. The buffer is released to the
store two steps later (the pipe's dS-empty mbarrier) after the global stores, which consume the loaded registers.
Nothing else changes: the walk, loads, masks and dK/dV are bwd_main_pipe's, so dK and dV are bitwise equal to its
atomic set's."""

import cutlass
import cutlass.cute as cute

from frost.kernels import cute_utils as cu
from frost.kernels.bwd_main_grid import BwdMainGridKernel
from frost.kernels.bwd_main_pipe import BwdMainPipeKernel
from frost.kernels.dq_gemm import MAIN_KN, QM, ds_workspace


def _workspace(kernel, a, keys_major: bool):
    """The dS workspace over the dq_accum region (dq_gemm.ds_workspace), from the kernel's arguments."""
    return ds_workspace(cute.recast_ptr(a.dQacc.iterator, dtype=kernel.dtype), a.Q.shape[0], a.Q.shape[1],
                        a.K.shape[2], a.dQacc.shape[2], keys_major)


def _with_store(mm, kernel, tile: cute.Tensor, cols: int, tidx):
    """mm plus the copy that stores a shared-memory dS ``tile`` (cols contiguous) into the workspace."""
    mm.ds_copy = cu.make_gmem_copy(kernel.dtype, kernel.num_threads, cols, async_copy=False)
    mm.ds_thr = mm.ds_copy.get_slice(tidx)
    mm.ds_src = mm.ds_thr.partition_S(tile)
    return mm


@cute.jit
def _store_ds(mm, src: cute.Tensor, dst_tile: cute.Tensor):
    """This thread's part of a dS tile, shared memory -> registers -> the workspace tile, 16 bytes per access."""
    frag = cute.make_fragment_like(src)
    cute.copy(mm.ds_copy, src, frag)
    cute.copy(mm.ds_copy, frag, mm.ds_thr.partition_D(dst_tile))


class _StoresDs:
    """The setup both main kernels of the dq_gemm sets share: the workspace view and the store's copy. ``_BASE`` is
    the kernel class they extend (named, not super(): inside a jit function super() resolves against the
    instance's own class), ``_KEYS_MAJOR`` the workspace's layout, ``_ds_tile(s)`` the shared-memory dS tile (with
    its contiguous columns) that the store reads."""

    _BASE = None
    _KEYS_MAJOR = True

    @cute.jit
    def _setup(self, a, s, tidx):
        mask, g, ld, walk = self._BASE._setup(self, a, s, tidx)
        ld.ds = _workspace(self, a, self._KEYS_MAJOR)
        return mask, g, ld, walk

    @cute.jit
    def _mma_operands(self, mmas: cutlass.Constexpr, s, tidx):
        return _with_store(self._BASE._mma_operands(self, mmas, s, tidx), self, *self._ds_tile(s), tidx)


class BwdMainDsKernel(_StoresDs, BwdMainPipeKernel):
    """bwd_main_pipe storing dS^T (key-major workspace)."""

    _BASE = BwdMainPipeKernel
    _KEYS_MAJOR = True

    def __init__(self, dtype, tile, arch, ordered: bool = False):
        assert not ordered and tile.dq_lag_mbar and (tile.n_block, tile.m_block) == (MAIN_KN, QM), tile
        BwdMainPipeKernel.__init__(self, dtype, tile, arch, ordered)

    def _ds_tile(self, s):
        return s.dSt, self.M   # (N keys, M queries, 2 buffers)

    @cute.jit
    def _dq_step(self, mm, ld, mask, walk, it, head, m_block, sdS=None):
        """Step ``it``'s dS^T (complete in buffer it % 2) into the workspace; then the buffer is free."""
        _store_ds(mm, mm.ds_src[None, None, None, it % 2],
                  cute.local_tile(ld.ds[ld.batch, head, None, None], (self.N, self.M), (walk.n_block, m_block)))
        self._after_ds_reads(walk, it)


class BwdMainGridDsKernel(_StoresDs, BwdMainGridKernel):
    """bwd_main_grid with dQ left to the dq_gemm kernel: each step stores its dS tile (M queries x N keys, complete
    in shared memory after the P/dS barrier, read by nothing else there) into the workspace (query-major,
    dq_gemm.ds_workspace) in place of the dQ GEMM and its fp32 adds."""

    _BASE = BwdMainGridKernel
    _KEYS_MAJOR = False

    def __init__(self, dtype, tile, arch, ordered: bool = False):
        assert not ordered and tile.m_block == QM and MAIN_KN % tile.n_block == 0, tile
        BwdMainGridKernel.__init__(self, dtype, tile, arch, ordered)

    def _ds_tile(self, s):
        return s.dS, self.N    # (M queries, N keys)

    @cute.jit
    def _dq_step(self, mm, ld, mask, walk, it, head, m_block, sdS=None):
        """Step ``it``'s dS into the workspace (the next step's top barrier keeps it until every thread read it)."""
        _store_ds(mm, mm.ds_src,
                  cute.local_tile(ld.ds[ld.batch, head, None, None], (self.M, self.N), (m_block, walk.n_block)))

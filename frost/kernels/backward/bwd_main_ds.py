"""The main kernels of the dq_gemm sets (KernelKey.dq_gemm): each step stores its dS tile instead of adding dQ,
which dq_gemm.DqGemmKernel then computes. BwdMainDsKernel (bwd_main_pipe, d96/d128), BwdMainRowsDsKernel
(bwd_main's two-barrier step, d160) and BwdMainGridDsKernel (bwd_main_grid, d192/d256).

Where the kernel ran its dQ GEMM (the pipe: at the end of the next trip, once the step's dS^T buffer is complete;
the others: after the step's mid barrier), it copies the shared-memory dS tile (exactly what the dQ GEMM would have
read, io dtype) into the workspace (dq_gemm.ds_workspace) at (batch, head, KV tile, query tile): 16-byte shared
loads and global stores in place of the GEMM's ldmatrix, MMAs and fp32 adds. The pipe releases its buffer to the
store two steps later (its dS-empty mbarrier) after the global stores, which consume the loaded registers; in the
others the next step's top barrier keeps the tile until every thread read it. Nothing else changes: the walk,
loads, masks and dK/dV are the base kernel's, so dK and dV are bitwise equal to its atomic set's."""

import cutlass
import cutlass.cute as cute

from frost.kernels import cute_utils as cutil
from frost.kernels.backward.bwd_main import BwdMainKernel
from frost.kernels.backward.bwd_main_grid import BwdMainGridKernel
from frost.kernels.backward.bwd_main_pipe import BwdMainPipeKernel
from frost.kernels.backward.dq_gemm import MAIN_KN, QM, ds_workspace
from frost.kernels.backward.ordering import kv_tile_of_block


def _workspace(kernel, a, keys_major: bool):
    """The dS workspace over the dq_accum region (dq_gemm.ds_workspace), from the kernel's arguments."""
    return ds_workspace(cute.recast_ptr(a.dQacc.iterator, dtype=kernel.dtype), a.Q.shape[0], a.Q.shape[1],
                        a.K.shape[2], a.dQacc.shape[2], keys_major)


def _with_store(mm, kernel, tile: cute.Tensor, cols: int, tidx):
    """mm plus the copy that stores a shared-memory dS ``tile`` (cols contiguous) into the workspace."""
    mm.ds_copy = cutil.make_gmem_copy(kernel.dtype, kernel.num_threads, cols, async_copy=False)
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
    """What the main kernels of the dq_gemm sets share: the workspace view, the store's copy and the step. ``_BASE`` is
    the kernel class they extend (named, not super(): inside a jit function super() resolves against the
    instance's own class), ``_KEYS_MAJOR`` the workspace's layout, ``_ds_tile(s)`` the shared-memory dS tile (with
    its contiguous columns) that the store reads, ``_DS_BUFFERS`` its buffers (the pipe's two)."""

    _BASE = None
    _KEYS_MAJOR = True
    _DS_BUFFERS = 1

    @cute.jit
    def _setup(self, a, s, tidx):
        mask, g, ld, walk = self._BASE._setup(self, a, s, tidx)
        ld.ds = _workspace(self, a, self._KEYS_MAJOR)
        return mask, g, ld, walk

    @cute.jit
    def _mma_operands(self, mmas: cutlass.Constexpr, s, tidx):
        return _with_store(self._BASE._mma_operands(self, mmas, s, tidx), self, *self._ds_tile(s), tidx)

    @cute.jit
    def _dq_step(self, mm, ld, mask, walk, it, head, m_block, sdS=None):
        """Step ``it``'s dS tile (complete in shared memory; the pipe's buffer it % 2) into the workspace at (KV
        tile, query tile); then the pipe's buffer is free (_after_ds_reads, a no-op elsewhere)."""
        ws = ld.ds[ld.batch, head, None, None]
        src = mm.ds_src
        if cutlass.const_expr(self._DS_BUFFERS > 1):
            src = mm.ds_src[None, None, None, it % self._DS_BUFFERS]
        if cutlass.const_expr(self._KEYS_MAJOR):
            dst = cute.local_tile(ws, (self.N, self.M), (walk.n_block, m_block))
        else:
            dst = cute.local_tile(ws, (self.M, self.N), (m_block, walk.n_block))
        _store_ds(mm, src, dst)
        self._after_ds_reads(walk, it)


class BwdMainDsKernel(_StoresDs, BwdMainPipeKernel):
    """bwd_main_pipe storing dS^T (key-major workspace)."""

    _BASE = BwdMainPipeKernel
    _KEYS_MAJOR = True
    _DS_BUFFERS = 2

    def __init__(self, dtype, tile, arch, ordered: bool = False, varlen: bool = False):
        assert not (ordered or varlen) and tile.dq_lag_mbar and (tile.n_block, tile.m_block) == (MAIN_KN, QM), tile
        BwdMainPipeKernel.__init__(self, dtype, tile, arch, ordered)

    def _ds_tile(self, s):
        return s.dSt, self.M   # (N keys, M queries, 2 buffers)


class BwdMainRowsDsKernel(_StoresDs, BwdMainKernel):
    """bwd_main's two-barrier step storing dS^T (key-major workspace; d160: 64-key tiles, whose dQ adds in
    32-column chunks are twice as many per score as a 128-key tile's). Two-pass tiles store in the dK pass (no
    served set has one)."""

    _BASE = BwdMainKernel
    _KEYS_MAJOR = True

    def __init__(self, dtype, tile, arch, ordered: bool = False, varlen: bool = False):
        assert not (ordered or varlen or tile.dq_lag or tile.warp_grid) and tile.m_block == QM, tile
        assert MAIN_KN % tile.n_block == 0, tile
        BwdMainKernel.__init__(self, dtype, tile, arch, ordered)

    def _ds_tile(self, s):
        return s.dSt, self.M   # (N keys, M queries)

    def _dq_release_last(self, ld, walk):
        """Nothing: a dq_gemm set never orders dQ (the Launch refuses such a problem), and the values of the ordered
        path's last release, held across the walk, spilled on sm_90a fp16 at d160."""

    def _epilogue_keys(self, a, mask):
        """The walk's key length: re-derived (the base's way) it spilled on sm_90a fp16."""
        return mask.seqlen_kv

    @cute.jit
    def _epilogue_views(self, a, g):
        """dK/dV's gmem views made again after the walk, from a CTA position the compilers cannot merge with the
        one before it (it is decoded from flags passed through cutil.opaque_i32): held across the walk instead, d160's
        kv head spilled on sm_90a fp16 (8 bytes), as did d224's 64-bit dK/dV offset on sm_90a bf16 while 224 was a
        pad."""
        n_block, head_kv, batch = kv_tile_of_block(cutil.opaque_i32(a.flags))
        return self._gmem_views(a.Q, a.K, a.V, a.dK, a.dV, batch, head_kv, n_block)


class BwdMainGridDsKernel(_StoresDs, BwdMainGridKernel):
    """bwd_main_grid with dQ left to the dq_gemm kernel: each step stores its dS tile (M queries x N keys, complete
    in shared memory after the P/dS barrier, read by nothing else there) into the workspace (query-major,
    dq_gemm.ds_workspace) in place of the dQ GEMM and its fp32 adds."""

    _BASE = BwdMainGridKernel
    _KEYS_MAJOR = False

    def __init__(self, dtype, tile, arch, ordered: bool = False, varlen: bool = False):
        assert not (ordered or varlen) and tile.m_block == QM and MAIN_KN % tile.n_block == 0, tile
        BwdMainGridKernel.__init__(self, dtype, tile, arch, ordered)

    def _ds_tile(self, s):
        return s.dS, self.N    # (M queries, N keys)

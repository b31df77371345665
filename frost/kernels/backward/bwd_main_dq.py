"""The main kernel's dQ (a base of bwd_main.BwdMainKernel): a step's dQ GEMM over the KV tile, its fp32 adds or
ordered store, the parts of the tile a step skips, and the ordered relay's semaphores and releases
(ordering.dq_order_wait)."""


import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from frost.kernels import cute_utils as cutil
from frost.kernels.backward.ordering import dq_order_peek, dq_order_release, dq_order_wait
from frost.kernels.backward.preprocess import SEM_ROWS


class MainDq:
    """dQ of a BwdMainKernel step (its attributes: tile, ordered, N, M, D, ...)."""

    @cute.jit
    def _dq_step(self, mm, ld, mask, walk, it, head, m_block, sdS=None):
        """dQ[tile] += dS . K of step ``it``, in head-dim chunks, red.global.add into the fp32 accumulator; ordered
        dQ adds in KV-tile order, and on a dq_direct tile its first visitor stores and its last writes dQ (see
        dq_order_wait). ``sdS``: dS's ldmatrix partition where it is not mm.sdS (bwd_main_lag's two buffers)."""
        chunk = self.tile.dq_chunk
        sdS = mm.sdS if sdS is None else sdS
        gdQacc = self._dq_acc_tile(ld, head, m_block)
        dq_bh = ld.qdQ[ld.batch, head, None, None]
        gdQ = cute.local_tile(dq_bh, (self.M, self.D), (m_block, 0))
        cdQ = cute.local_tile(cute.make_identity_tensor(dq_bh.shape), (self.M, self.D), (m_block, 0))
        sem_row, sem_index = self._dq_semaphore(ld, head, m_block)
        rank = walk.n_block - mask.first_n_block(m_block, self.N, self.M)
        next_begin = mask.next_tile_begin(walk.n_block, self.N, self.M)
        seen = None
        if cutlass.const_expr(self.ordered):  # issued before the GEMM that hides its latency
            seen = dq_order_peek(sem_row, sem_index, rank)
        k_path = self._dq_k_path(mask, walk.n_block, m_block) if cutlass.const_expr(self.tile.dq_skip_parts) else None
        for c in cutlass.range_constexpr(self.D // chunk):
            accdQ = self._dq_chunk_gemm(mm, sdS, c, k_path)
            if cutlass.const_expr(c == 0):  # the first GEMM overlaps the wait
                dq_order_wait(sem_row, sem_index, rank, walk.ordered, seen)
            if cutlass.const_expr(c == self.D // chunk - 1):
                self._after_ds_reads(walk, it)
            gdq = mm.thr_dq.partition_C(cute.local_tile(gdQacc, (self.M, chunk), (0, c)))
            if cutlass.const_expr(self.tile.dq_direct):
                # (partitions made outside the runtime branches: made inside, they escape through the ThrMMA)
                gdq_io = mm.thr_dq.partition_C(cute.local_tile(gdQ, (self.M, chunk), (0, c)))
                cdq = mm.thr_dq.partition_C(cute.local_tile(cdQ, (self.M, chunk), (0, c)))
                if walk.ordered:  # (the atomic path stays one branch away)
                    if m_block < next_begin:  # the last visitor: dQ = scale * (sum so far + this)
                        if rank > 0:
                            cutil.add_from_global(accdQ, gdq)
                        cutil.store_acc(accdQ, gdq_io, cdq, dq_bh.shape[0], ld.head_dim, ld.dq_scale)
                    elif rank == 0:
                        cutil.store_acc_global(gdq, accdQ)
                    else:
                        self._red_add(gdq, accdQ)
                else:
                    self._red_add(gdq, accdQ)
            else:
                self._red_add(gdq, accdQ)

    def _red_add(self, gdq, accdQ):
        """Atomic adds of a dQ chunk into the fp32 accumulator."""
        if self.tile.dq_red_v4:
            cutil.red_add_acc_v4(gdq, accdQ)
        else:
            cutil.red_add_acc(gdq, accdQ)

    def _after_ds_reads(self, walk, it):
        """Hook: step ``it``'s last read of dS is issued (bwd_main_pipe arrives on the buffer's mbarrier)."""

    @cute.jit
    def _dq_acc_tile(self, ld, head, m_block):
        """The fp32 dQ accumulator's (M, D) tile of query tile ``m_block`` of ``head`` (this batch)."""
        return cute.local_tile(ld.qdQacc[ld.batch, head, None, None], (self.M, self.D), (m_block, 0))

    @cute.jit
    def _dq_chunk_gemm(self, mm, sdS, c: cutlass.Constexpr, k_path=None):
        """Chunk ``c`` of the step's dQ = dS . K (fp32 registers), dS read through ``sdS`` (mm.cAq's partition);
        ``k_path``: _dq_k_path (the k-blocks of the parts it leaves out are skipped: their dS are zeros), None for
        all keys."""
        chunk = self.tile.dq_chunk
        accdQ = cute.make_rmem_tensor(mm.thr_dq.partition_shape_C((self.M, chunk)), Float32)
        accdQ.fill(0.0)
        kt = mm.cBq.partition_S(cute.local_tile(mm.sKt, (chunk, self.N), (c, 0)))
        operands = (mm.dq, accdQ, mm.cAq, sdS, mm.rdS, mm.rdS_v, mm.cBq, kt, mm.rKt, mm.rKt_v)
        if cutlass.const_expr(k_path is None):
            cutil.gemm_ss(*operands)
        else:
            paths = self._dq_k_paths()
            for path in cutlass.range_constexpr(len(paths)):
                if k_path == path:
                    cutil.gemm_ss(*operands, k_blocks=paths[path])
        return accdQ

    def _dq_k_paths(self) -> list[range]:
        """The dQ GEMM's traced k-block ranges under TileConfig.dq_skip_parts = P: path p < P takes parts [0, p],
        path P - 1 + lo (lo >= 1) parts [lo, P - 1]; path P - 1 is every part."""
        parts, per_part = self.tile.dq_skip_parts, self.N // 16 // self.tile.dq_skip_parts
        return ([range((p + 1) * per_part) for p in range(parts)]
                + [range(lo * per_part, parts * per_part) for lo in range(1, parts)])

    @cute.jit
    def _dq_k_path(self, mask, n_block, m_block) -> Int32:
        """CTA-uniform: the _dq_k_paths index whose parts hold every key of the KV tile the step's query tile sees
        (the parts from the first, when that is part 0, to the last; else from the first to the end). When it sees
        none, every dS is zero and any path is right."""
        parts, part_keys = self.tile.dq_skip_parts, self.N // self.tile.dq_skip_parts
        key0 = n_block * self.N
        lo, hi = mask.key_span(m_block * self.M, self.M, key0, self.N)
        lo_part = cutlass.min(cutlass.max(lo - key0, 0), self.N - 1) // part_keys
        hi_part = cutlass.min(cutlass.max(hi - key0, 0), self.N - 1) // part_keys
        path = parts - 1 + lo_part
        if lo_part == 0:
            path = hi_part
        return path

    def _dq_semaphore(self, ld, head, m_block):
        """(this batch's semaphore row of ``head``, index of query tile ``m_block``'s first semaphore): what
        ordering's dq_order_* take (traced inline: no helper boundary inside the callers' runtime branches)."""
        return ld.qSem[ld.batch, head, None], m_block * (self.M // SEM_ROWS)

    @cute.jit
    def _dq_release_prev(self, ld, walk, it, head, m_block):
        """Ordered dQ, past a CTA barrier of step ``it``: release the previous step's tile."""
        head_prev, m_prev = self._walk_prev(walk, head, m_block)
        dq_order_release(*self._dq_semaphore(ld, head_prev, m_prev), walk.ordered & (it > 0))

    @cute.jit
    def _dq_release_last(self, ld, walk):
        """After the walk and a CTA barrier: release the last step's tile (each step releases the one before
        it)."""
        head_last, m_last = walk.head0 + walk.group - 1, walk.m_first - walk.n_m + 1
        dq_order_release(*self._dq_semaphore(ld, head_last, m_last), walk.ordered & (walk.n_iter > 0))

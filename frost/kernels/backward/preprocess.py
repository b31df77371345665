"""Backward preprocess: per query row, delta = rowsum(dO o O) in fp32 (minus dlse[row], the gradient on the forward's
LSE output, when one is given: it adds dlse * P to dS, the same as lowering delta) and LSE in log2 units (a row with
LSE = -inf, i.e. no visible key, gets +inf so that P = exp2(s - inf) = 0 exactly); rows past seqlen_q up to the
padded length get (LSE2 = +inf, delta = 0), so the main kernel loads whole tiles unguarded and padded rows
contribute nothing. Rows past the batch's own length seq_len_q[b] count as padded (their O, dO, LSE are never
read). Also zeroes the fp32 dQ accumulator (padded rows included) or, in a set whose main kernel writes dQ itself
(compiled for ordered dQ on a TileConfig.dq_direct tile, mask.main_writes_dq), the rows of dQ no KV tile writes
(rows past seq_len_q[b] and rows that see no key; the others are written by their query tile's last visitor)
and the dQ-order semaphores of its rows, and, with a sink, writes this CTA's dsink partial -sum_{valid rows}
exp(sink_h - LSE) * delta into ``dsink_part[b, h, blk]`` (summed in a fixed order, so deterministic; the
dq-convert kernel reduces the partials); the weight takes its limits at sink = LSE = +inf (1) and sink = -inf (0),
and a NaN delta or LSE stays NaN in dsink, as the math says.

Grid: (seqlen_q_pad / 128, heads, batch), 128 threads; compiled per (dtype, head_dim_pad)."""

import math
from types import SimpleNamespace

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64

from frost.kernels import cute_utils as cutil
from frost.kernels.backward import rowwise as rw
from frost.kernels.mask import FLAG_SEQ_KV, FLAG_SEQ_Q, MaskBounds, batch_length, make_mask
from frost.kernels.segments import rebased, segment
from frost.spec import kernel_flag

LOG2_E = math.log2(math.e)


SEM_ROWS = 16  # one dQ-order semaphore per 16 query rows (the smallest query tile)


class PreprocessKernel(rw.RowwiseKernel):
    @cute.jit
    def __call__(self, pO: cute.Pointer, pdO: cute.Pointer, pLSE: cute.Pointer, pDlse: cute.Pointer,
                 pLSE2: cute.Pointer,
                 pDelta: cute.Pointer, pdQacc: cute.Pointer, pdQ: cute.Pointer, pSeqQ: cute.Pointer,
                 pSeqKV: cute.Pointer, pSink: cute.Pointer, pDsinkPart: cute.Pointer, pSem: cute.Pointer,
                 pCuQ: cute.Pointer, pCuKV: cute.Pointer,
                 batch: Int32, heads: Int32, seqlen_q: Int32, seqlen_kv: Int32, seqlen_q_pad: Int32, head_dim: Int32,
                 head_dim_v: Int32, tokens_q: Int32, tokens_kv: Int32, acc_rows: Int32, bounds: MaskBounds,
                 flags: Int32, o_sb: Int64, o_sh: Int64,
                 o_ss: Int64, do_sb: Int64, do_sh: Int64, do_ss: Int64, lse_sb: Int64, lse_sh: Int64, lse_ss: Int64,
                 dlse_sb: Int64, dlse_sh: Int64, dlse_ss: Int64, dq_sb: Int64, dq_sh: Int64, dq_ss: Int64,
                 stream: cuda.CUstream):
        def bhsd(p, sb, sh, ss, d=head_dim_v):
            return cutil.bhsd_tensor(p, batch, heads, seqlen_q, d, sb, sh, ss)

        sqp = cute.assume(seqlen_q_pad, divby=rw.SEQ_PAD)
        rs = cute.assume(Int64(sqp), divby=rw.SEQ_PAD)
        n_blk = sqp // rw.ROWS_PER_CTA
        mLSE = cute.make_tensor(pLSE, cute.make_layout((batch, heads, seqlen_q), stride=(lse_sb, lse_sh, lse_ss)))
        mDlse = cute.make_tensor(pDlse, cute.make_layout((batch, heads, seqlen_q), stride=(dlse_sb, dlse_sh, dlse_ss)))
        vec = cute.make_layout((batch, heads, sqp), stride=(cute.assume(rs * heads, divby=rw.SEQ_PAD), rs, 1))
        acc_rs = cute.assume(rs * self.D, divby=rw.SEQ_PAD)
        mdQacc = cute.make_tensor(pdQacc, cute.make_layout(
            (batch, heads, sqp * self.D), stride=(cute.assume(acc_rs * heads, divby=rw.SEQ_PAD), acc_rs, 1)))
        if cutlass.const_expr(self.varlen):
            mdQacc = cute.make_tensor(pdQacc, rw.packed_acc_layout(batch, heads, sqp, acc_rows, self.D, flat=True))
        n_sem = sqp // SEM_ROWS
        mSem = cute.make_tensor(pSem, cute.make_layout((batch, heads, n_sem), stride=(n_sem * heads, n_sem, 1)))
        mPart = cute.make_tensor(pDsinkPart, cute.make_layout((batch, heads, n_blk),
                                                              stride=(n_blk * heads, n_blk, 1)))
        side = SimpleNamespace(seq_q=cute.make_tensor(pSeqQ, cute.make_layout(batch)),
                               seq_kv=cute.make_tensor(pSeqKV, cute.make_layout(batch)),
                               sink=cute.make_tensor(pSink, cute.make_layout(heads)), part=mPart, sem=mSem,
                               cu_q=cute.make_tensor(pCuQ, cute.make_layout(batch + 1)),
                               cu_kv=cute.make_tensor(pCuKV, cute.make_layout(batch + 1)))
        self.kernel(bhsd(pO, o_sb, o_sh, o_ss), bhsd(pdO, do_sb, do_sh, do_ss), mLSE, mDlse,
                    cute.make_tensor(pLSE2, vec), cute.make_tensor(pDelta, vec), mdQacc,
                    bhsd(pdQ, dq_sb, dq_sh, dq_ss, head_dim), side.seq_q, side.seq_kv, side.sink, side.part,
                    side.sem, side.cu_q, side.cu_kv, seqlen_kv, tokens_q, tokens_kv, bounds,
                    flags).launch(
            grid=(n_blk, heads, batch), block=[rw.NUM_THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mO: cute.Tensor, mdO: cute.Tensor, mLSE: cute.Tensor, mDlse: cute.Tensor, mLSE2: cute.Tensor,
               mDelta: cute.Tensor, mdQacc: cute.Tensor, mdQ: cute.Tensor, mSeqQ: cute.Tensor, mSeqKV: cute.Tensor,
               mSink: cute.Tensor, mPart: cute.Tensor, mSem: cute.Tensor, mCuQ: cute.Tensor, mCuKV: cute.Tensor,
               seqlen_kv: Int32, tokens_q: Int32, tokens_kv: Int32, bounds: MaskBounds,
               flags: Int32):
        tidx, _, _ = cute.arch.thread_idx()
        blk, head, batch = cute.arch.block_idx()
        acc_block = True  # this CTA's block of the dQ accumulator is its own (a packed segment's may end earlier)
        if cutlass.const_expr(self.varlen):
            start_q, extent_q = segment(mCuQ, batch, tokens_q, mO.shape[2])
            start_kv, seqlen_kv = segment(mCuKV, batch, tokens_kv, seqlen_kv)
            mO, mdO, mdQ = rebased(mO, start_q, extent_q), rebased(mdO, start_q, extent_q), \
                rebased(mdQ, start_q, extent_q)
            mLSE, mDlse = rebased(mLSE, start_q, extent_q), rebased(mDlse, start_q, extent_q)
            mdQacc = rw.segment_acc(mdQacc, start_q, batch, self.D)
            acc_block = blk * rw.ROWS_PER_CTA < extent_q
        head_dim_v = mO.shape[3]
        seqlen_q = batch_length(mSeqQ, flags, FLAG_SEQ_Q, batch, mO.shape[2])
        o_bh, do_bh = mO[batch, head, None, None], mdO[batch, head, None, None]
        lane = tidx % self.tpr
        sTerm = cutlass.memory.SmemAllocator().allocate_tensor(Float32, cute.make_layout(rw.ROWS_PER_CTA), 16)
        has_sink = (flags & kernel_flag("sink")) != 0
        sink = Float32(0.0)
        if has_sink:
            sink = mSink[head]
        for local, row in self.thread_rows(blk, tidx):
            delta = self._row_dot(o_bh, do_bh, row, tidx, seqlen_q, head_dim_v)
            delta = rw.quad_sum(delta, self.tpr)
            if lane == 0:
                lse2 = Float32(math.inf)
                term = Float32(0.0)
                if row < seqlen_q:
                    if (flags & kernel_flag("dlse")) != 0:
                        delta = delta - mDlse[batch, head, row]
                    lse = mLSE[batch, head, row]
                    lse2 = lse * LOG2_E if lse != -Float32.inf else Float32(math.inf)
                    if has_sink:
                        term = sink_weight(sink, lse) * delta
                mLSE2[batch, head, row] = lse2
                mDelta[batch, head, row] = delta
                sTerm[local] = term
        if cutlass.const_expr(self.main_writes_dq):
            skv = batch_length(mSeqKV, flags, FLAG_SEQ_KV, batch, seqlen_kv)
            mask = make_mask(seqlen_q, skv, bounds, flags)
            self._zero_unwritten_dq(mdQ[batch, head, None, None], mask, blk, tidx)
        else:
            if acc_block:
                self._zero_rows(mdQacc[batch, head, None], blk, tidx)
        if tidx < rw.ROWS_PER_CTA // SEM_ROWS:
            mSem[batch, head, blk * (rw.ROWS_PER_CTA // SEM_ROWS) + tidx] = Int32(0)
        if has_sink:
            cute.arch.sync_threads()
            self._dsink_partial(sTerm, mPart, batch, head, blk, tidx)

    @cute.jit
    def _dsink_partial(self, sTerm, mPart, batch, head, blk, tidx):
        """Warp 0 sums the CTA's row terms in a fixed order (lane-strided, then a butterfly)."""
        if tidx < 32:
            acc = Float32(0.0)
            for i in cutlass.range_constexpr(rw.ROWS_PER_CTA // 32):
                acc = acc + sTerm[i * 32 + tidx]
            acc = rw.quad_sum(acc, 32)
            if tidx == 0:
                mPart[batch, head, blk] = -acc

    @cute.jit
    def _row_dot(self, o_bh, do_bh, row, tidx, seqlen_q, head_dim_v) -> Float32:
        """This thread's part of sum_d dO[row, d] * O[row, d] (0 outside the tensor)."""
        acc = Float32(0.0)
        if row < seqlen_q:
            o_row, do_row = o_bh[row, None], do_bh[row, None]
            for chunk in self.thread_chunks(tidx):
                if chunk * rw.CHUNK < head_dim_v:
                    o = rw.chunk_view(o_row, chunk).load().to(Float32)
                    do = rw.chunk_view(do_row, chunk).load().to(Float32)
                    acc = acc + (o * do).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
        return acc

    @cute.jit
    def _zero_unwritten_dq(self, dq_bh: cute.Tensor, mask, blk, tidx):
        """Ordered dQ written by the main kernel: zero the rows of this CTA's block of dQ that no KV tile writes
        (past the batch's length, or seeing no key), 16 bytes per store."""
        zero = cute.make_rmem_tensor((rw.CHUNK,), self.dtype)
        zero.fill(0.0)
        for _, row in self.thread_rows(blk, tidx):
            if (row < dq_bh.shape[0]) & mask.row_sees_no_key(row):
                for chunk in self.thread_chunks(tidx):
                    if chunk * rw.CHUNK < dq_bh.shape[1]:
                        rw.chunk_view(dq_bh[row, None], chunk).store(zero.load())

    @cute.jit
    def _zero_rows(self, acc_bh: cute.Tensor, blk, tidx):
        """Zero this CTA's ROWS_PER_CTA x D block of the (contiguous) fp32 dQ accumulator, 16 bytes per store."""
        zero = cute.make_rmem_tensor((4,), Float32)
        zero.fill(0.0)
        block = cute.local_tile(acc_bh, (rw.ROWS_PER_CTA * self.D,), (blk,))
        for i in cutlass.range_constexpr(rw.ROWS_PER_CTA * self.D // 4 // rw.NUM_THREADS):
            rw.chunk_view(block, i * rw.NUM_THREADS + tidx, 4).store(zero.load())


@cute.jit
def sink_weight(sink: Float32, lse: Float32) -> Float32:
    """exp(sink - LSE), the sink's share of a row, with its limits where the difference is inf - inf: 1 where
    sink = LSE = +inf (all weight on the sink), 0 where sink = -inf (no sink; also where LSE = -inf). NaN stays NaN."""
    w = cute.math.exp2((sink - lse) * LOG2_E)
    w = Float32(1.0) if sink == lse else w
    return Float32(0.0) if sink == -Float32.inf else w

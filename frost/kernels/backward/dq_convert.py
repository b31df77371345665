"""dQ convert: dq[b, h, i, :d] = scale * dq_accum[b, h, i, :d] in the io dtype (the main kernel accumulates the
unscaled dS . K in fp32); rows past a batch's seq_len_q get zeros, selected: their accumulator rows are zeros unless
a non-finite K or V row of a tile they share with valid rows put NaN there (their zero-filled Q and dO times it).
With a sink, CTA (0, h, 0) also reduces the preprocess's dsink partials of head h over (batch, row block) in a
fixed order: dsink[h] = sum_b sum_blk part[b, h, blk] (deterministic).
Grid: (ceil(seqlen_q / 128), heads, batch), 128 threads; per (dtype, head_dim_pad). In a set whose main kernel
writes dQ itself (compiled for ordered dQ on a TileConfig.dq_direct tile, mask.main_writes_dq) only the dsink CTAs
run, grid (1, heads, 1), and the chain skips the launch when there is no sink."""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64

from frost.kernels.backward import rowwise as rw
from frost.kernels.mask import FLAG_SEQ_Q, batch_length
from frost.kernels.segments import rebased, segment
from frost.spec import kernel_flag


class DqConvertKernel(rw.RowwiseKernel):
    @cute.jit
    def __call__(self, pdQacc: cute.Pointer, pdQ: cute.Pointer, pDsinkPart: cute.Pointer, pDsink: cute.Pointer,
                 pCuQ: cute.Pointer, pSeqQ: cute.Pointer, batch: Int32, heads: Int32, seqlen_q: Int32,
                 seqlen_q_pad: Int32, head_dim: Int32, tokens_q: Int32, acc_rows: Int32, flags: Int32,
                 dq_sb: Int64, dq_sh: Int64, dq_ss: Int64, scale: Float32, stream: cuda.CUstream):
        sqp = cute.assume(seqlen_q_pad, divby=rw.SEQ_PAD)
        rs = cute.assume(Int64(sqp) * self.D, divby=rw.SEQ_PAD)
        mdQacc = cute.make_tensor(pdQacc, cute.make_layout(
            (batch, heads, sqp, self.D), stride=(cute.assume(rs * heads, divby=rw.SEQ_PAD), rs, self.D, 1)))
        if cutlass.const_expr(self.varlen):
            mdQacc = cute.make_tensor(pdQacc, rw.packed_acc_layout(batch, heads, sqp, acc_rows, self.D))
        stride = (cute.assume(dq_sb, divby=8), cute.assume(dq_sh, divby=8), cute.assume(dq_ss, divby=8), 1)
        mdQ = cute.make_tensor(pdQ, cute.make_layout((batch, heads, seqlen_q, head_dim), stride=stride))
        n_blk = sqp // rw.ROWS_PER_CTA
        mPart = cute.make_tensor(pDsinkPart, cute.make_layout((heads, n_blk, batch), stride=(n_blk, 1, n_blk * heads)))
        mDsink = cute.make_tensor(pDsink, cute.make_layout(heads))
        n_row_blocks, n_batch = cute.ceil_div(seqlen_q, rw.ROWS_PER_CTA), batch
        if cutlass.const_expr(self.main_writes_dq):
            n_row_blocks, n_batch = Int32(1), Int32(1)  # dsink only
        mCuQ = cute.make_tensor(pCuQ, cute.make_layout(batch + 1))
        mSeqQ = cute.make_tensor(pSeqQ, cute.make_layout(batch))
        self.kernel(mdQacc, mdQ, mPart, mDsink, mCuQ, mSeqQ, tokens_q, flags, scale).launch(
            grid=(n_row_blocks, heads, n_batch), block=[rw.NUM_THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mdQacc: cute.Tensor, mdQ: cute.Tensor, mPart: cute.Tensor, mDsink: cute.Tensor,
               mCuQ: cute.Tensor, mSeqQ: cute.Tensor, tokens_q: Int32, flags: Int32, scale: Float32):
        tidx, _, _ = cute.arch.thread_idx()
        blk, head, batch = cute.arch.block_idx()
        if cutlass.const_expr(self.varlen and not self.main_writes_dq):
            start_q, extent_q = segment(mCuQ, batch, tokens_q, mdQ.shape[2])
            mdQ, mdQacc = rebased(mdQ, start_q, extent_q), rw.segment_acc(mdQacc, start_q, batch, self.D)
        if cutlass.const_expr(not self.main_writes_dq):
            seqlen_q = batch_length(mSeqQ, flags, FLAG_SEQ_Q, batch, mdQ.shape[2])
            self._convert_rows(mdQacc[batch, head, None, None], mdQ[batch, head, None, None], blk, tidx, scale,
                               seqlen_q)
        if ((flags & kernel_flag("sink")) != 0) & (blk == 0) & (batch == 0) & (tidx < 32):
            self._reduce_dsink(mPart[head, None, None], mDsink, head, tidx)

    @cute.jit
    def _convert_rows(self, acc_bh: cute.Tensor, dq_bh: cute.Tensor, blk, tidx, scale: Float32, seqlen_q: Int32):
        """This CTA's ROWS_PER_CTA rows of one (batch, head): dq = scale * acc in the io dtype; rows from the
        batch's length ``seqlen_q`` on (padding) get zeros."""
        rows, head_dim = dq_bh.shape[0], dq_bh.shape[1]
        zero = cute.make_rmem_tensor((rw.CHUNK,), self.dtype)
        zero.fill(0.0)
        for _, row in self.thread_rows(blk, tidx):
            for chunk in self.thread_chunks(tidx):
                if (row < rows) & (chunk * rw.CHUNK < head_dim):
                    if row < seqlen_q:
                        acc = rw.chunk_view(acc_bh[row, None], chunk).load()
                        rw.chunk_view(dq_bh[row, None], chunk).store((acc * scale).to(self.dtype))
                    else:
                        rw.chunk_view(dq_bh[row, None], chunk).store(zero.load())

    @cute.jit
    def _reduce_dsink(self, part_h: cute.Tensor, mDsink: cute.Tensor, head, lane):
        """One warp: lane-strided sums over the (row block, batch) partials of one head, then a butterfly."""
        n_blk = part_h.shape[0]
        acc = Float32(0.0)
        for i in cutlass.range(lane, cute.size(part_h), 32):
            acc = acc + part_h[i % n_blk, i // n_blk]
        acc = rw.quad_sum(acc, 32)
        if lane == 0:
            mDsink[head] = acc

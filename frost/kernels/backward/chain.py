"""One host entry for the whole backward: the preprocess, main and dQ-convert kernels launched from one compiled
host function, so that a call crosses from Python into C once (one TVM-FFI call packs the arguments of all three
launches) instead of three times. A kernel whose extent is empty is skipped at run time: no query rows means no
preprocess and no conversion, no keys means no main kernel (which would have nothing to walk). In a set whose main
kernel writes dQ itself (compiled for ordered dQ on a TileConfig.dq_direct tile, mask.main_writes_dq) the convert
kernel only runs for dsink.

Arguments: the io tensors (pointer + three strides each; LSE's and dLSE's strides too), the workspace regions, the
optional per-batch lengths, sink and dLSE pointers (stand-ins when absent: their flag is off), the packed
segments' prefix sums (read only by a varlen set), the sizes (with the packed token counts and the dQ
accumulator's rows per head), the scale, the band and the flags, then the stream."""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64

from frost.kernels.mask import MaskBounds
from frost.spec import kernel_flag


class BackwardChain:
    def __init__(self, preprocess, main, dq_convert, main_writes_dq: bool = False, dq_gemm=None):
        """``main_writes_dq``: the set writes dQ without the convert pass (mask.main_writes_dq, or ``dq_gemm``:
        the dQ GEMM kernel of a KernelKey.dq_gemm set, run after the main kernel)."""
        self.preprocess, self.main, self.dq_convert, self.dq_gemm = preprocess, main, dq_convert, dq_gemm
        self.main_writes_dq = main_writes_dq

    @cute.jit
    def __call__(self, pQ: cute.Pointer, pK: cute.Pointer, pV: cute.Pointer, pO: cute.Pointer, pdO: cute.Pointer,
                 pLSE: cute.Pointer, pdQ: cute.Pointer, pdK: cute.Pointer, pdV: cute.Pointer, pdQacc: cute.Pointer,
                 pLSE2: cute.Pointer, pDelta: cute.Pointer, pSem: cute.Pointer, pDsinkPart: cute.Pointer,
                 pSeqQ: cute.Pointer, pSeqKV: cute.Pointer, pSink: cute.Pointer, pDsink: cute.Pointer,
                 pDlse: cute.Pointer, pCuQ: cute.Pointer, pCuKV: cute.Pointer, batch: Int32, heads: Int32,
                 heads_kv: Int32, seqlen_q: Int32, seqlen_kv: Int32, seqlen_q_pad: Int32, head_dim: Int32,
                 head_dim_v: Int32, tokens_q: Int32, tokens_kv: Int32, acc_rows: Int32,
                 q_sb: Int64, q_sh: Int64, q_ss: Int64, k_sb: Int64, k_sh: Int64, k_ss: Int64,
                 v_sb: Int64, v_sh: Int64, v_ss: Int64, o_sb: Int64, o_sh: Int64, o_ss: Int64,
                 do_sb: Int64, do_sh: Int64, do_ss: Int64, lse_sb: Int64, lse_sh: Int64, lse_ss: Int64,
                 dlse_sb: Int64, dlse_sh: Int64, dlse_ss: Int64,
                 dq_sb: Int64, dq_sh: Int64, dq_ss: Int64, dk_sb: Int64, dk_sh: Int64, dk_ss: Int64,
                 dv_sb: Int64, dv_sh: Int64, dv_ss: Int64,
                 scale: Float32, scale_log2: Float32, band_left: Int32, band_right: Int32, flags: Int32,
                 stream: cuda.CUstream):
        bounds = MaskBounds(band_left, band_right)
        if seqlen_q > 0:
            self.preprocess(pO, pdO, pLSE, pDlse, pLSE2, pDelta, pdQacc, pdQ, pSeqQ, pSeqKV, pSink, pDsinkPart, pSem,
                            pCuQ, pCuKV, batch, heads, seqlen_q, seqlen_kv, seqlen_q_pad, head_dim, head_dim_v,
                            tokens_q, tokens_kv, acc_rows, bounds, flags, o_sb, o_sh, o_ss, do_sb, do_sh, do_ss,
                            lse_sb, lse_sh, lse_ss, dlse_sb, dlse_sh, dlse_ss, dq_sb, dq_sh, dq_ss, stream)
        if seqlen_kv > 0:
            self.main(pQ, pK, pV, pdO, pLSE2, pDelta, pdQacc, pdQ, pdK, pdV, pSeqQ, pSeqKV, pSem, pCuQ, pCuKV, batch,
                      heads, heads_kv, seqlen_q, seqlen_kv, seqlen_q_pad, head_dim, head_dim_v, tokens_q, tokens_kv,
                      acc_rows, q_sb, q_sh, q_ss, k_sb, k_sh,
                      k_ss, v_sb, v_sh, v_ss, do_sb, do_sh, do_ss, dq_sb, dq_sh, dq_ss, dk_sb, dk_sh, dk_ss, dv_sb,
                      dv_sh, dv_ss, scale, scale_log2, bounds, flags, stream)
        if cutlass.const_expr(self.dq_gemm is not None):
            if seqlen_q > 0:  # (also without keys: it writes the zeros)
                self.dq_gemm(pdQacc, pK, pdQ, pSeqQ, pSeqKV, batch, heads, heads_kv, seqlen_q, seqlen_kv, seqlen_q_pad,
                             head_dim, k_sb, k_sh, k_ss, dq_sb, dq_sh, dq_ss, scale, bounds, flags,
                             stream)
        # where the main kernel wrote dQ, the convert kernel only reduces dsink (when there is one)
        run_convert = seqlen_q > 0
        if cutlass.const_expr(self.main_writes_dq):
            run_convert = run_convert & ((flags & kernel_flag("sink")) != 0)
        if run_convert:
            self.dq_convert(pdQacc, pdQ, pDsinkPart, pDsink, pCuQ, pSeqQ, batch, heads, seqlen_q, seqlen_q_pad,
                            head_dim, tokens_q, acc_rows, flags, dq_sb, dq_sh, dq_ss, scale, stream)

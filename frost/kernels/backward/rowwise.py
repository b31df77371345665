"""Row-wise work split shared by the small kernels (preprocess, dq convert): a CTA of 128 threads owns
ROWS_PER_CTA rows of one (batch, head); each thread handles 16-byte chunks of 8 columns, THREADS_PER_ROW threads
per row (their partial sums meet with warp shuffles)."""

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64

from frost import limits
from frost.kernels.segments import acc_row_base

NUM_THREADS = 128
ROWS_PER_CTA = 128
SEQ_PAD = limits.SEQ_PAD  # workspace rows are padded to this multiple (the main kernel's query tiles divide it)
CHUNK = 8      # 16-bit elements per 16-byte access


def threads_per_row(head_dim_pad: int) -> int:
    """A power of two (the lanes of a row meet in a butterfly, quad_sum), at most 8 and at most the row's chunks:
    48 columns (6 chunks) take 4 threads, 2 chunk slots each."""
    chunks = min(8, head_dim_pad // CHUNK)
    return 1 << (chunks.bit_length() - 1)


class RowwiseKernel:
    """Base of the row-wise kernels: the io dtype, the padded head dim and the thread split of a row."""

    def __init__(self, dtype, head_dim_pad: int, main_writes_dq: bool = False, varlen: bool = False):
        self.dtype = dtype
        self.varlen = varlen  # packed sequences (kernels/segments.py)
        self.D = head_dim_pad
        self.main_writes_dq = main_writes_dq  # the set's main kernel writes dQ (mask.main_writes_dq)
        self.tpr = threads_per_row(head_dim_pad)
        self.rows_per_pass = NUM_THREADS // self.tpr

    def thread_rows(self, blk, tidx):
        """This thread's rows of CTA ``blk``, one per pass, as (row within the CTA's block, row). A trace-time
        generator (the passes unroll), shared so every row-wise loop splits a block the same way."""
        for p in range(ROWS_PER_CTA // self.rows_per_pass):
            local = p * self.rows_per_pass + tidx // self.tpr
            yield local, blk * ROWS_PER_CTA + local

    def thread_chunks(self, tidx):
        """This thread's chunk slots of a row (chunk i covers columns [i * CHUNK, (i + 1) * CHUNK)); slots past
        the row's width are the caller's to mask. A trace-time generator, like thread_rows."""
        for c in range(chunks_per_thread(self.D)):
            yield c * self.tpr + tidx % self.tpr


def chunks_per_thread(head_dim_pad: int) -> int:
    """Chunk slots per thread: ceil(chunks / threads_per_row); slots past the row are masked by the caller."""
    return -(-(head_dim_pad // CHUNK) // threads_per_row(head_dim_pad))


@cute.jit
def chunk_view(t_row: cute.Tensor, chunk: Int32, width: cutlass.Constexpr = CHUNK) -> cute.Tensor:
    """The ``width`` elements starting at column ``chunk * width`` of a contiguous row."""
    return cute.local_tile(t_row, (width,), (chunk,))


@cute.jit
def quad_sum(x: Float32, group: cutlass.Constexpr) -> Float32:
    """Sum over ``group`` adjacent lanes (power of two <= 32)."""
    offset = group // 2
    while cutlass.const_expr(offset >= 1):
        x = x + cute.arch.shuffle_sync_bfly(x, offset)
        offset //= 2
    return x



def packed_acc_layout(batch, heads, rows_pad, acc_rows, cols: int, flat: bool = False) -> cute.Layout:
    """A packed problem's fp32 dQ accumulator: ``acc_rows`` rows per head shared by every batch (batch stride 0;
    segment_acc moves a batch onto its rows), as (batch, heads, rows_pad, cols), or with ``flat``
    (batch, heads, rows_pad * cols)."""
    rs = cute.assume(Int64(acc_rows) * cols, divby=SEQ_PAD)
    if flat:
        return cute.make_layout((batch, heads, rows_pad * cols), stride=(0, rs, 1))
    return cute.make_layout((batch, heads, rows_pad, cols), stride=(0, rs, cols, 1))


def segment_acc(acc: cute.Tensor, start, batch, cols: int) -> cute.Tensor:
    """A packed accumulator (packed_acc_layout) moved onto batch ``batch``'s rows (its segment starts at token
    ``start``). Traced inline."""
    rows = acc_row_base(start, batch)
    crd = (0, 0, rows * cols) if cute.rank(acc) == 3 else (0, 0, rows, 0)
    return cute.domain_offset(crd, acc)

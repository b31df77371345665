"""The cute_sm120 kernels' limits as plain data: the analyzer's capability (which imports no torch or cutlass) and
the kernels both read them here, so the probe, the lowering and the call-time checks agree by construction."""

from __future__ import annotations

HEAD_DIM_MULTIPLE = 8   # head dims run as any multiple of this ...
HEAD_DIM_MAX = 256      # ... up to this
# the widths the kernels compute at: a head dim runs padded up to the next one (the multiples of 32 but 224, and
# 48 and 80)
HEAD_DIM_PADS = (32, 48, 64, 80, 96, 128, 160, 192, 256)
SEQ_PAD = 128           # workspace rows (the fp32 dQ accumulator's, LSE's, delta's) are padded to this multiple
# q's and do's sequence strides stay below this many elements: the kernels address a query tile's rows (up to 128)
# with 32-bit offsets
SEQ_STRIDE_LIMIT = 2**24
MAX_SEQ = 1 << 28       # longest seq_q / seq_kv: the mask arithmetic is 32-bit (offsets up to ~2^29)
# elements of one head's fp32 dQ accumulator (seq_q padded to SEQ_PAD rows x the padded head dim): the offsets into
# it are 32-bit
MAX_ACC_ELEMENTS = (1 << 31) - 1
SMEM_BYTES = 99 * 1024  # shared memory one CTA may take on the SM120 class
# the probe's targets the kernels serve -> the arch they are compiled for (kernels.arch holds each arch's details)
TARGET_ARCHS = {"sm_120": "sm_120a", "sm_121": "sm_121a", "sm_90": "sm_90a"}


def pad_head_dim(head_dim: int) -> int:
    """The smallest served pad that holds ``head_dim`` (ValueError where none does)."""
    if head_dim <= 0 or head_dim % HEAD_DIM_MULTIPLE or head_dim > HEAD_DIM_MAX:
        raise ValueError(f"head dim {head_dim}: need a positive multiple of {HEAD_DIM_MULTIPLE} <= {HEAD_DIM_MAX}")
    return next(p for p in HEAD_DIM_PADS if p >= head_dim)


def acc_cols(head_dim_qk: int) -> int:
    """Columns of one row of the fp32 dQ accumulator at this head dim (past the served ones: rounded up to 32)."""
    return next((p for p in HEAD_DIM_PADS if p >= head_dim_qk), -(-head_dim_qk // 32) * 32)


def acc_seq_limit(head_dim_qk: int, max_acc_elements: int = MAX_ACC_ELEMENTS) -> int:
    """The longest seq_q whose padded rows of one head's dQ accumulator fit ``max_acc_elements``."""
    return max_acc_elements // acc_cols(head_dim_qk) // SEQ_PAD * SEQ_PAD


def max_seq_q(head_dim_qk: int) -> int:
    """The longest query sequence the kernels serve at this head dim."""
    return min(MAX_SEQ, acc_seq_limit(head_dim_qk))


def seq_pad(seq_q: int) -> int:
    """Workspace rows per (batch, head): seq_q rounded up to a multiple of SEQ_PAD."""
    return -(-seq_q // SEQ_PAD) * SEQ_PAD


def packed_acc_rows(tokens_q: int, batch: int) -> int:
    """Rows per head of a packed (varlen) problem's fp32 dQ accumulator: the Tq tokens padded to SEQ_PAD, plus one
    SEQ_PAD of room per segment and one more (kernels/segments.acc_row_base places segment b's rows)."""
    return seq_pad(tokens_q) + (batch + 1) * SEQ_PAD


STRIDE_ALIGN_BYTES = 16   # the kernels' 16-byte copies and TMA need every stepping stride to be a multiple of this


def strides_aligned(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether every stride a tensor steps through (a dim of extent > 1) other than a unit one is a multiple of
    STRIDE_ALIGN_BYTES."""
    return all((s * itemsize) % STRIDE_ALIGN_BYTES == 0 for s, e in zip(strides, shape) if e > 1 and s != 1)

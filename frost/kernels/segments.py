"""Packed (varlen) sequences on the device: where a batch's segment starts and how long it is, and the tensors
re-based onto it.

A packed tensor (tokens of all sequences along one axis) reaches a kernel as a logical (B, H, S, D) tensor (or
(B, H, S) for LSE) whose batch stride is 0 and whose S is max_seqlen: every batch sees the same memory. A CTA of
batch b reads its segment [cu[b], cu[b+1]) from the int32 prefix sums and re-bases its tensors on it
(``rebased``): the iterator moves to token cu[b] and S becomes the segment's extent, so everything downstream
(tiles, zero-filled loads, bounded stores, per-batch lengths clamped to S) is the padded-batch code as it is.
Segment values are clamped into the tensor (start in [0, total], extent in [0, min(total - start, max_len)]), so
unchecked bad prefix sums cannot make a kernel read or write outside it.

The fp32 dQ accumulator of a packed problem holds Tq rows, not B x max_seqlen: segment b's rows start at
``acc_row_base`` (its start plus b x SEQ_PAD, rounded down to SEQ_PAD), which leaves room to pad each segment to a
multiple of SEQ_PAD rows (limits.packed_acc_rows sizes the region)."""

import cutlass
import cutlass.cute as cute
from cutlass import Int32

from frost.limits import SEQ_PAD


@cute.jit
def segment(mCu: cute.Tensor, batch: Int32, total: Int32, max_len: Int32):
    """(start, extent) of batch ``batch``'s segment from the prefix sums ``mCu`` (B + 1,), clamped into a tensor
    of ``total`` tokens and to ``max_len``."""
    start = cutlass.min(cutlass.max(mCu[batch], Int32(0)), total)
    end = cutlass.min(cutlass.max(mCu[batch + 1], start), total)
    return start, cutlass.min(end - start, max_len)


def rebased(t: cute.Tensor, start, extent) -> cute.Tensor:
    """``t`` (B, H, S, ...) with its iterator moved to token ``start`` of the S mode (mode 2) and S = ``extent``
    (the batch stride is 0: the same view serves every batch index). Traced inline."""
    crd = (0, 0, start) + (0,) * (cute.rank(t) - 3)
    moved = cute.domain_offset(crd, t)
    shape = (t.shape[0], t.shape[1], extent) + tuple(t.shape[3:])
    return cute.make_tensor(moved.iterator, cute.make_layout(shape, stride=t.layout.stride))


def acc_row_base(start, batch):
    """The first fp32 dQ-accumulator row of a segment starting at token ``start`` (see the module doc)."""
    return (start + batch * SEQ_PAD) // SEQ_PAD * SEQ_PAD

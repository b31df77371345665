"""The value checks of an op's lengths, shared by every engine: per-batch padding lengths in [0, S], and a packed
op's prefix sums and seqused (frost.kernels.packed.check_packed_values). Each reads the values back (a
device-to-host transfer), so it is on by default and skipped under CUDA-graph capture or FROST_CHECK_SEQ_LENS=0."""

from __future__ import annotations

from frost.analyzer.facts import Facts


def check_seq_len_values() -> bool:
    """Whether to check length values before launching (one small device->host read).

    On by default so a bad length is a TensorError, not a silently wrong result; skipped while a CUDA graph is being
    captured (a read would break the capture) and when FROST_CHECK_SEQ_LENS=0 (for loops that must never sync). The
    kernels clamp lengths to [0, S] and packed segments into their tensors either way, so an unchecked bad value
    cannot read or write out of bounds."""
    import os

    import torch

    if os.environ.get("FROST_CHECK_SEQ_LENS", "1") == "0":
        return False
    return not (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def packed_segments(ins, facts: Facts):
    """tensors -> the call's kernels.packed.Packed (its cu_seqlens tensors and the plan's max_seqlens), or None for
    a dense op."""
    if not facts.varlen:
        return lambda tensors: None
    from frost.kernels.packed import Packed

    def segments(tensors: dict):
        return Packed(tensors[ins.cu_seqlens_q], tensors[ins.cu_seqlens_kv], facts.seq_q, facts.seq_kv)

    return segments


def check_lengths_if_on(facts: Facts, packed, seq_len_q, seq_len_kv) -> None:
    """check_lengths where the call has something to check (padding lengths, or a packed op's segments) and the
    check is on (check_seq_len_values)."""
    if (packed is not None or seq_len_q is not None or seq_len_kv is not None) and check_seq_len_values():
        check_lengths(facts, packed, seq_len_q, seq_len_kv)


def check_lengths(facts: Facts, packed, seq_len_q, seq_len_kv) -> None:
    """The padding lengths' values (in [0, S]), or a packed op's prefix sums and seqused."""
    if packed is None:
        from frost.kernels.host_checks import check_length_values

        check_length_values(seq_len_q, seq_len_kv, facts.seq_q, facts.seq_kv)
    else:
        from frost.kernels.packed import check_packed_values

        check_packed_values(packed, facts.tokens_q, facts.tokens_kv, seq_len_q, seq_len_kv)

"""The value checks of an op's lengths, shared by every engine: per-batch padding lengths in [0, S], and a packed
op's prefix sums and seqused (frost.kernels.packed.check_packed_values). Values on the CPU are checked at once. Values
on a GPU are checked without a sync by default (deferred_checks: an asynchronous copy, checked on the host by a later
call); FROST_CHECK_SEQ_LENS=sync checks them before the launch (a device-to-host read that stalls the host), =0 not
at all. Nothing is checked while a CUDA graph is being captured."""

from __future__ import annotations

from frost import settings
from frost.analyzer.facts import Facts

# FROST_CHECK_SEQ_LENS: the on-words of a switch mean the default (deferred), its off-words off, and "sync" sync
CHECK_MODES = {**dict.fromkeys(settings.ON, "deferred"), "deferred": "deferred", "sync": "sync",
               **dict.fromkeys(settings.OFF, "off")}
CHECK_MODES_ACCEPTED = "deferred (or 1, on, true, yes), sync, or 0, off, false, no (off), any case"


def check_mode() -> str:
    """"deferred" (the default), "sync" (FROST_CHECK_SEQ_LENS=sync) or "off" (FROST_CHECK_SEQ_LENS=0, and while a
    CUDA graph is being captured: a copy or a read would break the capture). The kernels clamp lengths to [0, S] and
    packed segments into their tensors in every mode, so an unchecked bad value cannot read or write out of bounds."""
    import torch

    mode = settings.choice("FROST_CHECK_SEQ_LENS", "deferred", CHECK_MODES, CHECK_MODES_ACCEPTED)
    if mode == "off" or (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()):
        return "off"
    return mode


def check_seq_len_values() -> bool:
    """Whether length values are checked at all (in either mode)."""
    return check_mode() != "off"


def call_lengths(ins, facts: Facts):
    """For an op with packed segments or padding lengths: tensors -> the call's kernels.packed.Packed (its cu_seqlens
    tensors and the plan's max_seqlens; None for a dense op), after checking the call's lengths where that is on
    (check_lengths_if_on). None for an op with neither: its calls check nothing and pass no segments."""
    if not (facts.varlen or ins.seq_len_q is not None or ins.seq_len_kv is not None):
        return None
    from frost.kernels.packed import Packed

    names = (ins.seq_len_q, ins.seq_len_kv)

    def lengths(tensors: dict):
        packed = None
        if facts.varlen:
            packed = Packed(tensors[ins.cu_seqlens_q], tensors[ins.cu_seqlens_kv], facts.seq_q, facts.seq_kv)
        check_lengths_if_on(facts, packed, *(None if n is None else tensors[n] for n in names))
        return packed

    return lengths


def check_lengths_if_on(facts: Facts, packed, seq_len_q, seq_len_kv) -> None:
    """check_lengths where the call has something to check (padding lengths, or a packed op's segments) and the
    check is on: at once for CPU tensors or in sync mode, else deferred (no sync)."""
    if packed is None and seq_len_q is None and seq_len_kv is None:
        return
    mode = check_mode()
    if mode == "off":
        return
    tensors = (seq_len_q, seq_len_kv) if packed is None else \
        (packed.cu_seqlens_q, packed.cu_seqlens_kv, seq_len_q, seq_len_kv)
    if mode == "sync" or next(t for t in tensors if t is not None).device.type != "cuda":
        check_lengths(facts, packed, seq_len_q, seq_len_kv)
        return
    from frost.lowering.engines.deferred_checks import CHECKS

    if packed is None:
        limits = (facts.seq_q, facts.seq_kv)
        CHECKS.submit(tensors, limits, lambda host: check_lengths(facts, None, *host))
    else:
        limits = (facts.tokens_q, facts.tokens_kv, packed.max_seqlen_q, packed.max_seqlen_kv)
        CHECKS.submit(tensors, limits, lambda host: check_lengths(facts, _on_host(packed, host), *host[2:]))


def _on_host(packed, host: tuple):
    """The call's segments with their prefix sums replaced by the host copies."""
    from dataclasses import replace

    return replace(packed, cu_seqlens_q=host[0], cu_seqlens_kv=host[1])


def check_lengths(facts: Facts, packed, seq_len_q, seq_len_kv) -> None:
    """The padding lengths' values (in [0, S]), or a packed op's prefix sums and seqused."""
    if packed is None:
        from frost.kernels.host_checks import check_length_values

        check_length_values(seq_len_q, seq_len_kv, facts.seq_q, facts.seq_kv)
    else:
        from frost.kernels.packed import check_packed_values

        check_packed_values(packed, facts.tokens_q, facts.tokens_kv, seq_len_q, seq_len_kv)

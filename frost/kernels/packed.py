"""Packed (varlen) calls, host side: the segments a call passes (Packed) and the optional check of their values.

The kernels read each batch's segment [cu[b], cu[b + 1]) from int32 prefix sums on the device (segments.py) and
clamp it into the tensors, so bad values cannot make them read or write outside; checking that the values mean
what the caller thinks (a synchronizing read) is the caller's choice, like the padding lengths' check."""

from __future__ import annotations

from dataclasses import dataclass

from frost.errors import TensorError


@dataclass(frozen=True)
class Packed:
    """The segments of a packed call: int32 (B + 1,) prefix sums on the device (segment b is [cu[b], cu[b + 1]) of
    the token axis) and the longest segments (host ints >= every segment: they size the grids)."""
    cu_seqlens_q: object
    cu_seqlens_kv: object
    max_seqlen_q: int
    max_seqlen_kv: int

    @property
    def batch(self) -> int:
        return self.cu_seqlens_q.shape[0] - 1


def check_packed_values(packed: Packed, tokens_q: int, tokens_kv: int, seqused_q=None, seqused_kv=None) -> None:
    """TensorError unless both prefix sums start at 0, never decrease, end at most at the tokens given, keep every
    segment within max_seqlen, and every seqused lies in [0, its segment] (one device-to-host read of each)."""
    for side, cu, tokens, longest, used in (("q", packed.cu_seqlens_q, tokens_q, packed.max_seqlen_q, seqused_q),
                                            ("kv", packed.cu_seqlens_kv, tokens_kv, packed.max_seqlen_kv,
                                             seqused_kv)):
        check_prefix_sums(f"cu_seqlens_{side}", cu.tolist(), tokens, longest, f"max_seqlen_{side}")
        if used is not None:
            check_used(f"seqused_{side}", used.tolist(), cu.tolist())


def check_prefix_sums(name: str, cu: list[int], tokens: int, longest: int, longest_name: str) -> None:
    if not cu or cu[0] != 0:
        raise TensorError(f"{name}[0]", cu[0] if cu else None, "0 (the prefix sums start at token 0)")
    for b in range(1, len(cu)):
        if cu[b] < cu[b - 1]:
            raise TensorError(f"{name}[{b}]", cu[b], f">= {name}[{b - 1}] = {cu[b - 1]} (non-decreasing)")
        if cu[b] - cu[b - 1] > longest:
            raise TensorError(f"{name}[{b}] - {name}[{b - 1}]", cu[b] - cu[b - 1],
                              f"at most {longest_name} = {longest}")
    if cu[-1] > tokens:
        raise TensorError(f"{name}[-1]", cu[-1], f"at most the {tokens} tokens of the packed tensors")


def check_used(name: str, used: list[int], cu: list[int]) -> None:
    for b, n in enumerate(used):
        if not 0 <= n <= cu[b + 1] - cu[b]:
            raise TensorError(f"{name}[{b}]", n, f"in [0, {cu[b + 1] - cu[b]}] (segment {b}'s length)")

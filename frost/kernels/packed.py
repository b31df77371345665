"""Packed (varlen) calls, host side: the segments a call passes (Packed) and the optional check of their values.

The kernels read each batch's segment [cu[b], cu[b + 1]) from int32 prefix sums on the device (segments.py) and
clamp it into the tensors, so bad values cannot make them read or write outside; checking that the values mean
what the caller thinks (a synchronizing read) is the caller's choice, like the padding lengths' check."""

from __future__ import annotations

from dataclasses import dataclass

from frost.errors import TensorError
from frost.limits import MAX_SEQ


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
    segment within max_seqlen, and every seqused lies in [0, its segment] (host_checks.check_cu_seqlens_host);
    every value is read back in one device-to-host transfer."""
    import torch

    from frost.kernels.host_checks import check_cu_seqlens_host

    sides = [("q", packed.cu_seqlens_q, seqused_q, tokens_q, packed.max_seqlen_q),
             ("kv", packed.cu_seqlens_kv, seqused_kv, tokens_kv, packed.max_seqlen_kv)]
    parts = [x.reshape(-1) for _, cu, used, _, _ in sides for x in (cu, used) if x is not None]
    host = torch.cat(parts).to(device="cpu", dtype=torch.int64)
    at = 0
    for side, cu, used, total, longest in sides:
        cu_host = host[at:at + cu.numel()]
        at += cu.numel()
        used_host = None if used is None else host[at:at + used.numel()]
        at += 0 if used is None else used.numel()
        check_cu_seqlens_host(f"cu_seqlens_{side}", cu_host, total, longest, used_host, f"seqused_{side}",
                              max_seqlen_name=f"max_seqlen_{side}")


def check_packed_side(packed, device, tokens_q: int, tokens_kv: int) -> None:
    """The segments' tensors (prefix sums int32 (B + 1,) on ``device``), the max_seqlens (ints in [0, MAX_SEQ]) and
    the token counts (below 2**31: the kernels take them as int32) of a packed call, forward or backward (its
    seqused tensors are optional inputs: host_checks.check_optional_tensors)."""
    import torch

    from frost.kernels.host_checks import check_side_tensor

    batch = packed.batch
    for name, t in (("cu_seqlens_q", packed.cu_seqlens_q), ("cu_seqlens_kv", packed.cu_seqlens_kv)):
        check_side_tensor(name, t, (batch + 1,), torch.int32, device)
    for name, n in (("max_seqlen_q", packed.max_seqlen_q), ("max_seqlen_kv", packed.max_seqlen_kv)):
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_SEQ:
            raise TensorError(name, n, f"an int in [0, {MAX_SEQ}]")
    for name, n in (("tokens_q", tokens_q), ("tokens_kv", tokens_kv)):
        if n >= 2 ** 31:
            raise TensorError(name, n, "fewer than 2**31 tokens")

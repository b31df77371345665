"""Host-side checks shared by every kernel family's launcher: the io tensors' metadata, the optional tensors
frost.spec declares (their dtype and shape rule read from it), the per-batch length values and a packed call's
prefix sums. Which shapes a call's io tensors must have is each family's (their layouts differ)."""

from __future__ import annotations

from frost import spec
from frost.errors import TensorError
from frost.limits import STRIDE_ALIGN_BYTES, strides_aligned
from frost.spec import gqa_accepted, heads_divide


def check_side_tensor(name: str, t, shape: tuple, dtype, device, contiguous: bool = True) -> None:
    """``t`` is a tensor of ``shape`` and ``dtype`` on ``device``, densely strided unless ``contiguous`` is False."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TensorError(name, type(t).__name__, f"a {dtype} tensor of shape {shape} on {device}")
    _check_meta(name, t, shape, dtype, device)
    if contiguous and t.numel() > 1 and t.stride(0) != 1:
        raise TensorError(f"{name}.stride", t.stride(), "contiguous")


def check_optional_tensors(kind: spec.Kind, t, dims: dict[str, int], packed: bool, device) -> None:
    """Every optional tensor frost.spec declares for an op of ``kind`` (lengths, sink, dlse; a backward's dsink)
    that ``t`` holds in its ``optional`` map (role -> tensor), against the spec's dtype and shape (``dims``: the call's
    sizes by the spec's letters, B, Hq, Sq or Tq); a gradient output is given exactly when its input is."""
    import torch

    for role in spec.TENSORS:
        if not role.optional or (kind not in role.reads and kind not in role.writes):
            continue
        x = t.optional.get(role.role)
        shape = role.extents(dims, packed)
        dtype = getattr(torch, role.dtype)      # the optional tensors are float32 or int32, never io
        if role.grad_of and (x is None) != (t.optional.get(role.grad_of) is None):
            raise TensorError(role.role, None if x is None else "a tensor",
                              f"a {dtype} {shape} output exactly when {role.grad_of} is given")
        if x is not None:
            check_side_tensor(role.role, x, shape, dtype, device, contiguous=len(shape) == 1)


def check_heads(name: str, heads: int, heads_kv: int) -> None:
    """The GQA rule of frost.spec on a kernel call's head counts (a call without query heads computes nothing)."""
    if heads and not heads_divide(heads, heads_kv):
        raise TensorError(name, heads_kv, gqa_accepted(heads))


def check_io_tensor(name: str, t, shape: tuple, dtype, device) -> None:
    """One io tensor of a kernel call: its shape, dtype and device, a contiguous head dim (the last), the other
    strides and the base address on frost.limits' 16-byte rule (what the 16-byte copies need)."""
    _check_meta(name, t, shape, dtype, device)
    if t.numel() and (t.stride(-1) != 1 or not strides_aligned(tuple(t.shape), tuple(t.stride()), t.element_size())
                      or t.data_ptr() % STRIDE_ALIGN_BYTES):
        raise TensorError(f"{name}.stride", t.stride(), f"stride 1 on the head dim, the other strides multiples of "
                          f"{STRIDE_ALIGN_BYTES} bytes, and a {STRIDE_ALIGN_BYTES}-byte aligned base address")


def _check_meta(name: str, t, shape: tuple, dtype, device) -> None:
    if tuple(t.shape) != shape:
        raise TensorError(f"{name}.shape", tuple(t.shape), f"{shape}")
    if t.dtype != dtype:
        raise TensorError(f"{name}.dtype", t.dtype, f"{dtype}")
    if t.device != device:
        raise TensorError(f"{name}.device", str(t.device), f"{device} (the device of q)")


def optional_lengths(t) -> tuple:
    """(seq_len_q, seq_len_kv) among a call's optional tensors (None where not given; a packed call's seqused)."""
    return t.optional.get("seq_len_q"), t.optional.get("seq_len_kv")


def check_length_values(seq_len_q, seq_len_kv, seq_q: int, seq_kv: int) -> None:
    """Per-batch lengths must lie in [0, S]: reads them back, so it synchronizes (skip it under graph capture)."""
    for name, t, full in (("seq_len_q", seq_len_q, seq_q), ("seq_len_kv", seq_len_kv, seq_kv)):
        if t is not None and t.numel() and (int(t.min()) < 0 or int(t.max()) > full):
            raise TensorError(name, t.tolist(), f"lengths in [0, {full}]")


def check_cu_seqlens(name: str, cu, total: int, max_seqlen: int, seqused=None, seqused_name: str | None = None,
                     *, max_seqlen_name: str | None = None) -> None:
    """Packed-sequence offsets ``cu`` (int32 (B+1,)) and optional per-sequence valid lengths ``seqused`` (int32 (B,))
    describe segments inside a tensor of ``total`` tokens: cu[0] = 0, non-decreasing, cu[-1] <= total, every
    segment <= ``max_seqlen``, every seqused in [0, its segment]. Reads the values back once (it synchronizes: skip it
    under graph capture); a TensorError names the argument and the first bad index."""
    import torch

    both = cu if seqused is None else torch.cat((cu.reshape(-1), seqused.reshape(-1)))
    host = both.to(device="cpu", dtype=torch.int64)
    cu_host, used_host = host[:cu.numel()], (None if seqused is None else host[cu.numel():])
    check_cu_seqlens_host(name, cu_host, total, max_seqlen, used_host, seqused_name, max_seqlen_name=max_seqlen_name)


def check_cu_seqlens_host(name: str, cu, total: int, max_seqlen: int, seqused=None, seqused_name: str | None = None,
                          *, max_seqlen_name: str | None = None) -> None:
    """check_cu_seqlens on values already on the host (int64 CPU tensors), so a caller can read several sides back in
    one transfer."""
    max_name = max_seqlen_name or (name.replace("cu_seqlens", "max_seqlen") if "cu_seqlens" in name else "max_seqlen")
    if cu.numel() < 1:
        raise TensorError(f"{name}.shape", tuple(cu.shape), "(B + 1,) with B >= 0: cu_seqlens[0] = 0 at least")
    if int(cu[0]) != 0:
        raise TensorError(f"{name}[0]", int(cu[0]), "0 (the first sequence starts at token 0)")
    lengths = cu[1:] - cu[:-1]
    b = _first(lengths < 0)
    if b is not None:
        raise TensorError(f"{name}[{b + 1}]", int(cu[b + 1]),
                          f">= {name}[{b}] = {int(cu[b])} (offsets never decrease)")
    if int(cu[-1]) > total:
        raise TensorError(f"{name}[{cu.numel() - 1}]", int(cu[-1]),
                          f"<= {total}, the number of tokens of the packed tensor")
    b = _first(lengths > min(max_seqlen, total))   # no segment passes total: the comparison stays in int64
    if b is not None:
        raise TensorError(f"{name}[{b + 1}] - {name}[{b}]", int(lengths[b]),
                          f"<= {max_name} = {max_seqlen} (sequence {b} is longer than the longest declared)")
    if seqused is None:
        return
    seqused_name = seqused_name or "seqused"
    if seqused.numel() != lengths.numel():
        raise TensorError(f"{seqused_name}.shape", tuple(seqused.shape),
                          f"({lengths.numel()},), one length per sequence of {name}")
    b = _first((seqused < 0) | (seqused > lengths))
    if b is not None:
        raise TensorError(f"{seqused_name}[{b}]", int(seqused[b]),
                          f"a length in [0, {int(lengths[b])}], the length of sequence {b} in {name}")


def _first(mask):
    """The first index where ``mask`` is True, or None."""
    hits = mask.nonzero()
    return int(hits[0, 0]) if hits.numel() else None

"""Host-side checks shared by every kernel family's launcher: the small side tensors (lengths, sink, dsink, dlse)
and the per-batch length values. Kernel tensors are checked by each family, since their layouts differ."""

from __future__ import annotations

from frost.errors import TensorError


def check_side_tensor(name: str, t, shape: tuple, dtype, device, contiguous: bool = True) -> None:
    """``t`` is a tensor of ``shape`` and ``dtype`` on ``device``, densely strided unless ``contiguous`` is False."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TensorError(name, type(t).__name__, f"a {dtype} tensor of shape {shape} on {device}")
    if tuple(t.shape) != shape:
        raise TensorError(f"{name}.shape", tuple(t.shape), f"{shape}")
    if t.dtype != dtype:
        raise TensorError(f"{name}.dtype", t.dtype, f"{dtype}")
    if t.device != device:
        raise TensorError(f"{name}.device", str(t.device), f"{device} (the device of q)")
    if contiguous and t.numel() > 1 and t.stride(0) != 1:
        raise TensorError(f"{name}.stride", t.stride(), "contiguous")


def check_length_values(seq_len_q, seq_len_kv, seq_q: int, seq_kv: int) -> None:
    """Per-batch lengths must lie in [0, S]: reads them back, so it synchronizes (skip it under graph capture)."""
    for name, t, full in (("seq_len_q", seq_len_q, seq_q), ("seq_len_kv", seq_len_kv, seq_kv)):
        if t is not None and t.numel() and (int(t.min()) < 0 or int(t.max()) > full):
            raise TensorError(name, t.tolist(), f"lengths in [0, {full}]")

"""The forward call's tensor checks: every argument named as the caller spelled it, with its value and what is
accepted (frost.errors.TensorError), before anything is launched."""

from __future__ import annotations

from frost.errors import TensorError
from frost.kernels.host_checks import check_side_tensor
from frost.limits import MAX_SEQ


def check_forward_tensors(cfg, q, k, v, o, lse, seq_len_q, seq_len_kv, sink) -> tuple[int, int, int, int, int]:
    """(batch, heads, heads_kv, seq_q, seq_kv) of a valid call; raises TensorError otherwise."""
    import torch

    for name, t in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse)):
        if not isinstance(t, torch.Tensor):
            raise TensorError(name, type(t).__name__, "a torch.Tensor")
    if q.dim() != 4:
        raise TensorError("q.shape", tuple(q.shape), "4 dims (B, Hq, Sq, Dqk), logical BHSD")
    batch, heads, seq_q, dqk = q.shape
    if k.dim() != 4:
        raise TensorError("k.shape", tuple(k.shape), "4 dims (B, Hkv, Skv, Dqk), logical BHSD")
    heads_kv, seq_kv = k.shape[1], k.shape[2]
    if dqk != cfg.head_dim_qk:
        raise TensorError("q.shape[3]", dqk, f"{cfg.head_dim_qk} (this kernel's head_dim_qk)")
    want = {"q": (q, (batch, heads, seq_q, dqk)), "k": (k, (batch, heads_kv, seq_kv, dqk)),
            "v": (v, (batch, heads_kv, seq_kv, cfg.head_dim_v)), "o": (o, (batch, heads, seq_q, cfg.head_dim_v))}
    tdtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[cfg.dtype]
    for name, (t, shape) in want.items():
        _check_io(name, t, shape, tdtype, q.device)
    if heads_kv == 0 and heads or heads_kv and heads % heads_kv:
        raise TensorError("k.shape[1]", heads_kv, f"a divisor of the query heads {heads} (GQA/MQA)")
    for name, n in (("q.shape[2] (seq_q)", seq_q), ("k.shape[2] (seq_kv)", seq_kv)):
        if n > MAX_SEQ:
            raise TensorError(name, n, f"at most {MAX_SEQ}")
    if tuple(lse.shape) != (batch, heads, seq_q) or lse.dtype != torch.float32 or lse.device != q.device:
        raise TensorError("lse", f"{lse.dtype} {tuple(lse.shape)} on {lse.device}",
                          f"torch.float32 {(batch, heads, seq_q)} on {q.device}")
    if q.device.type != "cuda":
        raise TensorError("q.device", str(q.device), "a CUDA device (the kernel runs there)")
    for name, t in (("seq_len_q", seq_len_q), ("seq_len_kv", seq_len_kv)):
        if t is not None:
            check_side_tensor(name, t, (batch,), torch.int32, q.device)
    if sink is not None:
        check_side_tensor("sink", sink, (heads,), torch.float32, q.device)
    return batch, heads, heads_kv, seq_q, seq_kv


def _check_io(name: str, t, shape: tuple, dtype, device) -> None:
    if tuple(t.shape) != shape:
        raise TensorError(f"{name}.shape", tuple(t.shape), f"{shape}")
    if t.dtype != dtype:
        raise TensorError(f"{name}.dtype", t.dtype, f"{dtype}")
    if t.device != device:
        raise TensorError(f"{name}.device", str(t.device), f"{device} (the device of q)")
    if t.numel() and (t.stride(3) != 1 or any(s % 8 for s in t.stride()[:3]) or t.data_ptr() % 16):
        raise TensorError(f"{name}.stride", t.stride(), "stride 1 on the head dim, the other strides multiples of "
                          "8 elements, and a 16-byte aligned base address")

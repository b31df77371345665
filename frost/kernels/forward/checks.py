"""The checks of the forward's public host entry (CompiledForward): a call's tensors, each argument named as the
caller spelled it, with its value and what is accepted (frost.errors.TensorError), before anything is launched;
and the scale a launch is bound with. The engine's calls skip the tensor checks (the lowering's executor checks
them against the plan)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frost.errors import TensorError
from frost.kernels.host_checks import (check_heads, check_io_tensor, check_length_values, check_optional_tensors,
                                      optional_lengths)
from frost.kernels.packed import check_packed_side, check_packed_values
from frost.limits import MAX_SEQ
from frost.spec import SCALE_ACCEPTED, valid_scale

if TYPE_CHECKING:
    from frost.kernels.forward.launch import ForwardTensors


def check_call(cfg, t: ForwardTensors, check_lengths: bool = False) -> None:
    """Every tensor of a call (dense or packed, as the config says); with ``check_lengths``, the values of its
    lengths (or its segments) too, which synchronizes."""
    if cfg.varlen:
        check_packed_forward_tensors(cfg, t)
        if check_lengths:
            check_packed_values(t.packed, t.q.shape[1], t.k.shape[1], *optional_lengths(t))
    else:
        _, _, _, seq_q, seq_kv = check_forward_tensors(cfg, t)
        if check_lengths:
            check_length_values(*optional_lengths(t), seq_q, seq_kv)


def check_scale(scale) -> None:
    """The softmax scale a launch is bound with: a number in (0, FP32_MAX] (frost.spec.valid_scale)."""
    if scale is None or not valid_scale(scale):
        raise TensorError("scale", scale, SCALE_ACCEPTED)


def check_forward_tensors(cfg, t: ForwardTensors) -> tuple[int, int, int, int, int]:
    """(batch, heads, heads_kv, seq_q, seq_kv) of a valid dense call; raises TensorError otherwise."""
    import torch

    q, k, v, o, lse = t.q, t.k, t.v, t.o, t.lse
    for name, x in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse)):
        if not isinstance(x, torch.Tensor):
            raise TensorError(name, type(x).__name__, "a torch.Tensor")
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
    for name, (x, shape) in want.items():
        check_io_tensor(name, x, shape, tdtype, q.device)
    check_heads("k.shape[1]", heads, heads_kv)
    for name, n in (("q.shape[2] (seq_q)", seq_q), ("k.shape[2] (seq_kv)", seq_kv)):
        if n > MAX_SEQ:
            raise TensorError(name, n, f"at most {MAX_SEQ}")
    if tuple(lse.shape) != (batch, heads, seq_q) or lse.dtype != torch.float32 or lse.device != q.device:
        raise TensorError("lse", f"{lse.dtype} {tuple(lse.shape)} on {lse.device}",
                          f"torch.float32 {(batch, heads, seq_q)} on {q.device}")
    if q.device.type != "cuda":
        raise TensorError("q.device", str(q.device), "a CUDA device (the kernel runs there)")
    check_optional_tensors("forward", t, {"B": batch, "Hq": heads, "Sq": seq_q}, False, q.device)
    return batch, heads, heads_kv, seq_q, seq_kv


def check_packed_forward_tensors(cfg, t: ForwardTensors) -> None:
    """A packed call's checks: q, k, v, o logical (H, T, D) in the io dtype, lse (Hq, Tq) fp32 (either memory
    order), the segments' prefix sums int32 (B + 1,) and seqused (B,) on q's device; raises TensorError."""
    import torch

    q, k, v, o, lse, packed = t.q, t.k, t.v, t.o, t.lse, t.packed
    if packed is None:
        raise TensorError("packed", None, "the segments (kernels.packed.Packed) of a varlen kernel's call")
    for name, x in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse)):
        if not isinstance(x, torch.Tensor):
            raise TensorError(name, type(x).__name__, "a torch.Tensor")
    if q.dim() != 3 or k.dim() != 3:
        raise TensorError("q.shape, k.shape", (tuple(q.shape), tuple(k.shape)), "3 dims each, logical (H, T, D)")
    heads, tokens_q, dqk = q.shape
    heads_kv, tokens_kv = k.shape[:2]
    if dqk != cfg.head_dim_qk:
        raise TensorError("q.shape[2]", dqk, f"{cfg.head_dim_qk} (this kernel's head_dim_qk)")
    tdtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[cfg.dtype]
    want = {"q": (q, (heads, tokens_q, dqk)), "k": (k, (heads_kv, tokens_kv, dqk)),
            "v": (v, (heads_kv, tokens_kv, cfg.head_dim_v)), "o": (o, (heads, tokens_q, cfg.head_dim_v))}
    for name, (x, shape) in want.items():
        check_io_tensor(name, x, shape, tdtype, q.device)
    check_heads("k.shape[0]", heads, heads_kv)
    if tuple(lse.shape) != (heads, tokens_q) or lse.dtype != torch.float32 or lse.device != q.device:
        raise TensorError("lse", f"{lse.dtype} {tuple(lse.shape)} on {lse.device}",
                          f"torch.float32 {(heads, tokens_q)} on {q.device}")
    if q.device.type != "cuda":
        raise TensorError("q.device", str(q.device), "a CUDA device (the kernel runs there)")
    check_packed_side(packed, q.device, tokens_q, tokens_kv)
    check_optional_tensors("forward", t, {"B": packed.batch, "Hq": heads, "Tq": tokens_q}, True, q.device)

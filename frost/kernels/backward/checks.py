"""The checks of the backward's public host entry (CompiledBackward): a call's tensors, its workspace and its
optional inputs, each argument named as the caller spelled it, with its value and what is accepted
(frost.errors.TensorError), before anything is launched; and the limits of a problem, checked once when a launch
is bound. The engine's calls skip the tensor checks (the lowering's executor checks them against the plan) but
not the problem's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frost import limits
from frost.errors import TensorError
from frost.kernels.host_checks import (check_heads, check_io_tensor, check_length_values, check_optional_tensors,
                                      optional_lengths)
from frost.kernels.packed import check_packed_side, check_packed_values

if TYPE_CHECKING:
    from frost.kernels.backward.launch import BackwardTensors, Problem

MAX_SEQ_STRIDE = limits.SEQ_STRIDE_LIMIT  # elements: a query tile's rows (up to 128) are addressed in 32 bits


def check_io(cfg, t: BackwardTensors) -> tuple[int, int, int, int, int, int, int]:
    """(batch, heads, heads_kv, seq_q, seq_kv, tokens_q, tokens_kv) of a call whose io tensors are valid. Dense
    tensors are logical (B, H, S, D); a packed (varlen) config's are (H, T, D), lse (Hq, Tq), seq_* its
    max_seqlens."""
    import torch

    q, k, packed = t.q, t.k, t.packed
    if cfg.key.varlen != (packed is not None):
        raise TensorError("packed", packed, "the segments exactly when the config is a varlen one "
                          f"(varlen={cfg.key.varlen})")
    rank = 3 if packed is not None else 4
    if q.dim() != rank or k.dim() != rank:
        raise TensorError("q.shape, k.shape", (tuple(q.shape), tuple(k.shape)), f"{rank} dims each")
    lead, (heads, seq_q, dqk) = tuple(q.shape[:-3]), q.shape[-3:]
    heads_kv, seq_kv = k.shape[-3], k.shape[-2]
    want = {"q": (q, lead + (heads, seq_q, dqk)), "k": (k, lead + (heads_kv, seq_kv, dqk)),
            "v": (t.v, lead + (heads_kv, seq_kv, cfg.head_dim_v)), "o": (t.o, lead + (heads, seq_q, cfg.head_dim_v)),
            "do": (t.do, lead + (heads, seq_q, cfg.head_dim_v)), "dq": (t.dq, tuple(q.shape)),
            "dk": (t.dk, tuple(k.shape)), "dv": (t.dv, tuple(t.v.shape))}
    tdtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[cfg.dtype]
    if dqk != cfg.head_dim_qk:
        raise TensorError(f"q.shape[{rank - 1}]", dqk, f"{cfg.head_dim_qk} (this kernel set's head_dim_qk)")
    for name, (x, shape) in want.items():
        _check_io(name, x, shape, tdtype, q.device)
    lse = t.lse
    if tuple(lse.shape) != lead + (heads, seq_q) or lse.dtype != torch.float32 or lse.device != q.device:
        raise TensorError("lse", f"{lse.dtype} {tuple(lse.shape)} on {lse.device}",
                          f"torch.float32 {lead + (heads, seq_q)} on {q.device}")
    if q.device.type != "cuda":
        raise TensorError("q.device", str(q.device), "a CUDA device (the kernels run there)")
    tokens_q = tokens_kv = 0
    batch = lead[0] if lead else packed.batch
    if packed is not None:
        tokens_q, tokens_kv = seq_q, seq_kv
        seq_q, seq_kv = packed.max_seqlen_q, packed.max_seqlen_kv
        check_packed_side(packed, q.device, tokens_q, tokens_kv)
    return batch, heads, heads_kv, seq_q, seq_kv, tokens_q, tokens_kv


def check_workspace(workspace: dict, regions: list[tuple[str, int]], device) -> None:
    """Every region of api.workspace_regions present, large enough, 16-byte aligned and on ``device``."""
    for name, nbytes in regions:
        x = workspace.get(name)
        need = max(nbytes, 16)
        if x is None or x.numel() * x.element_size() < need or x.data_ptr() % 16 or x.device != device:
            got = None if x is None else f"{x.numel() * x.element_size()} bytes on {x.device}"
            raise TensorError(f"workspace[{name!r}]", got, f">= {need} bytes, 16-byte aligned, on {device}")


def check_side_inputs(t: BackwardTensors, sizes: tuple, check_lengths: bool = False) -> None:
    """The optional runtime tensors of a call whose io tensors have ``sizes`` (check_io's); with
    ``check_lengths``, the values of its lengths (or a packed call's segments) too, which synchronizes."""
    batch, heads, _, seq_q, seq_kv, tokens_q, tokens_kv = sizes
    packed = t.packed is not None
    dims = {"B": batch, "Hq": heads, "Sq": seq_q, "Tq": tokens_q}
    check_optional_tensors("backward", t, dims, packed, t.q.device)
    if check_lengths and packed:
        check_packed_values(t.packed, tokens_q, tokens_kv, *optional_lengths(t))
    elif check_lengths:
        check_length_values(*optional_lengths(t), seq_q, seq_kv)


def check_problem(cfg, p: Problem) -> None:
    """What depends only on the problem (GQA group, sequence limits), checked once when a launch is bound."""
    check_heads("k.shape[1]", p.heads, p.heads_kv)
    limit_q = limits.max_seq_q(cfg.head_dim_qk)
    if cfg.key.varlen and limits.packed_acc_rows(p.tokens_q, p.batch) > limit_q:
        raise TensorError("q.shape[0] (tokens_q)", p.tokens_q, f"fewer packed rows at head dim "
                          f"{cfg.head_dim_qk} (32-bit offsets into one head's fp32 dQ accumulator of "
                          f"{limit_q} rows)")
    if p.seq_q > limit_q:
        raise TensorError("q.shape[2] (seq_q)", p.seq_q, f"at most {limit_q} at head dim {cfg.head_dim_qk} "
                          "(32-bit offsets into one head's fp32 dQ accumulator)")
    if p.seq_kv > limits.MAX_SEQ:
        raise TensorError("k.shape[2] (seq_kv)", p.seq_kv, f"at most {limits.MAX_SEQ}")


def _check_io(name: str, t, shape: tuple, dtype, device) -> None:
    """host_checks.check_io_tensor, and (q, do) a token stride the kernels address in 32 bits."""
    check_io_tensor(name, t, shape, dtype, device)
    if name in ("q", "do") and t.stride(-2) >= MAX_SEQ_STRIDE:
        raise TensorError(f"{name}.stride", t.stride(), f"a sequence stride (dim {t.dim() - 2}) below "
                          f"{MAX_SEQ_STRIDE} elements (the kernels address a query tile's rows in 32 bits)")

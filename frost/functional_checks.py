"""Checks of a functional call (frost.sdpa_backward, frost.attention) in the caller's terms.

Every message names the parameter as the caller spelled it (``out``, ``dout``, ``softmax_scale``), gives shapes
in the caller's layout (B, S, H, D), and says what is accepted. Tensors are keyed by the IR's role names (``o``,
``do``); CALLER_NAMES maps them back. These run when a call's plan (or a forward's key) is first seen, so the hot
path pays nothing for them."""

from __future__ import annotations

import math
import re
from numbers import Real

import torch

from frost.errors import FrostError, TensorError

CALLER_NAMES = {"o": "out", "do": "dout"}
ALIGNMENTS = ("top_left", "bottom_right")
IO_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_ROLE_WORD = re.compile(r"\b(do|o)\b")


def caller_name(role: str) -> str:
    return CALLER_NAMES.get(role, role)


def check_options(softmax_scale, causal_alignment) -> None:
    """The scalar options a plan key holds as given; bool options and window_size are checked per call."""
    if softmax_scale is not None:
        if isinstance(softmax_scale, bool) or not isinstance(softmax_scale, Real) \
                or not (math.isfinite(softmax_scale) and softmax_scale > 0):
            raise TensorError("softmax_scale", softmax_scale, "None (1/sqrt(head dim of q)) or a finite float > 0")
    if causal_alignment not in ALIGNMENTS:
        raise TensorError("causal_alignment", causal_alignment, " or ".join(repr(a) for a in ALIGNMENTS))


def check_tensors(t: dict[str, torch.Tensor]) -> None:
    """Devices, dtypes and (B, S, H, D) shapes of every tensor a call passes, keyed by role (q, k, v, o, do, lse,
    sink, dlse, seq_len_q, seq_len_kv); o, do and lse may be absent (a forward's check)."""
    check_devices(t, caller_name)
    check_dtypes(t, caller_name)
    _check_shapes(t)
    check_strides(t, caller_name)


def check_devices(t: dict[str, torch.Tensor], name_of) -> None:
    """Every tensor on q's device (``name_of(role)``: the caller's name of a role)."""
    q = t["q"]
    for role, x in t.items():
        if x.device != q.device:
            raise TensorError(f"{name_of(role)}.device", str(x.device),
                              f"{q.device} (the device of q; one device per call)")


def check_strides(t: dict[str, torch.Tensor], name_of) -> None:
    """No broadcast (stride 0) and no overlapping strides on any tensor."""
    for role, x in t.items():
        if x.numel() and any(st == 0 and n > 1 for st, n in zip(x.stride(), x.shape)):
            raise TensorError(f"{name_of(role)}.stride()", x.stride(),
                              "stride 0 only on dims of extent 1 (a broadcast view: pass .contiguous())")
        if x.numel() and _overlaps(tuple(x.shape), x.stride()):
            raise TensorError(f"{name_of(role)}.stride()", x.stride(),
                              f"strides whose elements do not overlap for shape {tuple(x.shape)} (pass .contiguous())")


def _overlaps(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether two indices of a tensor reach one element: sorted by stride, each dim must step past the span of
    the dims inside it."""
    dims = sorted((st, n) for st, n in zip(strides, shape) if n > 1)
    span = 1
    for st, n in dims:
        if st < span:
            return True
        span = st * n
    return False


SIDE_DTYPES = {"lse": torch.float32, "sink": torch.float32, "dlse": torch.float32, "seq_len_q": torch.int32,
               "seq_len_kv": torch.int32}


def check_dtypes(t: dict[str, torch.Tensor], name_of, side_dtypes: dict = SIDE_DTYPES) -> None:
    """q in an io dtype, k, v, out and dout in q's, and each side tensor in its own (``name_of(role)``: the
    caller's name of a role)."""
    q = t["q"]
    if q.dtype not in IO_DTYPES:
        raise TensorError("q.dtype", q.dtype, "torch.float16, torch.bfloat16, torch.float32 or torch.float64")
    for role in ("k", "v", "o", "do"):
        if role in t and t[role].dtype != q.dtype:
            raise TensorError(f"{name_of(role)}.dtype", t[role].dtype,
                              f"{q.dtype} (the dtype of q; one dtype for q, k, v, out, dout)")
    for role, dtype in side_dtypes.items():
        if role in t and t[role].dtype != dtype:
            raise TensorError(f"{name_of(role)}.dtype", t[role].dtype, str(dtype))


def _check_shapes(t: dict[str, torch.Tensor]) -> None:
    q, k = t["q"], t["k"]
    b, sq, hq, dqk = q.shape
    if hq < 1 or dqk < 1:
        raise TensorError("q.shape", tuple(q.shape), "(B, Sq, Hq, Dqk) with Hq >= 1 and Dqk >= 1")
    skv, hkv = k.shape[1], k.shape[2]
    if k.shape[0] != b or k.shape[3] != dqk or hkv < 1 or hq % hkv:
        raise TensorError("k.shape", tuple(k.shape),
                          f"(B, Skv, Hkv, Dqk) = ({b}, Skv, Hkv, {dqk}) with Hkv dividing Hq = {hq} "
                          "(query heads per kv head must be whole)")
    dv = t["v"].shape[3]
    expected = {"v": ((b, skv, hkv, dv), f"(B, Skv, Hkv, Dv) = ({b}, {skv}, {hkv}, Dv >= 1), matching k"),
                "o": ((b, sq, hq, dv), "(B, Sq, Hq, Dv), from q and v"),
                "do": ((b, sq, hq, dv), "(B, Sq, Hq, Dv), the shape of out"),
                "lse": ((b, hq, sq), "(B, Hq, Sq)"), "dlse": ((b, hq, sq), "(B, Hq, Sq), the shape of lse"),
                "sink": ((hq,), "(Hq,), one per query head"),
                "seq_len_q": ((b,), "(B,), one length per batch entry"),
                "seq_len_kv": ((b,), "(B,), one length per batch entry")}
    for role, (shape, meaning) in expected.items():
        if role in t and (tuple(t[role].shape) != shape or (role == "v" and dv < 1)):
            raise TensorError(f"{caller_name(role)}.shape", tuple(t[role].shape), f"{shape} = {meaning}")


def is_empty(q: torch.Tensor, k: torch.Tensor) -> bool:
    """B = 0, Sq = 0 or Skv = 0: a problem with nothing to compute (outputs and gradients are empty or zero)."""
    return q.shape[0] == 0 or q.shape[1] == 0 or k.shape[1] == 0


def in_caller_terms(exc: FrostError) -> FrostError:
    """An internal error raised by the IR or an engine, renamed to the caller's parameters (o -> out, do -> dout,
    attn_scale -> softmax_scale, band -> window_size); the original stays chained as __cause__."""
    subject = getattr(exc, "subject", None)
    if subject is None:
        return exc
    subject = _ROLE_WORD.sub(lambda m: CALLER_NAMES[m.group(1)], subject)
    for internal, spelled in (("attn_scale", "softmax_scale"), ("band_left", "window_size[0]"),
                              ("band_right", "window_size[1]"), ("alignment", "causal_alignment")):
        subject = subject.replace(internal, spelled)
    translated = TensorError(subject, exc.value, exc.accepted)
    translated.__cause__ = exc
    return translated


__all__ = ["CALLER_NAMES", "check_options", "check_tensors", "in_caller_terms", "is_empty"]

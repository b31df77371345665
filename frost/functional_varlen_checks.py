"""Checks of a packed (varlen) call (frost.sdpa_forward_varlen, frost.sdpa_backward_varlen, frost.attention_varlen)
in the caller's terms.

Tensors are keyed by the IR's role names (``o``, ``do``, ``seq_len_q``); messages use the caller's (``out``,
``dout``, ``seqused_q``) and the caller's packed shapes: q (Tq, Hq, Dqk), k (Tkv, Hkv, Dqk), v (Tkv, Hkv, Dv), out
and dout (Tq, Hq, Dv), lse and dlse (Hq, Tq) in either memory order, cu_seqlens (B + 1,), seqused (B,). The metadata
checks run when a call's plan is first built; the value check (check_packed_values) runs on every call unless
FROST_CHECK_SEQ_LENS=0 or a CUDA graph is being captured."""

from __future__ import annotations

import operator
import re

import torch

from frost.errors import FrostError, TensorError
from frost.functional_checks import SIDE_DTYPES as DENSE_SIDE_DTYPES
from frost.functional_checks import check_devices, check_dtypes, check_strides, in_caller_terms

VARLEN_CALLER_NAMES = {"o": "out", "do": "dout", "seq_len_q": "seqused_q", "seq_len_kv": "seqused_kv"}
TOKEN_ROLES = ("q", "k", "v", "o", "do", "dq", "dk", "dv")   # (T, H, D) in the caller's memory, (H, T, D) logical
SIDE_DTYPES = {**DENSE_SIDE_DTYPES, "cu_seqlens_q": torch.int32, "cu_seqlens_kv": torch.int32}
_SEQ_LEN_WORD = re.compile(r"\bseq_len_(q|kv)\b")


def varlen_name(role: str) -> str:
    return VARLEN_CALLER_NAMES.get(role, role)


def check_max_seqlen(name: str, value) -> int:
    """A host int >= 0 (a Python or numpy integer; never a bool, a float or a tensor). A symbolic int of a
    torch.compile trace passes as it is (checked when the op runs)."""
    if isinstance(value, torch.SymInt):
        return value
    try:
        if isinstance(value, (bool, torch.Tensor)):   # a tensor would be read back (a sync): the caller holds the int
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise TensorError(name, value, "a host int >= 0, the longest sequence (it sizes the grid)") from None
    if value < 0:
        raise TensorError(name, value, "a host int >= 0, the longest sequence (it sizes the grid)")
    return value


def check_varlen_tensors(t: dict[str, torch.Tensor]) -> None:
    """Types, devices, dtypes, shapes and strides of every tensor of a packed call, keyed by role (q, k, v,
    cu_seqlens_q, cu_seqlens_kv and any of o, do, lse, dlse, sink, seq_len_q, seq_len_kv)."""
    for role, x in t.items():
        if not isinstance(x, torch.Tensor):
            raise TensorError(varlen_name(role), type(x).__name__, "a torch.Tensor")
    check_devices(t, varlen_name)
    check_dtypes(t, varlen_name, SIDE_DTYPES)
    _check_shapes(t)
    check_strides(t, varlen_name)


def _check_shapes(t: dict[str, torch.Tensor]) -> None:
    q, k, v = t["q"], t["k"], t["v"]
    for role in ("q", "k", "v", "o", "do"):
        if role in t and t[role].dim() != 3:
            raise TensorError(f"{varlen_name(role)}.shape", tuple(t[role].shape),
                              "rank 3: (T, H, D), the tokens of every sequence packed on the first axis")
    tq, hq, dqk = q.shape
    if hq < 1 or dqk < 1:
        raise TensorError("q.shape", tuple(q.shape), "(Tq, Hq, Dqk) with Hq >= 1 and Dqk >= 1")
    tkv, hkv = k.shape[0], k.shape[1]
    if k.shape[2] != dqk or hkv < 1 or hq % hkv:
        raise TensorError("k.shape", tuple(k.shape), f"(Tkv, Hkv, Dqk) = (Tkv, Hkv, {dqk}) with Hkv dividing Hq = "
                          f"{hq} (query heads per kv head must be whole)")
    dv = v.shape[2]
    batch = _batch(t)
    expected = {"v": ((tkv, hkv, dv), f"(Tkv, Hkv, Dv) = ({tkv}, {hkv}, Dv >= 1), matching k"),
                "o": ((tq, hq, dv), "(Tq, Hq, Dv), from q and v"),
                "do": ((tq, hq, dv), "(Tq, Hq, Dv), the shape of out"),
                "lse": ((hq, tq), "(Hq, Tq), head-major or token-major in memory (a (Tq, Hq) buffer: pass "
                                  "lse.t())"),
                "dlse": ((hq, tq), "(Hq, Tq), the shape of lse, either memory order"),
                "sink": ((hq,), "(Hq,), one per query head"),
                "seq_len_q": ((batch,), "(B,), one valid length per sequence of cu_seqlens_q"),
                "seq_len_kv": ((batch,), "(B,), one valid length per sequence of cu_seqlens_kv")}
    for role, (shape, meaning) in expected.items():
        if role in t and (tuple(t[role].shape) != shape or (role == "v" and dv < 1)):
            raise TensorError(f"{varlen_name(role)}.shape", tuple(t[role].shape), f"{shape} = {meaning}")


def _batch(t: dict[str, torch.Tensor]) -> int:
    """B from cu_seqlens_q (B + 1,), after checking cu_seqlens_kv has the same extent."""
    cu_q, cu_kv = t["cu_seqlens_q"], t["cu_seqlens_kv"]
    if cu_q.dim() != 1 or cu_q.shape[0] < 1:
        raise TensorError("cu_seqlens_q.shape", tuple(cu_q.shape), "(B + 1,): sequence b owns tokens "
                          "[cu_seqlens_q[b], cu_seqlens_q[b + 1])")
    if tuple(cu_kv.shape) != tuple(cu_q.shape):
        raise TensorError("cu_seqlens_kv.shape", tuple(cu_kv.shape), f"{tuple(cu_q.shape)}, the shape of "
                          "cu_seqlens_q (one kv sequence per query sequence)")
    return cu_q.shape[0] - 1


def value_checks_enabled() -> bool:
    """The padding-length check's switch (on by default; FROST_CHECK_SEQ_LENS=0 and CUDA-graph capture skip it)."""
    from frost.lowering.engines.length_checks import check_seq_len_values

    return check_seq_len_values()


def check_packed_values(t: dict[str, torch.Tensor], max_seqlen_q: int, max_seqlen_kv: int) -> None:
    """cu_seqlens and seqused values of a call's tensors (frost.kernels.packed.check_packed_values)."""
    from frost.kernels import packed

    segments = packed.Packed(t["cu_seqlens_q"], t["cu_seqlens_kv"], max_seqlen_q, max_seqlen_kv)
    packed.check_packed_values(segments, t["q"].shape[0], t["k"].shape[0], t.get("seq_len_q"), t.get("seq_len_kv"))


def varlen_caller_terms(exc: FrostError) -> FrostError:
    """in_caller_terms, and the IR's seq_len_q / seq_len_kv (seqused in a packed op) spelled seqused_q / seqused_kv."""
    translated = in_caller_terms(exc)
    subject = getattr(translated, "subject", None)
    if subject is None or not _SEQ_LEN_WORD.search(subject):
        return translated
    renamed = TensorError(_SEQ_LEN_WORD.sub(r"seqused_\1", subject), translated.value, translated.accepted)
    renamed.__cause__ = exc
    return renamed


__all__ = ["TOKEN_ROLES", "check_max_seqlen", "check_packed_values", "check_varlen_tensors", "value_checks_enabled",
           "varlen_caller_terms", "varlen_name"]

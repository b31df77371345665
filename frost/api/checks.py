"""The checks of a call's tensors in the caller's terms, for dense and packed calls alike: devices, dtypes, shapes
(each dim named, in the caller's layout, read from frost.spec) and strides. Messages name the argument as the
caller spelled it (``out``, ``dout``, ``seqused_q``) and say what is accepted. They run when a call's plan (or a
forward's key) is first seen, so the hot path pays nothing for them."""

from __future__ import annotations

import re

import torch

from frost import spec
from frost.errors import FrostError, TensorError

IO_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
SIDE_DTYPES = {"float32": torch.float32, "int32": torch.int32}
_CHECK_ORDER = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_kv")   # the tensors whose dims the others are read against
_ROLE_WORD = re.compile(r"\b(do|o|seq_len_q|seq_len_kv)\b")
_IR_WORD = re.compile(r"\b(" + "|".join(map(re.escape, spec.IR_NAMES)) + r")\b")


def check_tensors(t: dict[str, torch.Tensor], packed: bool) -> None:
    """Devices, dtypes, shapes and strides of every tensor a call passes, keyed by IR role."""
    check_devices(t, packed)
    check_dtypes(t, packed)
    check_shapes(t, packed)
    check_strides(t, packed)


def check_devices(t: dict[str, torch.Tensor], packed: bool) -> None:
    """Every tensor on q's device (one device per call)."""
    q = t["q"]
    for role, x in t.items():
        if x.device != q.device:
            raise TensorError(f"{spec.caller_name(role, packed)}.device", str(x.device),
                              f"{q.device} (the device of q; one device per call)")


def check_dtypes(t: dict[str, torch.Tensor], packed: bool) -> None:
    """q in an io dtype; the other io tensors in q's; each side tensor in its own (frost.spec)."""
    q = t["q"]
    if q.dtype not in IO_DTYPES:
        raise TensorError("q.dtype", q.dtype, "torch.float16, torch.bfloat16, torch.float32 or torch.float64")
    for role, x in t.items():
        dtype = spec.ROLES[role].dtype
        want = q.dtype if dtype == "io" else SIDE_DTYPES[dtype]
        if x.dtype != want:
            name = spec.caller_name(role, packed)
            raise TensorError(f"{name}.dtype", x.dtype, str(want) if dtype != "io" else
                              f"{q.dtype} (the dtype of q; one dtype for q, k, v, out, dout)")


def check_shapes(t: dict[str, torch.Tensor], packed: bool) -> None:
    """Each tensor's shape against its declared dims (frost.spec), the dims read off q, k, v (and a packed call's
    offsets) first; H and D at least 1, and every kv head serving a whole group of query heads."""
    dims: dict[str, int] = {}
    order = [r for r in _CHECK_ORDER if r in t] + [r for r in t if r not in _CHECK_ORDER]
    for role in order:
        _check_shape(role, t[role], packed, dims)


def _check_shape(role: str, x: torch.Tensor, packed: bool, dims: dict[str, int]) -> None:
    declared = spec.ROLES[role]
    symbols, name, got = declared.shape(packed), declared.name(packed), tuple(x.shape)
    layout = ", ".join(symbols)
    if len(got) != len(symbols):
        raise TensorError(f"{name}.shape", got, f"rank {len(symbols)}: ({layout})" +
                          (", the tokens of every sequence packed on the first axis" if packed and
                           role in spec.IO_ROLES else ""))
    for at, (symbol, extent) in enumerate(zip(symbols, got)):
        why = _mismatch(symbol, extent, dims)
        if why is not None:
            want = ", ".join(_expected(s, n, dims, i == at) for i, (s, n) in enumerate(zip(symbols, got)))
            want += "," if len(got) == 1 else ""   # written like the shape it is compared with: (2,)
            meaning = f", {declared.meaning_in(packed)}" if declared.meaning_in(packed) else ""
            raise TensorError(f"{name}.shape", got, f"({want}) = ({layout}){meaning}: {why}")


def _expected(symbol: str, extent: int, dims: dict[str, int], failed: bool) -> str:
    """One dim of the accepted shape: its value where the other tensors fix it, the symbol where the failed dim
    is fixed by a rule only (Hkv dividing Hq, H >= 1), else the extent as given."""
    if symbol == "B+1":
        return str(dims["B"] + 1) if "B" in dims else symbol if failed else str(extent)
    return str(dims[symbol]) if symbol in dims else symbol if failed else str(extent)


def _mismatch(symbol: str, extent: int, dims: dict[str, int]) -> str | None:
    """Why ``extent`` cannot be dim ``symbol`` (None: it can; it is then bound in ``dims``)."""
    if symbol == "B+1":
        if extent < 1:
            return "B + 1 >= 1 offsets (cu_seqlens[0] = 0 at least)"
        symbol, extent = "B", extent - 1
    if symbol in dims:
        return None if dims[symbol] == extent else f"{symbol} = {dims[symbol]}"
    if symbol in ("Hq", "Dqk", "Dv") and extent < 1:
        return f"{symbol} >= 1"
    if symbol == "Hkv" and not spec.heads_divide(dims.get("Hq", extent), extent):
        return f"Hkv {spec.gqa_accepted(dims.get('Hq', extent))}"
    dims[symbol] = extent
    return None


def check_strides(t: dict[str, torch.Tensor], packed: bool) -> None:
    """No broadcast (stride 0) and no overlapping strides on any tensor."""
    for role, x in t.items():
        name = spec.caller_name(role, packed)
        if x.numel() and any(st == 0 and n > 1 for st, n in zip(x.stride(), x.shape)):
            raise TensorError(f"{name}.stride()", x.stride(),
                              "stride 0 only on dims of extent 1 (a broadcast view: pass .contiguous())")
        if x.numel() and _overlaps(tuple(x.shape), x.stride()):
            raise TensorError(f"{name}.stride()", x.stride(),
                              f"strides whose elements do not overlap for shape {tuple(x.shape)} (pass .contiguous())")


def _overlaps(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether two indices of a tensor reach one element: sorted by stride, each dim must step past the span of
    the dims inside it."""
    span = 1
    for st, n in sorted((st, n) for st, n in zip(strides, shape) if n > 1):
        if st < span:
            return True
        span = st * n
    return False


def in_caller_terms(exc: FrostError, packed: bool = False) -> FrostError:
    """An internal error raised by the IR or an engine, renamed to the caller's arguments (o -> out, do -> dout,
    attn_scale -> softmax_scale, band_left -> window_size[0]; a packed call's seq_len_q -> seqused_q); the original
    stays chained as __cause__."""
    subject = getattr(exc, "subject", None)
    if subject is None:
        return exc
    subject = _ROLE_WORD.sub(lambda m: spec.caller_name(m.group(1), packed), subject)
    subject = _IR_WORD.sub(lambda m: spec.IR_NAMES[m.group(1)], subject)
    kind = type(exc) if isinstance(exc, TensorError) else TensorError   # an ArgumentTypeError stays one
    translated = kind(subject, exc.value, exc.accepted, getattr(exc, "detail", ""))  # type: ignore[attr-defined]
    translated.__cause__ = exc
    return translated


__all__ = ["check_devices", "check_dtypes", "check_shapes", "check_strides", "check_tensors", "in_caller_terms"]

"""Tensor specs: a name, a logical shape, strides in elements, a dtype, and for a packed (ragged) tensor the offsets
that split its token axis into sequences."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from frost.errors import GraphError

DType = Literal["float16", "bfloat16", "float32", "float64", "int32"]
IO_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")
Layout = Literal["bhsd", "bshd"]

LAYOUTS: tuple[str, ...] = ("bhsd", "bshd")

DTYPE_BYTES: dict[DType, int] = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4}


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of `shape` (the last dim moves fastest)."""
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= max(extent, 1)
    return tuple(reversed(strides))


def layout_strides(shape: tuple[int, ...], layout: Layout, *, ragged: bool = False) -> tuple[int, ...]:
    """Strides of a logical (B, H, S, D) shape stored as `layout` in memory ("bshd" is FlashAttention's). A ragged
    (H, T, D) shape has no B: "bshd" then means the packed THD memory order (token, head, head dim)."""
    if layout not in LAYOUTS:
        raise GraphError("layout", layout, " or ".join(repr(x) for x in LAYOUTS))
    if ragged and layout == "bshd" and len(shape) == 3:
        h, t, d = shape
        return (d, h * d, 1)
    if layout == "bhsd" or len(shape) != 4:
        return contiguous_strides(shape)
    b, h, s, d = shape
    sb, ss, sh, sd = contiguous_strides((b, s, h, d))
    return (sb, sh, ss, sd)


class Ragged(BaseModel):
    """A packed token axis: sequence b owns tokens [offsets[b], offsets[b + 1]) of it. `offsets` names an int32
    (B + 1,) tensor of the graph (FlashAttention's cu_seqlens); `max_len` is the longest sequence (the caller's
    max_seqlen), which sizes a kernel's grid without reading the offsets on the host."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    offsets: str = Field(min_length=1)
    max_len: StrictInt


class TensorSpec(BaseModel):
    """One tensor of the graph. Shapes are logical (B, H, S, D); `strides` default to row-major. A ragged tensor
    (`ragged` set) has no B: its logical shape is (H, T, D) (or (H, T) for an lse), the packed token axis T at
    dim 1."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    shape: tuple[StrictInt, ...]
    strides: tuple[StrictInt, ...] | None = None
    dtype: DType
    ragged: Ragged | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def effective_strides(self) -> tuple[int, ...]:
        return self.strides if self.strides is not None else contiguous_strides(self.shape)

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]


def check_tensor(spec: TensorSpec) -> None:
    """Reject shapes and strides that cannot describe a tensor in memory."""
    subject = f"tensor {spec.name!r}"
    if any(extent < 0 for extent in spec.shape):
        raise GraphError(f"{subject}.shape", spec.shape, "every extent >= 0")
    if spec.ragged is not None:
        _check_ragged(spec, spec.ragged, subject)
    if spec.strides is None:
        return
    if len(spec.strides) != len(spec.shape):
        raise GraphError(f"{subject}.strides", spec.strides, f"one stride per dim ({len(spec.shape)} for shape {spec.shape})")
    if any(s < 0 for s in spec.strides):
        raise GraphError(f"{subject}.strides", spec.strides, "non-negative strides")
    if 0 in spec.shape:   # an empty tensor addresses no element: any non-negative strides describe it
        return
    dims = sorted((s, e) for s, e in zip(spec.strides, spec.shape) if e > 1)
    for (s_in, e_in), (s_out, _) in zip(dims, dims[1:]):
        if s_out < s_in * e_in:
            raise GraphError(
                f"{subject}.strides", spec.strides, f"non-overlapping strides for shape {spec.shape}",
                f"a dim of stride {s_out} overlaps one of stride {s_in} x extent {e_in}",
            )
    if dims and dims[0][0] == 0:
        raise GraphError(f"{subject}.strides", spec.strides, "stride 0 only on dims of extent 1 (no broadcast views)")


def _check_ragged(spec: TensorSpec, ragged: Ragged, subject: str) -> None:
    """A ragged tensor has a token axis at dim 1 (so rank >= 2) and a longest sequence >= 0."""
    if spec.rank < 2:
        raise GraphError(f"{subject}.shape", spec.shape, "rank >= 2 for a ragged tensor, logical (H, T, ...) "
                         "with the packed token axis at dim 1")
    if ragged.max_len < 0:
        raise GraphError(f"{subject}.ragged.max_len", ragged.max_len, "an integer >= 0 (the longest sequence)")

"""Tensor specs: a name, a logical shape, strides in elements, and a dtype."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from frost.errors import GraphError

DType = Literal["float16", "bfloat16", "float32", "float64", "int32"]
IO_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")
Layout = Literal["bhsd", "bshd"]

LAYOUTS: tuple[str, ...] = ("bhsd", "bshd")

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4}


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of `shape` (the last dim moves fastest)."""
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= max(extent, 1)
    return tuple(reversed(strides))


def layout_strides(shape: tuple[int, ...], layout: Layout) -> tuple[int, ...]:
    """Strides of a logical (B, H, S, D) shape stored as `layout` in memory ("bshd" is FlashAttention's)."""
    if layout not in LAYOUTS:
        raise GraphError("layout", layout, " or ".join(repr(x) for x in LAYOUTS))
    if layout == "bhsd" or len(shape) != 4:
        return contiguous_strides(shape)
    b, h, s, d = shape
    sb, ss, sh, sd = contiguous_strides((b, s, h, d))
    return (sb, sh, ss, sd)


class TensorSpec(BaseModel):
    """One tensor of the graph. Shapes are logical (B, H, S, D); `strides` default to row-major."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    shape: tuple[StrictInt, ...]
    strides: tuple[StrictInt, ...] | None = None
    dtype: DType

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
    if any(extent < 1 for extent in spec.shape):
        raise GraphError(f"{subject}.shape", spec.shape, "every extent >= 1")
    if spec.strides is None:
        return
    if len(spec.strides) != len(spec.shape):
        raise GraphError(f"{subject}.strides", spec.strides, f"one stride per dim ({len(spec.shape)} for shape {spec.shape})")
    if any(s < 0 for s in spec.strides):
        raise GraphError(f"{subject}.strides", spec.strides, "non-negative strides")
    dims = sorted((s, e) for s, e in zip(spec.strides, spec.shape) if e > 1)
    for (s_in, e_in), (s_out, _) in zip(dims, dims[1:]):
        if s_out < s_in * e_in:
            raise GraphError(
                f"{subject}.strides", spec.strides, f"non-overlapping strides for shape {spec.shape}",
                f"a dim of stride {s_out} overlaps one of stride {s_in} x extent {e_in}",
            )
    if dims and dims[0][0] == 0:
        raise GraphError(f"{subject}.strides", spec.strides, "stride 0 only on dims of extent 1 (no broadcast views)")

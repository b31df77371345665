"""Capability tables: what each engine serves, as data. The probe, the lowering and the published
support matrix all read these tables, so they cannot disagree."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class HeadDims:
    multiple_of: int = 1
    max: int | None = None


@dataclass(frozen=True)
class Capability:
    engine: str
    targets: tuple[str, ...]                 # "cpu", "sm_90", "sm_120", "sm_121", ...
    dtypes: tuple[str, ...]
    head_dim: HeadDims = field(default_factory=HeadDims)
    dv_le_dqk: bool = False                  # requires head_dim_v <= head_dim_qk
    masks: tuple[str, ...] = ("none", "causal", "band")
    alignments: tuple[str, ...] = ("top_left", "bottom_right")
    gqa: bool = True
    padding: bool = True
    sink: bool = True
    deterministic: bool = True
    needs_head_dim_contiguous: bool = False
    needs_16b_strides: bool = False
    max_smem_bytes: int | None = None
    description: str = ""


REFERENCE = Capability(
    engine="reference", targets=("cpu", "sm_90", "sm_100", "sm_120", "sm_121", "cuda"),
    dtypes=("float16", "bfloat16", "float32", "float64"),
    description="torch math engine: every feature, any device; the CPU default and the fp64 oracle",
)

# Start at what the kernels serve today; widen it only in the change that makes a kernel serve more.
CUTE_SM120 = Capability(
    engine="cute_sm120", targets=("sm_120", "sm_121", "sm_90"),
    dtypes=("float16", "bfloat16"), head_dim=HeadDims(multiple_of=8, max=256), dv_le_dqk=True,
    masks=("none", "causal", "band"), alignments=("top_left", "bottom_right"),
    gqa=True, padding=True, sink=True, deterministic=True,
    needs_head_dim_contiguous=True, needs_16b_strides=True, max_smem_bytes=99 * 1024,
    description="CuTe-DSL mma.sync + ldmatrix kernels for the SM120 class (built for sm_90a on Hopper)",
)

# Preference order: the first engine that does not decline serves the graph.
ENGINES: tuple[Capability, ...] = (CUTE_SM120, REFERENCE)

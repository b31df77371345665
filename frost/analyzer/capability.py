"""Capability tables: what each engine serves, as data. The probe, the lowering and the published
support matrix all read these tables, so they cannot disagree."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class HeadDims:
    multiple_of: int = 1
    max: int | None = None
    pads: tuple[int, ...] = ()   # the widths the engine computes at: a head dim runs padded up to the next one


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
    dlse: bool = True                        # a gradient on the forward's LSE output (dlse input)
    deterministic: bool = True
    needs_head_dim_contiguous: bool = False
    needs_16b_strides: bool = False
    needs_32bit_seq_strides: bool = False    # q's and do's sequence strides below extract.SEQ_STRIDE_LIMIT
    max_smem_bytes: int | None = None
    max_seq: int | None = None               # longest seq_q / seq_kv (None: no limit)
    max_acc_elements: int | None = None      # per-head fp32 dQ accumulator elements, see max_seq_q
    description: str = ""


REFERENCE = Capability(
    engine="reference", targets=("cpu", "sm_90", "sm_100", "sm_120", "sm_121", "cuda"),
    dtypes=("float16", "bfloat16", "float32", "float64"),
    description="torch math engine: every feature, any device; the CPU default and the fp64 oracle",
)

# Start at what the kernels serve today; widen it only in the change that makes a kernel serve more.
CUTE_SM120 = Capability(
    engine="cute_sm120", targets=("sm_120", "sm_121", "sm_90"),
    dtypes=("float16", "bfloat16"), dv_le_dqk=True,
    # the kernels' padded head dims (kernels.tiles.HEAD_DIM_PADS; a test keeps them equal)
    head_dim=HeadDims(multiple_of=8, max=256, pads=(32, 48, 64, 80, 96, 128, 160, 192, 256)),
    masks=("none", "causal", "band"), alignments=("top_left", "bottom_right"),
    gqa=True, padding=True, sink=True, dlse=True, deterministic=True,
    needs_head_dim_contiguous=True, needs_16b_strides=True, needs_32bit_seq_strides=True, max_smem_bytes=99 * 1024,
    # the kernels' mask arithmetic is 32-bit (offsets up to ~2^29), and so are the offsets into one head's fp32
    # dQ accumulator (seq_q rounded up to 128 rows x head dim padded as the kernels pad it: acc_cols)
    max_seq=1 << 28, max_acc_elements=(1 << 31) - 1,
    description="CuTe-DSL mma.sync + ldmatrix kernels for the SM120 class (built for sm_90a on Hopper)",
)

ACC_ROW_PAD = 128   # how cute_sm120 pads the dQ accumulator's rows (kernels.rowwise.SEQ_PAD)
ACC_COL_PADS = CUTE_SM120.head_dim.pads  # ... and its columns: to the kernels' padded head dims


def acc_cols(head_dim_qk: int) -> int:
    """Columns of one row of cute_sm120's fp32 dQ accumulator at this head dim."""
    return next((p for p in ACC_COL_PADS if p >= head_dim_qk), -(-head_dim_qk // 32) * 32)


def max_seq_q(cap: Capability, head_dim_qk: int) -> int | None:
    """The longest query sequence ``cap`` serves at this head dim (None: no limit)."""
    limits = [cap.max_seq] if cap.max_seq is not None else []
    if cap.max_acc_elements is not None:
        cols = acc_cols(head_dim_qk)
        limits.append(cap.max_acc_elements // cols // ACC_ROW_PAD * ACC_ROW_PAD)
    return min(limits) if limits else None


# Preference order: the first engine that does not decline serves the graph.
ENGINES: tuple[Capability, ...] = (CUTE_SM120, REFERENCE)

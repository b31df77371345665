"""Capability tables: what each engine serves, as data, one table per (engine, op kind). The probe, the lowering and
the published support matrix all read these tables, so they cannot disagree."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from frost import limits


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
    ragged: bool = True                      # packed variable-length sequences (ragged tensors over cu_seqlens)
    empty: bool = True                       # problems with nothing to compute (B, Sq or Skv = 0)
    sink: bool = True
    dlse: bool = True                        # a gradient on the forward's LSE output (dlse input)
    deterministic: bool = True
    needs_head_dim_contiguous: bool = False
    needs_16b_strides: bool = False
    needs_32bit_seq_strides: bool = False    # q's and do's sequence strides below limits.SEQ_STRIDE_LIMIT
    max_smem_bytes: int | None = None
    max_seq: int | None = None               # longest seq_q / seq_kv (None: no limit)
    max_acc_elements: int | None = None      # per-head fp32 dQ accumulator elements, see max_seq_q
    description: str = ""
    op: str = "sdpa_backward"                # the op kind this table describes


OP_KINDS: tuple[str, ...] = ("sdpa_backward", "sdpa_forward")

REFERENCE = Capability(
    engine="reference", targets=("cpu", "sm_90", "sm_100", "sm_120", "sm_121", "cuda"),
    dtypes=("float16", "bfloat16", "float32", "float64"),
    description="torch math engine: every feature, any device; the CPU default and the fp64 oracle",
)

# Start at what the kernels serve today; widen it only in the change that makes a kernel serve more.
CUTE_SM120 = Capability(
    engine="cute_sm120", targets=tuple(limits.TARGET_ARCHS),
    dtypes=("float16", "bfloat16"), dv_le_dqk=True,
    head_dim=HeadDims(multiple_of=limits.HEAD_DIM_MULTIPLE, max=limits.HEAD_DIM_MAX, pads=limits.HEAD_DIM_PADS),
    masks=("none", "causal", "band"), alignments=("top_left", "bottom_right"),
    gqa=True, padding=True, ragged=True, empty=False, sink=True, dlse=True, deterministic=True,
    needs_head_dim_contiguous=True, needs_16b_strides=True, needs_32bit_seq_strides=True,
    max_smem_bytes=limits.SMEM_BYTES, max_seq=limits.MAX_SEQ, max_acc_elements=limits.MAX_ACC_ELEMENTS,
    description="CuTe-DSL mma.sync + ldmatrix kernels for the SM120 class (built for sm_90a on Hopper)",
)

# The forward kernel (frost.kernels.forward): no workspace and no dQ accumulator (so no head-dim-dependent sequence
# limit), 64-bit strides (no sequence-stride limit); a forward has no dlse input and no deterministic mode.
CUTE_SM120_FORWARD = replace(
    CUTE_SM120, op="sdpa_forward", dlse=False, deterministic=False, needs_32bit_seq_strides=False,
    max_acc_elements=None,
    description="CuTe-DSL FlashAttention-2-style forward (Q-stationary, online softmax in fp32) for the SM120 class",
)
REFERENCE_FORWARD = replace(REFERENCE, op="sdpa_forward")

ACC_ROW_PAD = limits.SEQ_PAD        # how cute_sm120 pads the dQ accumulator's rows ...
ACC_COL_PADS = limits.HEAD_DIM_PADS  # ... and its columns
acc_cols = limits.acc_cols


def packed_rows_fit(cap: Capability, head_dim_qk: int, tokens_q: int, batch: int) -> bool:
    """Whether a packed problem's dQ accumulator (limits.packed_acc_rows rows per head) fits the engine's per-head
    limit (no limit: True)."""
    if cap.max_acc_elements is None:
        return True
    return limits.packed_acc_rows(tokens_q, batch) <= limits.acc_seq_limit(head_dim_qk, cap.max_acc_elements)


def max_seq_q(cap: Capability, head_dim_qk: int) -> int | None:
    """The longest query sequence ``cap`` serves at this head dim (None: no limit)."""
    limits_q = [cap.max_seq] if cap.max_seq is not None else []
    if cap.max_acc_elements is not None:
        limits_q.append(limits.acc_seq_limit(head_dim_qk, cap.max_acc_elements))
    return min(limits_q) if limits_q else None


# Preference order: the first engine that does not decline serves the op (each engine answers with its table for
# the op's kind).
ENGINES: tuple[Capability, ...] = (CUTE_SM120, CUTE_SM120_FORWARD, REFERENCE, REFERENCE_FORWARD)


def engine_names(engines: tuple[Capability, ...] = ENGINES) -> tuple[str, ...]:
    """The engines of `engines`, once each, in preference order."""
    return tuple(dict.fromkeys(cap.engine for cap in engines))


def op_kinds(engine: str, engines: tuple[Capability, ...] = ENGINES) -> tuple[str, ...]:
    """The op kinds `engine` has a table for."""
    return tuple(cap.op for cap in engines if cap.engine == engine)


def tables_for(op: str, engines: tuple[Capability, ...] = ENGINES) -> tuple[Capability, ...]:
    """One table per engine, in preference order: its table for op kind `op`, or, for an engine without one, its
    first table (which then declines with the op_kind reason)."""
    chosen: dict[str, Capability] = {}
    for cap in engines:
        held = chosen.get(cap.engine)
        if held is None or (held.op != op and cap.op == op):
            chosen[cap.engine] = cap
    return tuple(chosen.values())

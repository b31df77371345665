"""What each engine serves, as data (one Capability table per engine and op kind), and declining as one small
function over it: every rule an engine's table breaks for some Facts, each a Reason with a stable code, the
offending field and value, and what the engine would accept. The probe, the lowering and the published support
matrix all read these tables and RULES, so they cannot disagree and the published codes cannot drift.

Target names have one spelling per target ("sm_90a", "sm_120a" and "sm_120f" name the same hardware as "sm_90" /
"sm_120" for a support question; the suffix only matters to the compiler), and a table entry "cuda" stands for
every CUDA architecture."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable, Union

from pydantic import BaseModel, ConfigDict

from frost import limits
from frost.analyzer.facts import Facts
from frost.errors import TargetError
from frost.limits import SEQ_STRIDE_LIMIT
from frost.spec import INPUT_FEATURES

ANY_CUDA = "cuda"
_SM = re.compile(r"sm_?(\d{2,3})[af]?")
ACCEPTED = "'cpu', 'cuda', or 'sm_<major><minor>' such as 'sm_90', 'sm_120', 'sm_121' (an 'a'/'f' suffix is accepted)"


def normalise_target(target: str) -> str:
    """'SM_120a' -> 'sm_120', 'cpu' -> 'cpu'; anything else raises TargetError."""
    if not isinstance(target, str):
        raise TargetError(target, ACCEPTED)
    name = target.strip().lower()
    if name in ("cpu", ANY_CUDA):
        return name
    m = _SM.fullmatch(name)
    if m is None:
        raise TargetError(target, ACCEPTED)
    return f"sm_{m.group(1)}"


def serves_target(targets: tuple[str, ...], target: str) -> bool:
    """Whether a table's target list covers a normalised target ("cuda" in the list covers every sm_*)."""
    return target in targets or (ANY_CUDA in targets and target.startswith("sm_"))


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


Plain = Union[bool, int, float, str, None]


class Reason(BaseModel):
    """Why one engine cannot serve one op. `code` is stable (match on it); `message` is for people."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    code: str
    field: str          # the Facts field that is out of range ("target" for the probe's target)
    value: Plain
    accepted: str
    message: str


@dataclass(frozen=True)
class Rule:
    code: str
    field: str
    ok: Callable[[Capability, Facts, str], bool]       # (cap, facts, target) -> the engine serves this value
    accepted: Callable[[Capability, Facts], str]       # what the engine would take instead
    doc: str                                           # one line for the support matrix

    def check(self, cap: Capability, facts: Facts, target: str) -> Reason | None:
        if self.ok(cap, facts, target):
            return None
        value = target if self.field == "target" else _read(facts, self.field)
        accepted = self.accepted(cap, facts)
        return Reason(code=self.code, field=self.field, value=value, accepted=accepted,
                      message=f"{self.field}={value!r} is not served by {cap.engine}; accepted: {accepted}")


def _read(facts: Facts, field: str) -> bool | int | float | str | None:
    """A Facts value by its (dotted) field name: "mask.kind" reads facts.mask.kind."""
    value = facts
    for name in field.split("."):
        value = getattr(value, name)
    return value   # type: ignore[return-value]


def _targets(cap: Capability) -> str:
    return ", ".join("any sm_* (cuda)" if t == ANY_CUDA else t for t in cap.targets)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _head_dim_rules(field: str) -> tuple[Rule, ...]:
    return (
        Rule("head_dim_multiple", field,
             lambda c, f, t: getattr(f, field) % c.head_dim.multiple_of == 0,
             lambda c, f: f"a multiple of {c.head_dim.multiple_of} "
                          f"(pad to {_round_up(getattr(f, field), c.head_dim.multiple_of)})",
             f"{field} is not a multiple of the engine's head-dim granule"),
        Rule("head_dim_max", field,
             lambda c, f, t: c.head_dim.max is None or getattr(f, field) <= c.head_dim.max,
             lambda c, f: f"at most {c.head_dim.max}",
             f"{field} is larger than the engine's largest head dim"),
    )


def _asks(field: str) -> Callable[[Facts], bool]:
    return lambda f: getattr(f, field)


def _feature_rule(code: str, field: str, cap_attr: str, accepted: str, doc: str,
                  asks: Callable[[Facts], bool] | None = None) -> Rule:
    """A feature the graph asks for (by default: a true Facts flag) that the table does not offer."""
    asks = asks or _asks(field)
    return Rule(code, field, lambda c, f, t: getattr(c, cap_attr) or not asks(f), lambda c, f: accepted, doc)


def _requirement_rule(code: str, field: str, cap_attr: str, accepted: str, doc: str) -> Rule:
    """A property the table requires of the graph (a Facts flag that must be true)."""
    return Rule(code, field, lambda c, f, t: not getattr(c, cap_attr) or getattr(f, field),
                lambda c, f: accepted, doc)


OP_KIND = Rule("op_kind", "op", lambda c, f, t: c.op == f.op, lambda c, f: c.op,
               "the engine has no table for this op kind (e.g. a forward asked of backward kernels alone)")

RULES: tuple[Rule, ...] = (
    OP_KIND,
    Rule("target", "target", lambda c, f, t: serves_target(c.targets, t), lambda c, f: _targets(c),
         "the engine does not run on the requested target"),
    Rule("dtype", "dtype", lambda c, f, t: f.dtype in c.dtypes, lambda c, f: ", ".join(c.dtypes),
         "the io dtype (q, k, v, o; a backward's do and grads too) is not one the engine computes in"),
    *_head_dim_rules("head_dim_qk"),
    *_head_dim_rules("head_dim_v"),
    Rule("dv_gt_dqk", "head_dim_v", lambda c, f, t: not c.dv_le_dqk or f.head_dim_v <= f.head_dim_qk,
         lambda c, f: f"head_dim_v <= head_dim_qk ({f.head_dim_qk})",
         "the value head dim is larger than the query/key head dim"),
    Rule("mask", "mask.kind", lambda c, f, t: f.mask.kind in c.masks, lambda c, f: ", ".join(c.masks),
         "the mask kind (none, causal, band: sliding window or right-widened causal) is not served"),
    Rule("alignment", "mask.alignment", lambda c, f, t: f.mask.kind == "none" or f.mask.alignment in c.alignments,
         lambda c, f: ", ".join(c.alignments) + " (alignment only matters under a causal or band mask)",
         "the diagonal anchor (top_left / bottom_right) of a causal or band mask is not served"),
    _feature_rule("gqa", "gqa_group", "gqa", "gqa_group=1 (heads_q == heads_kv; repeat k/v heads to get MHA)",
                  "grouped/multi-query attention (heads_q > heads_kv) is not served", asks=lambda f: f.gqa_group > 1),
    *(_feature_rule(f.capability, f.facts, f.capability, f.accepted, f.declined) for f in INPUT_FEATURES),
    _feature_rule("ragged", "varlen", "ragged",
                  "dense (B, H, S, D) tensors without cu_seqlens (pad the packed sequences into a batch)",
                  "packed (ragged) sequences are not served by this engine"),
    _feature_rule("empty", "empty", "empty", "B, Sq and Skv >= 1 (the reference engine serves empty problems)",
                  "a problem with nothing to compute (no batch, query or key) is not launched"),
    _feature_rule("deterministic", "deterministic", "deterministic", "deterministic=False",
                  "a bitwise-deterministic backward is not offered"),
    Rule("seq_len_max", "seq_q", lambda c, f, t: (m := max_seq_q(c, f.head_dim_qk)) is None or f.seq_q <= m,
         lambda c, f: f"at most {max_seq_q(c, f.head_dim_qk)} at head_dim_qk={f.head_dim_qk} (split the sequence)",
         "the query sequence is longer than the engine addresses at this head dim"),
    Rule("seq_len_max", "seq_kv", lambda c, f, t: c.max_seq is None or f.seq_kv <= c.max_seq,
         lambda c, f: f"at most {c.max_seq}", "the key/value sequence is longer than the engine addresses"),
    Rule("seq_len_max", "tokens_q",
         lambda c, f, t: not f.varlen or packed_rows_fit(c, f.head_dim_qk, f.tokens_q, f.batch),
         lambda c, f: f"fewer packed query tokens at head_dim_qk={f.head_dim_qk} (split the packed batch)",
         "the packed query tokens are more than the engine's dQ accumulator addresses at this head dim"),
    _requirement_rule("layout_head_dim", "head_dim_contiguous", "needs_head_dim_contiguous",
                      "every io tensor with stride 1 on its head dim (e.g. BSHD or BHSD)",
                      "some io tensor is not contiguous along its head dim"),
    _requirement_rule("stride_alignment", "strides_16b_aligned", "needs_16b_strides",
                      "every io stride other than the head dim's a multiple of 16 bytes "
                      "(8 fp16/bf16 elements; pad the head dim or the row)",
                      "some io stride is not a multiple of 16 bytes (vectorised / TMA loads need it)"),
    _requirement_rule("seq_stride_max", "seq_strides_32bit", "needs_32bit_seq_strides",
                      f"q's and do's sequence strides below {SEQ_STRIDE_LIMIT} elements",
                      "q's or do's sequence stride is too large (the kernels address a query tile's rows in 32 bits)"),
)

CODES: tuple[str, ...] = tuple(dict.fromkeys(r.code for r in RULES))


def declines(cap: Capability, facts: Facts, target: str, rules: tuple[Rule, ...] = RULES) -> list[Reason]:
    """Every reason `cap`'s engine cannot serve `facts` on `target` (normalised); empty means it can. A table for
    another op kind gives that one reason alone (its other rules describe another op)."""
    wrong_kind = OP_KIND.check(cap, facts, target)
    if wrong_kind is not None:
        return [wrong_kind]
    return [reason for rule in rules if rule is not OP_KIND and (reason := rule.check(cap, facts, target)) is not None]

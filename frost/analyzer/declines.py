"""Declining, as one small function over the capability table: every rule an engine's table breaks for these Facts,
each as a Reason with a stable code, the offending field and value, and what the engine would accept.

Rules are data (RULES); the support matrix prints the same list, so the published codes cannot drift."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from pydantic import BaseModel, ConfigDict

from frost.analyzer.capability import Capability, max_seq_q, packed_rows_fit
from frost.analyzer.facts import Facts
from frost.analyzer.targets import ANY_CUDA, serves_target
from frost.limits import SEQ_STRIDE_LIMIT
from frost.spec import INPUT_FEATURES

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
        value = target if self.field == "target" else getattr(facts, self.field)
        accepted = self.accepted(cap, facts)
        return Reason(code=self.code, field=self.field, value=value, accepted=accepted,
                      message=f"{self.field}={value!r} is not served by {cap.engine}; accepted: {accepted}")


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
    Rule("mask", "mask", lambda c, f, t: f.mask in c.masks, lambda c, f: ", ".join(c.masks),
         "the mask kind (none, causal, band: sliding window or right-widened causal) is not served"),
    Rule("alignment", "alignment", lambda c, f, t: f.mask == "none" or f.alignment in c.alignments,
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

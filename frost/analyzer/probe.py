"""probe(graph, target): the side-effect-free support check, and its answer (SupportReport): which engine serves
each claimed op, every reason every other engine declined, and the ops frost leaves to the caller. Pure Python over
the graph and the capability tables (no torch, no cutlass): unsupported is an answer, only a malformed graph raises.
JSON via model_dump_json(); people read to_text()."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from pydantic import BaseModel, ConfigDict

from frost.analyzer.analysis import Matched, Unclaimed, analyze
from frost.analyzer.capability import ENGINES, Capability, Reason, declines, engine_names, normalise_target, tables_for
from frost.analyzer.facts import Facts
from frost.errors import EngineError
from frost.spec import INPUT_FEATURES

if TYPE_CHECKING:
    from frost.ir import Graph

_FROZEN = ConfigDict(frozen=True, extra="forbid")
REFERENCE_ENGINE = "reference"


class OpSupport(BaseModel):
    """One claimed op. `declined` is vllm-style {engine: [reasons]} for every engine that declines, in preference
    order, including engines after the chosen one (so a user sees what each would need)."""

    model_config = _FROZEN
    name: str
    pattern: str
    engine: Optional[str]           # the first engine in preference order that does not decline; None = none can
    declined: dict[str, tuple[Reason, ...]]
    facts: Facts


class SupportReport(BaseModel):
    """`supported` is True when the graph has at least one claimed op and every claimed op has an engine among
    those `asked` (every engine, or the one a caller pinned); unclaimed ops do not change it: they are the caller's
    to run (they are listed with why)."""

    model_config = _FROZEN
    target: str
    supported: bool
    ops: tuple[OpSupport, ...]
    unclaimed: tuple[Unclaimed, ...]
    asked: tuple[str, ...] = ()     # the engines the probe considered, in preference order

    @property
    def engines(self) -> dict[str, Optional[str]]:
        """op name -> engine chosen (None where no engine serves it)."""
        return {op.name: op.engine for op in self.ops}

    def to_text(self) -> str:
        return render_text(self)


def _facts_line(f: Facts) -> str:
    padding = ",".join(side for side, on in (("q", f.has_padding_q), ("kv", f.has_padding_kv)) if on) or "no"
    padding = f"{'seqused' if f.varlen else 'padding'}={padding}"
    shown = (("varlen", f.varlen), *((t.tag, getattr(f, t.facts)) for t in INPUT_FEATURES if t.capability != "padding"),
             ("deterministic", f.deterministic))
    flags = " ".join(name for name, on in shown if on)
    seqs = (f"Tq={f.tokens_q} Tkv={f.tokens_kv} max_Sq={f.seq_q} max_Skv={f.seq_kv}" if f.varlen
            else f"Sq={f.seq_q} Skv={f.seq_kv}")
    return (f"{f.dtype} B={f.batch} Hq={f.heads_q} Hkv={f.heads_kv} {seqs} "
            f"Dqk={f.head_dim_qk} Dv={f.head_dim_v} mask={f.mask} {padding} layout={f.layout} {flags}").rstrip()


def _summary(r: SupportReport) -> str:
    if not r.ops:
        return "NOT supported: frost claims no op of this graph"
    unserved = [op.name for op in r.ops if op.engine is None]
    if unserved:
        who = f"{r.asked[0]} does not serve " if len(r.asked) == 1 else "no engine serves "
        return "NOT supported: " + who + ", ".join(repr(n) for n in unserved)
    served = f"supported ({len(r.ops)} op{'s' * (len(r.ops) != 1)} claimed)"
    if r.target != "cpu" and len(r.asked) > 1 and all(op.engine == REFERENCE_ENGINE for op in r.ops):
        served += "; by the reference engine only (no GPU kernel serves it; engine cute_sm120 asks the kernels alone)"
    return served


def _heading(r: SupportReport) -> str:
    asked = f" (engine {', '.join(r.asked)})" if len(r.asked) == 1 else ""
    return f"target {r.target}{asked}: {_summary(r)}"


def render_text(r: SupportReport) -> str:
    lines = [_heading(r)]
    for op in r.ops:
        lines.append(f"op {op.name!r} ({op.pattern}) -> {op.engine or 'no engine'}")
        lines.append(f"  {_facts_line(op.facts)}")
        for engine, reasons in op.declined.items():
            lines.append(f"  {engine} declines:")
            lines.extend(f"    [{x.code}] {x.message}" for x in reasons)
    if r.unclaimed:
        lines.append("unclaimed (left to the caller):")
        lines.extend(f"  {u.name!r} ({u.op}): [{u.code}] {u.message}" for u in r.unclaimed)
    return "\n".join(lines)


def engines_named(engine: str | None) -> tuple[Capability, ...]:
    """The candidates of a support question: every engine's tables in preference order (None: "can frost run it
    at all?"), or the named engine's (e.g. "cute_sm120": "does a GPU kernel serve it?"). Raises EngineError for
    an unknown name."""
    if engine is None:
        return ENGINES
    named = tuple(cap for cap in ENGINES if cap.engine == engine)
    if named:
        return named
    raise EngineError(engine, " or ".join(repr(name) for name in engine_names()) + " or None (every engine)")


def choose(facts: Facts, target: str, engines: tuple[Capability, ...] = ENGINES
           ) -> tuple[Capability | None, dict[str, tuple[Reason, ...]]]:
    """The first engine (in preference order) that serves `facts` on a normalised `target`, as its table for the
    op's kind, and every engine's reasons for declining (all engines are asked, so the report is complete)."""
    tables = tables_for(facts.op, engines)
    declined = {cap.engine: tuple(rs) for cap in tables if (rs := declines(cap, facts, target))}
    chosen = next((cap for cap in tables if cap.engine not in declined), None)
    return chosen, declined


def _op_support(m: Matched, target: str, engines: tuple[Capability, ...]) -> OpSupport:
    chosen, declined = choose(m.facts, target, engines)
    return OpSupport(name=m.name, pattern=m.pattern.label, engine=chosen.engine if chosen else None,
                     declined=declined, facts=m.facts)


def probe(graph: Graph, target: str, engines: tuple[Capability, ...] = ENGINES) -> SupportReport:
    """Can frost serve `graph` on `target` ("cpu", "cuda", "sm_90", "sm_120a", ...)? `engines` pins or reorders
    the candidates (e.g. (CUTE_SM120,) to ask about the kernels alone). Raises TargetError for an unknown target
    and GraphError for a malformed graph; never for an unsupported one."""
    target = normalise_target(target)
    analysis = analyze(graph)
    ops = tuple(_op_support(m, target, engines) for m in analysis.matched)
    return SupportReport(target=target, supported=bool(ops) and all(op.engine for op in ops), ops=ops,
                         unclaimed=analysis.unclaimed, asked=engine_names(engines))

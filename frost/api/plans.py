"""frost.compile(graph) -> Plan: probe, choose an engine per op, lower, and cache the plan.

Engine choice is never silent: `plan.engine` names it, `plan.report` says why, and a fallback from cute_sm120 to
the reference engine on a GPU target logs the probe's reasons once per distinct set of reasons. The target a plan is
for defaults to the device this process would run on (detect_target; target_of for a tensor's device, memoised),
read through torch, imported lazily, only there."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Hashable, Optional, Union

from frost.analyzer import ENGINES, normalise_target
from frost.analyzer.probe import OpSupport, SupportReport, engines_named
from frost.errors import ArgumentTypeError, NotSupported
from frost.ir import Graph
from frost.ir.graph import per_graph
from frost.lowering import compiler
from frost.lowering.disk_cache import probe_with_disk_cache
from frost.lowering.engines import lower_graph
from frost.lowering.plan import Plan
from frost.lowering.plan_cache import PLANS

if TYPE_CHECKING:
    import torch

log = logging.getLogger("frost")
PREFERRED = ENGINES[0].engine
_logged: set[Hashable] = set()
_logged_lock = threading.Lock()
Device = Union["torch.device", str, int]   # what torch.device() accepts
_targets: dict[Device | None, str] = {}


def detect_target(device: Device | None = None) -> str:
    """"cpu" without an importable torch, a CUDA device, or for a non-CUDA `device`; else "sm_<major><minor>" of
    `device` (default: the current CUDA device)."""
    try:
        import torch
    except ImportError:
        return "cpu"
    from frost.lowering.devices import parsed_device

    device = parsed_device(device)
    if device is not None and device.type != "cuda" or not torch.cuda.is_available():
        return "cpu"
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def target_of(device: Device) -> str:
    """The probe target for tensors on ``device`` ("cpu", or sm_XY of that CUDA device), memoised per device."""
    target = _targets.get(device)
    if target is None:
        target = _targets[device] = detect_target(device)
    return target


def compile(graph: Graph, *, target: str | None = None, engine: str | None = None) -> Plan:  # noqa: A001 -- public name
    """Compile `graph` for `target` (None: this machine, frost.detect_target()). `engine=None` takes the
    probe's choice per op; a name ("reference", "cute_sm120") pins it, and raises NotSupported (carrying the
    report) when that engine declines. Ops frost does not claim stay the caller's to run (plan.report.unclaimed
    lists them; the plan runs the claimed ones). Plans are cached: the same graph, target and engine return the
    same Plan. A graph that is no frost.Graph is an ArgumentTypeError, an unknown engine name an EngineError and an
    unknown target string a TargetError, before anything is probed."""
    check_graph_argument(graph)
    engines_named(engine)
    target = normalise_target(target if target is not None else detect_target())
    key = _plan_key(graph, target, engine)
    if key is None:
        return build_plan(graph, target, engine)
    return PLANS.get_or_build(key, lambda: build_plan(graph, target, engine))


@per_graph
def _graph_text(graph: Graph) -> str | None:
    """The graph's JSON, its plan-cache identity (memoised per graph object: a loop re-compiling one graph pays a
    dict lookup; equal graphs built anew still share a plan)."""
    try:
        return graph.model_dump_json()
    except Exception:  # noqa: BLE001 -- an attribute JSON cannot hold: build uncached rather than fail
        return None


def _plan_key(graph: Graph, target: str, engine: str | None) -> Optional[tuple[Hashable, ...]]:
    text = _graph_text(graph)
    # compiler.generation: plans built with an injected (fake) compiler never leak out of it
    return None if text is None else ("graph", text, target, engine, compiler.generation)


def build_plan(graph: Graph, target: str, engine: str | None = None) -> Plan:
    """compile() without the plan cache (callers with their own cache key, like the functional API)."""
    target = normalise_target(target)
    report = probe_with_disk_cache(graph, target, _graph_text(graph))
    if not report.ops:
        raise NotSupported(f"frost claims no op of graph {graph.name!r}\n{report.to_text()}", report)
    choices = [(s, _engine_for(s, engine, report)) for s in report.ops]
    for s, chosen in choices:
        if engine is None:
            _note_fallback(s, chosen, target)
    return lower_graph(graph, target, choices, report)


def _engine_for(s: OpSupport, pin: str | None, report: SupportReport) -> str:
    if pin is None:
        if s.engine is None:
            raise NotSupported(f"no engine serves op {s.name!r} on {report.target}\n{report.to_text()}", report)
        return s.engine
    if pin in s.declined:
        why = "; ".join(f"[{r.code}] {r.message}" for r in s.declined[pin])
        raise NotSupported(f"engine {pin!r} cannot serve op {s.name!r} on {report.target}: {why}", report)
    return pin


def check_graph_argument(graph: object) -> None:
    """The graph argument of frost.compile and frost.check_support: a frost.Graph (a dict, a JSON string or a
    builder is a mistake named as such, not an AttributeError from deep inside)."""
    if not isinstance(graph, Graph):
        raise ArgumentTypeError("graph", type(graph).__name__, "a frost.Graph (GraphBuilder(...).build(), "
                                "frost.sdpa_backward_graph(...) or frost.Graph.from_json(text))")


def _note_fallback(s: OpSupport, chosen: str, target: str) -> None:
    """Log (once per distinct reasons) that a GPU target fell back from the kernels to the reference engine."""
    reasons = s.declined.get(PREFERRED, ())
    if target == "cpu" or chosen == PREFERRED or not reasons:
        return
    key = (target, chosen, tuple((r.code, r.field, r.value) for r in reasons))
    with _logged_lock:
        if key in _logged:
            return
        _logged.add(key)
    why = "; ".join(f"[{r.code}] {r.message}" for r in reasons)
    log.warning("frost: op %r runs on the %s engine on %s because %s declines: %s", s.name, chosen, target,
                PREFERRED, why)

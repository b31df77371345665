"""The analyzer: graph -> networkx dataflow -> matched patterns -> Facts; capability tables per engine; the probe.

Never imports torch or cutlass: a probe runs on any machine, in microseconds."""

from frost.analyzer.analysis import Analysis, Matched, Unclaimed, analyze, analyze_with
from frost.analyzer.capability import (CUTE_SM120, CUTE_SM120_FORWARD, ENGINES, OP_KINDS, REFERENCE,
                                      REFERENCE_FORWARD, Capability, HeadDims, engine_names, tables_for)
from frost.analyzer.declines import CODES, RULES, Reason, Rule, declines
from frost.analyzer.extract import facts_for
from frost.analyzer.facts import Facts
from frost.analyzer.matrix import render_support_matrix
from frost.analyzer.netgraph import to_networkx
from frost.analyzer.patterns import PATTERNS, SDPA_BACKWARD, SDPA_FORWARD, Binding, Pattern
from frost.analyzer.probe import choose, probe
from frost.analyzer.report import OpSupport, SupportReport
from frost.analyzer.targets import normalise_target
from frost.errors import TargetError

__all__ = ["Analysis", "Matched", "Unclaimed", "analyze", "analyze_with", "CUTE_SM120", "CUTE_SM120_FORWARD",
           "ENGINES", "OP_KINDS", "REFERENCE", "REFERENCE_FORWARD", "Capability", "HeadDims", "engine_names",
           "tables_for", "CODES", "RULES", "Reason", "Rule", "declines", "facts_for", "Facts",
           "render_support_matrix", "to_networkx", "PATTERNS", "SDPA_BACKWARD", "SDPA_FORWARD", "Binding", "Pattern", "choose",
           "probe", "OpSupport", "SupportReport", "TargetError", "normalise_target"]

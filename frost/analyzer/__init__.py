"""The analyzer: graph -> networkx dataflow -> matched patterns -> Facts; capability tables per engine; the probe.

Never imports torch or cutlass: a probe runs on any machine, in microseconds."""

from frost.analyzer.analysis import Analysis, Binding, Matched, Unclaimed, analyze, analyze_with, to_networkx
from frost.analyzer.capability import (CODES, CUTE_SM120, CUTE_SM120_FORWARD, ENGINES, OP_KINDS, REFERENCE,
                                      REFERENCE_FORWARD, RULES, Capability, HeadDims, Reason, Rule, declines,
                                      engine_names, normalise_target, tables_for)
from frost.analyzer.facts import Facts, facts_for
from frost.analyzer.matrix import render_support_matrix
from frost.analyzer.patterns import PATTERNS, SDPA_BACKWARD, SDPA_FORWARD, Pattern
from frost.analyzer.probe import OpSupport, SupportReport, choose, probe
from frost.errors import TargetError

__all__ = ["Analysis", "Matched", "Unclaimed", "analyze", "analyze_with", "CUTE_SM120", "CUTE_SM120_FORWARD",
           "ENGINES", "OP_KINDS", "REFERENCE", "REFERENCE_FORWARD", "Capability", "HeadDims", "engine_names",
           "tables_for", "CODES", "RULES", "Reason", "Rule", "declines", "facts_for", "Facts",
           "render_support_matrix", "to_networkx", "PATTERNS", "SDPA_BACKWARD", "SDPA_FORWARD", "Binding", "Pattern", "choose",
           "probe", "OpSupport", "SupportReport", "TargetError", "normalise_target"]

"""frost: attention (SDPA) forward and backward graphs compiled to CuTe-DSL kernels for SM120-class GPUs.

`import frost` stays light (no torch, no cutlass): the entry points that need them load on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from frost.errors import (ArgumentTypeError, EngineError, FrostError, GraphError, NotSupported, SettingError,
                          TargetError, TensorError)
from frost.ir import Graph, GraphBuilder, TensorSpec, sdpa_backward_graph, sdpa_forward_graph

__version__ = "0.1.0"

# public name -> "module:attribute", imported on first access (PEP 562)
_LAZY = {
    "check_support": "frost.api.support:check_support",
    "detect_target": "frost.api.plans:detect_target",
    "SupportReport": "frost.analyzer:SupportReport",
    "Reason": "frost.analyzer:Reason",
    "compile": "frost.api.plans:compile",
    "cache_stats": "frost.lowering:cache_stats",
    "clear_caches": "frost.lowering:clear_caches",
    "configure_cache": "frost.lowering:configure_cache",
    "Plan": "frost.lowering:Plan",
    "sdpa_backward": "frost.api.functional:sdpa_backward",
    "sdpa_forward": "frost.api.functional:sdpa_forward",
    "attention": "frost.api.autograd:attention",
    "sdpa_forward_varlen": "frost.api.functional:sdpa_forward_varlen",
    "sdpa_backward_varlen": "frost.api.functional:sdpa_backward_varlen",
    "attention_varlen": "frost.api.autograd:attention_varlen",
    "reference": "frost.reference:",
}

if TYPE_CHECKING:   # the same names, eagerly, for type checkers (tests/docs/test_types.py keeps the two lists equal)
    from frost import reference as reference
    from frost.analyzer import Reason as Reason, SupportReport as SupportReport
    from frost.api.autograd import attention as attention, attention_varlen as attention_varlen
    from frost.api.functional import (sdpa_backward as sdpa_backward, sdpa_backward_varlen as sdpa_backward_varlen,
                                      sdpa_forward as sdpa_forward, sdpa_forward_varlen as sdpa_forward_varlen)
    from frost.api.plans import compile as compile
    from frost.api.support import check_support as check_support
    from frost.api.plans import detect_target as detect_target
    from frost.lowering import (Plan as Plan, cache_stats as cache_stats, clear_caches as clear_caches,
                                configure_cache as configure_cache)


def __getattr__(name: str) -> object:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'frost' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attr) if attr else module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API, the lazily loaded names included, so dir(frost) and help(frost) show all of it."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__") and n not in ("__getattr__", "__dir__"))})


__all__ = ["ArgumentTypeError", "EngineError", "FrostError", "GraphError", "NotSupported", "SettingError",
           "TargetError", "TensorError", "Graph", "GraphBuilder", "TensorSpec", "sdpa_backward_graph",
           "sdpa_forward_graph", "__version__", *_LAZY]

"""Lowering: Facts + the chosen engine -> Plan (kernels, compile keys, workspace layout); tensor signatures; the plan
cache (memory) and kernel cache (memory + disk); the executor that binds runtime tensors to a plan."""

from frost.errors import ArgumentTypeError, TensorError
from frost.lowering.compiler import KERNELS, Compiler, KernelUnit, get_compiler, set_compiler, use_compiler
from frost.lowering.disk_cache import DiskCache, default_root
from frost.lowering.fake import FakeCompiler, FakeKernel
from frost.lowering.keys import TensorSignature, make_signature, spec_signature, tensor_signature
from frost.lowering.plan import KernelLaunch, Lowering, OpPlan, Plan
from frost.lowering.plan_cache import PLANS, CacheStats, cache_stats, reset_cache_stats
from frost.lowering.workspace import ALIGN, Region, WorkspaceLayout
from frost.spec import as_int

MAX_PLANS_ACCEPTED = "None (unchanged) or an int >= 0 (0 keeps no plan)"


def clear_caches(*, stats: bool = False) -> None:
    """Forget every plan and in-memory kernel (the disk cache stays); optionally reset the counters too."""
    if not isinstance(stats, bool):
        raise ArgumentTypeError("stats", stats, "True or False")
    PLANS.clear()
    KERNELS.clear()
    if stats:
        reset_cache_stats()


def configure_cache(*, max_plans: int | None = None) -> None:
    """Resize the plan LRU (default 256, or FROST_PLAN_CACHE_SIZE); 0 keeps no plan (every call plans again)."""
    if max_plans is None:
        return
    n = as_int(max_plans)
    if n is None:
        raise ArgumentTypeError("max_plans", max_plans, MAX_PLANS_ACCEPTED)
    if n < 0:
        raise TensorError("max_plans", max_plans, MAX_PLANS_ACCEPTED)
    PLANS.resize(n)


__all__ = ["Compiler", "KernelUnit", "get_compiler", "set_compiler", "use_compiler", "DiskCache", "default_root",
           "FakeCompiler", "FakeKernel", "KernelLaunch", "Lowering", "OpPlan", "Plan", "TensorSignature",
           "make_signature", "spec_signature", "tensor_signature", "CacheStats", "cache_stats", "reset_cache_stats",
           "ALIGN", "Region", "WorkspaceLayout", "clear_caches", "configure_cache"]

"""CuTe-DSL attention kernels for the SM120 class (mma.sync + ldmatrix + cp.async, <= 99 KB smem).

The pieces every kernel family shares sit here: arch (targets), mask (band, lengths, flags), cute_utils (copies,
layouts, MMA helpers), geometry (shared-memory tile geometry), graph_replay (CUDA-graph replay of a launch),
segments (packed sequences on the device) and packed (their host side). Each family has a folder of its own,
forward/ and backward/, with the same modules in the same roles: tiles (and the backward's catalogue: the tables),
select (a problem -> the key of the kernel it runs), compile (key -> compiled kernel, cached in process), launch
(the launch bound to a problem, taking one call's tensors object), checks (the public entry's tensor checks), api
(the public host contract: config, compile_*, the Compiled* classes), and the device kernels. The engine limits
the analyzer also reads live in frost/limits.py.

Importing this package imports no cutlass: the names below load their modules on first use (PEP 562), so the host
side (a plan's keys, the disk cache) can import a family's pure-Python modules without the DSL."""

from __future__ import annotations

import importlib

_LAZY = {
    "CompiledBackward": "frost.kernels.backward.api", "KernelConfig": "frost.kernels.backward.api",
    "choose_config": "frost.kernels.backward.api", "compile_backward": "frost.kernels.backward.api",
    "compile_key": "frost.kernels.backward.api", "workspace_regions": "frost.kernels.backward.api",
    "detect_arch": "frost.kernels.arch",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'frost.kernels' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = list(_LAZY)

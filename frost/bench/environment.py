"""What a benchmark number depends on, recorded next to it: device, clocks-relevant facts, library versions, env."""

from __future__ import annotations

import datetime
import os
import platform
from importlib import metadata

PACKAGES = ("torch", "nvidia-cutlass-dsl", "flash-attn-4", "quack-kernels", "apache-tvm-ffi", "frost-sdpa")
ENV_VARS = ("FLASH_ATTENTION_ARCH", "FLASH_ATTENTION_NUM_SMS", "CUTE_DSL_ARCH", "CUDA_VISIBLE_DEVICES",
            "FROST_GRAPH_REPLAY")


def versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def device() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"device": None}
    p = torch.cuda.get_device_properties(0)
    major, minor = torch.cuda.get_device_capability(0)
    return {"device": p.name, "capability": f"sm_{major}{minor}", "sms": p.multi_processor_count,
            "l2_bytes": getattr(p, "L2_cache_size", None), "cuda": torch.version.cuda}


def meta(suite: str, dtype: str) -> dict:
    """The run's header: suite, dtype, device facts, versions, relevant environment (after backends set theirs)."""
    return {"suite": suite, "dtype": dtype, "date": datetime.date.today().isoformat(), **device(),
            "python": platform.python_version(),
            "versions": versions(), "env": {k: os.environ.get(k) for k in ENV_VARS}}

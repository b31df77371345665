"""Target architectures of the SM120-class kernels, as data.

Every target gets the same kernels: mma.sync m16n8k16 + ldmatrix + cp.async, at most 99 KB of shared memory per
CTA (the SM120 limit; the H200 could hold more, but a kernel must not depend on it)."""

from __future__ import annotations

from dataclasses import dataclass

SMEM_LIMIT_BYTES = 99 * 1024  # 101376: cutlass.memory.get_smem_capacity_in_bytes("sm_120")


@dataclass(frozen=True)
class ArchConfig:
    name: str                 # the --gpu-arch value
    capability: tuple[int, int]
    smem_limit: int = SMEM_LIMIT_BYTES
    # the main kernel's preferred shared-memory carveout, percent of the SM's maximum: SM120 has 100 KB per SM;
    # on the H200 (228 KB) 43 % picks its 100 KB configuration, so CTAs co-reside exactly as they would on SM120
    # (a tile that only runs fast because a second CTA fits in Hopper's larger shared memory would mislead)
    smem_carveout_percent: int = 100


ARCHS: dict[str, ArchConfig] = {
    "sm_120a": ArchConfig("sm_120a", (12, 0)),
    "sm_121a": ArchConfig("sm_121a", (12, 1)),
    "sm_90a": ArchConfig("sm_90a", (9, 0), smem_carveout_percent=43),
}


def arch_config(name: str) -> ArchConfig:
    try:
        return ARCHS[name]
    except KeyError:
        raise ValueError(f"unsupported arch {name!r}; expected one of {sorted(ARCHS)}") from None


def arch_from_capability(cap: tuple[int, int]) -> str:
    for cfg in ARCHS.values():
        if cfg.capability == tuple(cap):
            return cfg.name
    raise ValueError(f"no SM120-class kernel target for compute capability {cap}")


def detect_arch(device=None) -> str:
    """The arch of a CUDA device (torch imported lazily)."""
    import torch

    return arch_from_capability(torch.cuda.get_device_capability(device))

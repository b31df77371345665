"""Target architectures of the SM120-class kernels, as data.

Every target gets the same kernels: mma.sync m16n8k16 + ldmatrix + cp.async, at most 99 KB of shared memory per
CTA (the SM120 limit; the H200 could hold more, but a kernel must not depend on it)."""

from __future__ import annotations

from dataclasses import dataclass

from frost.limits import SMEM_BYTES

SMEM_LIMIT_BYTES = SMEM_BYTES  # 101376: cutlass.memory.get_smem_capacity_in_bytes("sm_120")
SM120_SMEM_PER_SM = 100 * 1024
SM90_SMEM_PER_SM = 228 * 1024
SM90_SMEM_MAX_PER_CTA = 227 * 1024
SMEM_RESERVED_PER_CTA = 1024  # the driver's per-CTA reservation on both


@dataclass(frozen=True)
class ArchConfig:
    name: str                 # the --gpu-arch value
    capability: tuple[int, int]
    smem_per_sm: int = SM120_SMEM_PER_SM
    emulate_sm120_occupancy: bool = False  # see launch_smem_bytes


def launch_smem_bytes(arch: "ArchConfig", used: int) -> int:
    """Dynamic shared memory the main kernel requests at launch. On SM120 (100 KB per SM) that is what it uses. On
    a bigger SM (the H200's 228 KB) it asks for enough that no more CTAs share an SM than would on SM120: a tile
    must not look fast on the test GPU only because a second CTA fits there (the preferred-carveout hint does not
    do this: the driver picked a 200 KB configuration for two 99 KB CTAs)."""
    if not arch.emulate_sm120_occupancy:
        return used
    ctas = max(SM120_SMEM_PER_SM // (used + SMEM_RESERVED_PER_CTA), 1)
    return max(used, min(arch.smem_per_sm // ctas - SMEM_RESERVED_PER_CTA, SM90_SMEM_MAX_PER_CTA))


ARCHS: dict[str, ArchConfig] = {
    "sm_120a": ArchConfig("sm_120a", (12, 0)),
    "sm_121a": ArchConfig("sm_121a", (12, 1)),
    "sm_90a": ArchConfig("sm_90a", (9, 0), smem_per_sm=SM90_SMEM_PER_SM, emulate_sm120_occupancy=True),
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

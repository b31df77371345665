"""Which forward kernel a problem runs, decided once: ``select`` returns its ForwardKey, everything the generated
code depends on (the dtype, the Q/K and V head-dim pads of tiles.forward_pads, the arch, packing). The config
(api.choose_forward_config) carries the key down; the compile and the launch take it as given. Every mask, length,
sink and GQA group is a runtime value of that one kernel, so nothing else is selected."""

from __future__ import annotations

from dataclasses import dataclass

from frost.kernels.arch import arch_config
from frost.kernels.forward.tiles import ForwardTile, forward_pads, forward_tile

DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class ForwardKey:
    dtype: str           # "float16" | "bfloat16"
    head_dim_pad: int
    head_dim_v_pad: int
    arch: str            # "sm_120a" | "sm_121a" | "sm_90a"
    varlen: bool = False  # packed sequences (kernels/segments.py)

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype: got {self.dtype!r}; accepted: one of {DTYPES}")
        arch_config(self.arch)
        forward_tile(self.head_dim_pad, self.head_dim_v_pad)

    @property
    def tile(self) -> ForwardTile:
        return forward_tile(self.head_dim_pad, self.head_dim_v_pad)

    def as_str(self) -> str:
        t = self.tile
        return (f"frost.fwd.v1:{self.arch}:{self.dtype}:d{t.head_dim_pad}v{t.head_dim_v_pad}"
                f":m{t.m_block}n{t.n_block}w{t.num_warps}b{t.min_blocks}s{t.kv_stages}"
                + (":qr" if t.q_in_regs else "") + (":lr" if t.lazy_rescale else "") + (":vl" if self.varlen else ""))


def select(dtype: str, arch: str, head_dim_qk: int, head_dim_v: int, *, varlen: bool = False) -> ForwardKey:
    """The forward kernel of a problem with these logical head dims; ValueError for a dtype, arch or head dims
    the kernel does not serve."""
    arch_config(arch)
    pad, pad_v = forward_pads(head_dim_qk, head_dim_v)
    return ForwardKey(dtype, pad, pad_v, arch, bool(varlen))

"""Tile configurations of the forward kernel, one per padded Q/K head dim, as data.

Head dims are any multiple of 8 up to 256, padded like the backward's (limits.pad_head_dim: 32, 48, 64, 80, 96,
128, 160, 192, 256); V is padded on its own (Dv <= Dqk, e.g. 192/128). A CTA owns ``m_block`` query rows of one
(batch, head) and walks ``n_block`` keys a step; each warp owns 16 * (m_block / 16 / warps) whole query rows, so
the softmax row reductions stay inside a lane quad. Shared memory holds one Q tile and ``kv_stages`` K and V
tiles: with two, the next K and V load during this step (one barrier a step); with one, the next K loads while
this step's P.V runs and the V tile while its Q.K^T runs (two barriers a step). Every tile stays within SM120's
99 KB."""

from __future__ import annotations

from dataclasses import dataclass

from frost.kernels.arch import SMEM_LIMIT_BYTES
from frost.limits import HEAD_DIM_MAX, HEAD_DIM_MULTIPLE, HEAD_DIM_PADS, pad_head_dim


@dataclass(frozen=True)
class ForwardTile:
    head_dim_pad: int    # Q/K tiles are this wide in shared memory (zero-filled past the logical head dim)
    head_dim_v_pad: int  # V tiles and the O accumulator are this wide
    m_block: int         # query rows per CTA
    n_block: int         # keys per step of the walk
    num_warps: int = 4
    min_blocks: int = 1  # CTAs per SM the register budget is compiled for
    kv_stages: int = 2   # K/V buffers: 2 = the next tile loads during this one (one barrier a step)
    q_in_regs: bool = False  # Q's MMA fragments are read from shared memory once, before the walk, not every step
    lazy_rescale: bool = False  # O is rescaled only for rows whose running max moved (a branch per row a step)

    @property
    def num_threads(self) -> int:
        return 32 * self.num_warps

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Q, K and V tiles (K and V per stage), each 1024-byte aligned (the swizzle)."""
        tiles = (self.m_block * self.head_dim_pad, self.kv_stages * self.n_block * self.head_dim_pad,
                 self.kv_stages * self.n_block * self.head_dim_v_pad)
        return sum(-(-n * elem_bytes // 1024) * 1024 for n in tiles)

    def check(self) -> None:
        if self.m_block % (16 * self.num_warps):
            raise ValueError(f"{self}: m_block must be a multiple of 16 rows per warp")
        if self.n_block % 16 or self.head_dim_pad % 16 or self.head_dim_v_pad % 16:
            raise ValueError(f"{self}: n_block and the head-dim pads must be multiples of 16 (mma k16 / n16 steps)")
        if self.kv_stages not in (1, 2):
            raise ValueError(f"{self}: kv_stages must be 1 or 2")
        if self.head_dim_v_pad > self.head_dim_pad:
            raise ValueError(f"{self}: the V pad must not exceed the Q/K pad")
        if self.smem_bytes() > SMEM_LIMIT_BYTES:
            raise ValueError(f"{self}: {self.smem_bytes()} bytes of shared memory > {SMEM_LIMIT_BYTES}")


# (m_block, n_block, warps, min_blocks, kv_stages[, q_in_regs[, lazy_rescale]]) per Q/K pad. A 16-column swizzle
# atom (pads 48 and 80) is copied by two threads per row, so its tiles need 64 rows for 128 threads. 32 query rows
# per warp (m_block = 128 over 4 warps) spill at d80 (sm_90a) and with 128-key tiles at d32; 64-row tiles keep the
# O accumulator of the wide pads in registers. bench_forward.VARIANTS lists the alternatives timed against these.
_SHAPES = {32: (128, 64, 4, 2, 2), 48: (128, 64, 4, 2, 2), 64: (128, 64, 4, 2, 2, True), 80: (64, 64, 4, 2, 1),
           96: (128, 64, 8, 1, 2), 128: (128, 32, 4, 2, 1), 160: (64, 32, 4, 1, 2), 192: (64, 32, 4, 1, 2),
           256: (64, 32, 4, 1, 2)}


def forward_tile(head_dim_pad: int, head_dim_v_pad: int) -> ForwardTile:
    """The tile of a (Q/K pad, V pad) pair."""
    if head_dim_pad not in _SHAPES:
        raise ValueError(f"head_dim_pad: got {head_dim_pad}; accepted: one of {sorted(_SHAPES)}")
    if head_dim_v_pad not in HEAD_DIM_PADS or head_dim_v_pad > head_dim_pad:
        raise ValueError(f"head_dim_v_pad: got {head_dim_v_pad}; accepted: a pad in {HEAD_DIM_PADS} up to "
                         f"{head_dim_pad}")
    tile = ForwardTile(head_dim_pad, head_dim_v_pad, *_SHAPES[head_dim_pad])
    tile.check()
    return tile


def forward_pads(head_dim_qk: int, head_dim_v: int) -> tuple[int, int]:
    """(Q/K pad, V pad) of logical head dims (multiples of 8 up to 256, Dv <= Dqk): V is padded like Q/K unless
    the pair has a set of its own (served_forward_pads), as in the backward."""
    for name, d in (("head_dim_qk", head_dim_qk), ("head_dim_v", head_dim_v)):
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0 or d % HEAD_DIM_MULTIPLE or d > HEAD_DIM_MAX:
            raise ValueError(f"{name}: got {d!r}; accepted: a positive multiple of {HEAD_DIM_MULTIPLE} up to "
                             f"{HEAD_DIM_MAX}")
    if head_dim_v > head_dim_qk:
        raise ValueError(f"head_dim_v: got {head_dim_v}; accepted: at most head_dim_qk ({head_dim_qk})")
    pads = pad_head_dim(head_dim_qk), pad_head_dim(head_dim_v)
    return pads if pads in served_forward_pads() else (pads[0], pads[0])


def served_forward_pads() -> tuple[tuple[int, int], ...]:
    """Every (Q/K pad, V pad) pair with a forward set of its own: V padded like Q/K, plus the MLA pair 192/128."""
    return tuple((d, d) for d in HEAD_DIM_PADS) + ((192, 128),)

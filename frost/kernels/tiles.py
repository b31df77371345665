"""Tile configurations of the backward main kernel, one per padded head dim.

Head dims are any multiple of 8 up to 256. Both head dims (QK and V) are padded to the same multiple of 32, the
``head_dim_pad`` of the tile; the logical dims are runtime values (they only bound loads and stores), so all head
dims that pad alike share one compiled kernel."""

from __future__ import annotations

from dataclasses import dataclass

from frost.kernels.arch import SMEM_LIMIT_BYTES

HEAD_DIM_MULTIPLE = 8
HEAD_DIM_MAX = 256
HEAD_DIM_PADS = (32, 64, 96, 128, 160, 192, 224, 256)


@dataclass(frozen=True)
class TileConfig:
    head_dim_pad: int   # Q/K/V/dO tiles are head_dim_pad wide in shared memory (zero-filled past the logical dim)
    n_block: int        # key/value rows owned by one CTA (16 per warp: each warp owns whole rows of S^T)
    m_block: int        # query rows per step of the walk
    q_stages: int       # shared-memory buffers for Q (+ LSE, delta); 2 = next tile loads during this one
    do_stages: int      # shared-memory buffers for dO
    two_pass: bool      # large head dims: pass 1 accumulates dV, pass 2 dK and dQ (halves live accumulators)
    dq_chunk: int       # dQ columns accumulated in registers at a time
    min_blocks: int = 1  # CTAs per SM the register file must hold (.minnctapersm: caps registers)

    @property
    def num_warps(self) -> int:
        return self.n_block // 16

    @property
    def num_threads(self) -> int:
        return 32 * self.num_warps

    @property
    def dq_warps(self) -> tuple[int, int]:
        """(warps along query rows, warps along head dim) of the dQ GEMM."""
        wm = min(self.num_warps, self.m_block // 16)
        return wm, self.num_warps // wm

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Shared memory of the main kernel (each buffer 1024-byte aligned), as the kernel allocates it."""
        d = self.head_dim_pad
        bufs = [self.n_block * d * elem_bytes,                      # K
                self.n_block * d * elem_bytes,                      # V
                self.m_block * d * elem_bytes * self.q_stages,     # Q
                self.m_block * d * elem_bytes * self.do_stages,    # dO
                self.n_block * self.m_block * elem_bytes,          # dS^T
                self.m_block * 4 * self.q_stages,                  # LSE * log2(e)
                self.m_block * 4 * self.q_stages]                  # delta
        return sum(-(-b // 1024) * 1024 for b in bufs)

    def check(self) -> None:
        d, (wm, wd) = self.head_dim_pad, self.dq_warps
        assert d in HEAD_DIM_PADS and self.n_block in (64, 128) and self.m_block % 16 == 0
        assert wm * wd == self.num_warps and self.m_block % (16 * wm) == 0
        assert d % self.dq_chunk == 0 and self.dq_chunk % (16 * wd) == 0
        assert self.smem_bytes() <= SMEM_LIMIT_BYTES, (self, self.smem_bytes())


_TABLE = {
    32: TileConfig(32, n_block=128, m_block=64, q_stages=2, do_stages=2, two_pass=False, dq_chunk=32),
    64: TileConfig(64, n_block=128, m_block=64, q_stages=2, do_stages=2, two_pass=False, dq_chunk=64),
    96: TileConfig(96, n_block=64, m_block=64, q_stages=2, do_stages=2, two_pass=False, dq_chunk=32),
    128: TileConfig(128, n_block=128, m_block=32, q_stages=2, do_stages=1, two_pass=False, dq_chunk=64),
    160: TileConfig(160, n_block=64, m_block=32, q_stages=2, do_stages=2, two_pass=True, dq_chunk=32),
    192: TileConfig(192, n_block=64, m_block=32, q_stages=2, do_stages=1, two_pass=True, dq_chunk=64),
    224: TileConfig(224, n_block=64, m_block=32, q_stages=1, do_stages=1, two_pass=True, dq_chunk=32),
    256: TileConfig(256, n_block=64, m_block=16, q_stages=2, do_stages=1, two_pass=True, dq_chunk=64),
}


def pad_head_dim(head_dim: int) -> int:
    if head_dim <= 0 or head_dim % HEAD_DIM_MULTIPLE or head_dim > HEAD_DIM_MAX:
        raise ValueError(f"head dim {head_dim}: need a positive multiple of {HEAD_DIM_MULTIPLE} <= {HEAD_DIM_MAX}")
    return -(-head_dim // 32) * 32


def tile_for(head_dim_qk: int, head_dim_v: int) -> TileConfig:
    if head_dim_v > head_dim_qk:
        raise ValueError(f"head_dim_v {head_dim_v} > head_dim_qk {head_dim_qk} is not served")
    pad_head_dim(head_dim_v)
    return _TABLE[pad_head_dim(head_dim_qk)]


def all_tiles() -> tuple[TileConfig, ...]:
    return tuple(_TABLE[d] for d in HEAD_DIM_PADS)


def tile_for_pad(head_dim_pad: int) -> TileConfig:
    try:
        return _TABLE[head_dim_pad]
    except KeyError:
        raise ValueError(f"no tile config for padded head dim {head_dim_pad}; have {HEAD_DIM_PADS}") from None

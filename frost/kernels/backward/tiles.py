"""The main kernel's tile config (TileConfig) and the dQ GEMM kernel's (DqGemmTile): what one compiled kernel's
shape and code paths are, and the checks that keep a config buildable. Which config each kernel set compiles with
is the catalogue's (catalogue.py); the logical head dims are runtime values that only bound loads and stores.

Why 32 key rows per warp at small head dims: every warp reads the whole Q and dO tile through ldmatrix (the B
operands of S^T, dP^T, dV and dK), so the shared-memory bytes per MMA fall as the rows a warp owns grow (each B
fragment feeds two m16 atoms instead of one), and the main kernel is shared-memory bound."""

from __future__ import annotations

from dataclasses import dataclass

from frost.kernels.arch import SMEM_LIMIT_BYTES
from frost.kernels.geometry import swizzle_atom_cols
from frost.limits import HEAD_DIM_PADS

GRID_WARPS = 8  # warps of a warp_grid tile
DQ_GEMM_QM = 32  # the query tile of the main kernels whose sets compute dQ by a GEMM of their own (their m_block)


@dataclass(frozen=True)
class TileConfig:
    head_dim_pad: int   # Q/K (and V/dO unless head_dim_v_pad) tiles are this wide in smem (zero-filled past the dim)
    n_block: int        # key/value rows owned by one CTA (rows_per_warp per warp: each warp owns whole rows of S^T)
    m_block: int        # query rows per step of the walk
    q_stages: int       # shared-memory buffers for Q (+ LSE, delta); 2 = next tile loads during this one
    do_stages: int      # shared-memory buffers for dO
    two_pass: bool      # large head dims: pass 1 accumulates dV, pass 2 dK and dQ (halves live accumulators)
    dq_chunk: int       # dQ columns accumulated in registers at a time
    min_blocks: int = 1  # CTAs per SM the register file must hold (.minnctapersm: caps registers)
    rows_per_warp: int = 16  # key rows per warp; 32 halves the shared-memory reads of Q/dO per MMA (see top)
    warp_grid: bool = False  # bwd_main_grid: 2-D warp tiles per GEMM, P and dS through smem, V in registers
    k_in_regs: bool = False  # rows kernel: each warp keeps its K rows (the A operand of S^T) in registers per pass
    head_dim_v_pad: int = 0  # grid kernel: V/dO/dV tiles this wide when narrower than Q/K (0: head_dim_pad)
    # ordered dQ: a query tile's first visitor stores its dQ and the last one writes dQ in the io dtype (no
    # accumulator zeroing, no convert pass; ordering.dq_order_wait). False: ordered adds go into the zeroed
    # accumulator and the convert pass writes dQ
    dq_direct: bool = True
    # masked tiles test key - row against the band offsets, one unsigned compare per score
    # (AttentionMask.zero_hidden(by_difference)), instead of two compares
    diff_mask: bool = False
    # ordered dQ, bwd_main's step: release the previous step's query tile right after the top-of-step barrier
    # instead of after the mid-step one, half a step earlier
    release_at_top: bool = False
    # rows kernel (bwd_main_lag): the dQ GEMM of a step runs at the end of the next one, from the other of two dS^T
    # buffers, so a step needs one CTA barrier instead of two; V lives in registers for the walk and its shared
    # memory holds the two dO and the two dS^T buffers
    dq_lag: bool = False
    # bwd_main_pipe: the lagged step's one CTA barrier as per-stage mbarriers, so warps need not meet every step
    dq_lag_mbar: bool = False
    # rows kernel, 16-column dQ warp slices (dq_col_step 16): the atomic dQ adds go out as red.global.add.v4.f32, a
    # lane-pair shuffle joining a warp's two 8-column atoms of a tiled-MMA step, which lie in one 128-byte line of
    # the fp32 accumulator (with more than two warps along the head dim the dQ MMA's columns are permuted so that
    # they do): half the reduction instructions, each touching as many lines as one v2 did
    dq_red_v4: bool = False
    # ordered dQ, lagged step: release step i's query tile after trip i + 2's GEMMs instead of at that trip's top,
    # where the release's fence waits behind the adds of step i + 1 just issued (bwd_main_pipe)
    release_late: bool = False
    # ordered dQ, lagged step: warp i % warps releases step i instead of warp 0 every step, so that on
    # bwd_main_pipe no one warp stalls on the release's fence every step while the others wait for it
    release_rotate: bool = False
    # the walk takes every query tile of a head before the next head of the GQA group (heads inner otherwise), so a
    # query tile comes back to its next visitor while it is still in L2 (narrow bands)
    heads_outer: bool = False
    # a warp skips the work of an MMA atom (16 key rows) none of whose keys the step's query tile sees: its S^T,
    # dP^T, dV and dK MMAs, A reads, probabilities and dS^T (left exact zeros, as the mask makes them anyway).
    # bwd_main's step with 32 rows per warp (two atoms, 64 keys apart: under a narrow band the edges of a KV tile's
    # walk see one of a warp's two, and with 32-row query tiles some warps see neither and run no GEMM), or the
    # lagged step with 16 (a warp no row sees runs no GEMM)
    atom_skip: bool = False
    # the dQ GEMM (keys as its k) splits the KV tile into this many parts (0: none) and leaves out the parts below
    # the first or above the last that the step sees (their dS are zeros)
    dq_skip_parts: int = 0
    # how a step's refills (Q, dO, LSE, delta) address their tiles: 0 each thread's 64-bit addresses, rebuilt from
    # the strides every step (the compilers fold the batch, head and tile offsets into per-thread 64-bit products);
    # 1 a CTA-uniform offset per step (an asm move keeps it out of the threads' arithmetic) plus each thread's
    # 32-bit offset inside the tile; 2 that, on the batch's base pointers made once per pass (asm moves too: held in
    # uniform registers)
    lean_refill: int = 0
    # the tile loads zero-fill what lies past the sequence or head dim through cp.async's source size (one
    # instruction) instead of a branch between the copy and a shared-memory store
    async_zfill: bool = True

    @property
    def dv_pad(self) -> int:
        """Width of the V, dO and dV tiles."""
        return self.head_dim_v_pad or self.head_dim_pad

    @property
    def num_warps(self) -> int:
        return GRID_WARPS if self.warp_grid else self.n_block // self.rows_per_warp

    @property
    def num_threads(self) -> int:
        return 32 * self.num_warps

    @property
    def dq_warps(self) -> tuple[int, int]:
        """(warps along query rows, warps along head dim) of the dQ GEMM."""
        # grid: 32 query rows per warp row, but at least two rows (a 32-row tile's 8 warps as 2 x 4, not 1 x 8:
        # d192's chunks split into 64 columns, not 128)
        wm = max(self.m_block // 32, 2) if self.warp_grid else min(self.num_warps, self.m_block // 16)
        return wm, self.num_warps // wm

    @property
    def dq_col_step(self) -> int:
        """Columns of one warp's slice of a dQ chunk per tiled-MMA step: 16 (ldmatrix.x4 K^T operands) or, where
        the chunk does not split into 16-column slices per warp (d48, d80, d96), 8 (ldmatrix.x2)."""
        return 16 if self.dq_chunk % (16 * self.dq_warps[1]) == 0 else 8

    @property
    def sdp_warps(self) -> tuple[int, int]:
        """warp_grid only: (warps along query rows, warps along keys) of S = Q.K^T and dP = dO.V^T."""
        return self.m_block // 16, GRID_WARPS // (self.m_block // 16)

    @property
    def dkv_warps(self) -> tuple[int, int]:
        """warp_grid only: (warps along keys, warps along head dim) of dV = P^T.dO and dK = dS^T.Q."""
        return self.n_block // 32, GRID_WARPS // (self.n_block // 32)

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Shared memory of the main kernel as it allocates it (tiles 1024-byte aligned, row vectors 128)."""
        d, dv = self.head_dim_pad, self.dv_pad
        bufs = [self.n_block * d * elem_bytes,                      # K
                self.n_block * dv * elem_bytes,                     # V
                self.m_block * d * elem_bytes * self.q_stages,     # Q
                self.m_block * dv * elem_bytes * self.do_stages,   # dO
                self.n_block * self.m_block * elem_bytes]          # dS^T
        if self.warp_grid:  # V moves to registers; P and dS then share its buffer
            bufs[1] = max(bufs[1], 2 * bufs[4])
            bufs.pop()
        if self.dq_lag:  # V moves to registers; dO's stages and two dS^T buffers then share its buffer
            bufs[1] = max(bufs[1], bufs[3] + 2 * bufs[4])
            del bufs[3:]
        vecs = [self.m_block * 4 * self.q_stages] * 2              # LSE * log2(e), delta
        mbarriers = 8 * pipe_mbarriers(self.q_stages, True) if self.dq_lag_mbar else 0  # 8 bytes each (at most)
        return sum(-(-b // 1024) * 1024 for b in bufs) + sum(-(-b // 128) * 128 for b in vecs) + mbarriers

    def check(self) -> None:
        d, (wm, wd) = self.head_dim_pad, self.dq_warps
        assert d in HEAD_DIM_PADS and self.n_block in (64, 128, 256) and self.m_block % 16 == 0
        if self.warp_grid:  # the warp grids must tile (M, N), (N, D) and (M, D) in 16x16 warp steps
            (sm, sn), (kn, kd) = self.sdp_warps, self.dkv_warps
            assert sm * sn == kn * kd == GRID_WARPS and self.q_stages == self.do_stages
            assert self.n_block % (16 * sn) == 0 and d % (16 * kd) == 0 and self.m_block % 32 == 0
            assert self.dv_pad in HEAD_DIM_PADS and self.dv_pad <= d and self.dv_pad % (16 * kd) == 0
        else:
            assert self.dv_pad == d, "the rows kernel pads V to the Q/K head dim"
        assert not (self.k_in_regs and self.warp_grid), "the grid kernel reads K from shared memory"
        assert not (self.release_at_top and self.warp_grid), "the grid kernel releases after its mid-step barrier"
        assert not self.dq_lag or (not self.warp_grid and not self.two_pass and not self.k_in_regs
                                   and self.q_stages == self.do_stages >= 2), "dq_lag: one pass, V in registers"
        assert self.q_stages <= 2 or self.dq_lag_mbar, "three stages: the mbarrier pipeline only"
        assert self.dq_lag or not self.dq_lag_mbar, "dq_lag_mbar pipelines the lagged step"
        assert not self.dq_red_v4 or (not self.warp_grid and self.dq_col_step == 16), "dq_red_v4: 16-column slices"
        assert self.dq_lag or not (self.release_late or self.release_rotate), "the lagged step's releases only"
        assert self.rows_per_warp in (16, 32) and self.n_block % self.rows_per_warp == 0
        assert not self.atom_skip or (not self.warp_grid and (self.rows_per_warp == 32) != self.dq_lag), \
            "atom_skip: bwd_main's step with two atoms per warp, or the lagged step with one"
        assert not self.dq_skip_parts or not self.warp_grid, "dq_skip_parts: the rows kernels' dQ GEMM"
        assert self.dq_skip_parts in (0, 2, 4) and self.n_block % (16 * max(self.dq_skip_parts, 1)) == 0, \
            "dq_skip_parts: 0, 2 or 4 parts of whole 16-key k-blocks"
        assert self.lean_refill in (0, 1, 2), "lean_refill: 0, 1 or 2"
        assert wm * wd == self.num_warps and self.m_block % (16 * wm) == 0
        assert d % self.dq_chunk == 0 and self.dq_chunk % (self.dq_col_step * wd) == 0
        # a dQ chunk must not start inside a swizzle atom of the K tile (swizzle_atom_cols): such a chunk computes
        # a wrong dQ
        assert self.dq_chunk % swizzle_atom_cols(d) == 0, "dq_chunk splits a swizzle atom"
        assert self.smem_bytes() <= SMEM_LIMIT_BYTES, (self, self.smem_bytes())



@dataclass(frozen=True)
class DqGemmTile:
    """The dQ GEMM kernel's CTA (dq_gemm.DqGemmKernel)."""
    tiles: int = 4        # query tiles per CTA, one per warp group
    tile_warps: int = 2   # warps per query tile (they split the head dim)
    kn: int = 64          # keys per step
    stages: int = 3

    @property
    def threads(self) -> int:
        return 32 * self.tiles * self.tile_warps

    def smem_bytes(self, head_dim_pad: int) -> int:
        return self.stages * (self.kn * head_dim_pad + self.kn * DQ_GEMM_QM * self.tiles) * 2


def pipe_mbarriers(stages: int, ordered: bool = False) -> int:
    """bwd_main_pipe's mbarriers: a full and an empty one per Q/dO stage and per dS^T buffer (two), and with ordered
    dQ two "adds done" ones (one per dS^T buffer's step)."""
    return 2 * stages + 4 + (2 if ordered else 0)

"""Tile configurations of the backward main kernel, one per padded head dim (and per narrower V pad in _TABLE_DV).

Head dims are any multiple of 8 up to 256. Both head dims (QK and V) are padded to the same served pad
(HEAD_DIM_PADS: the multiples of 32 but 224, and 48 and 80), the ``head_dim_pad`` of the tile, except where _TABLE_DV
gives V tiles of their own width (192/128: the grid kernel with 128-wide V, dO and dV tiles, 1.16x faster than V
padded to 192 on the H200, B4 H16 S4096, non-causal and causal); the logical dims are runtime values (they only
bound loads and stores), so all head dims that pad alike share one compiled kernel.

Why 32 key rows per warp at d64: every warp reads the whole Q and dO tile through ldmatrix (B operands of S^T,
dP^T, dV and dK), so the shared-memory bytes per MMA fall as the rows a warp owns grow (each B fragment feeds two
m16 atoms instead of one). The main kernel is shared-memory bound (docs/performance.md). On the H200 with SM120's
occupancy emulated (arch.launch_smem_bytes), B4 H16 S4096 bf16 vs FA2, non-causal/causal: d64 went from 0.85x/1.00x
(n128 m64, 16 rows) to 0.99x/1.16x with 32 rows, single-buffered so that two 49 KB CTAs share an SM (the
double-buffered one fits once: 0.86x/0.99x). At d128 32 rows need the two-pass walk and one 99 KB CTA of 4 warps
per SM: 0.57x/0.62x, so d128 keeps 16 rows and 8 warps, with a 128-wide dQ chunk (0.75x/0.79x; 64-wide: 0.72x/
0.76x). Without the emulation the H200 co-resides two 99 KB CTAs and ranks these tiles the other way round.
``benchmarks/bench_kernels.py --variants`` times the alternatives.

Fifth session (same bench, B4 H16 S4096, vs FA2, non-causal/causal): d32 takes 32 rows too (two 49 KB CTAs per
SM): 0.86x/0.97x -> 1.25x/1.38x. ``k_in_regs`` keeps each warp's K rows (S^T's A operand) in registers for the
walk, 8 fewer ldmatrix.x4 per warp and step: d128 +1-2 %, d96 +7 %, d32 +4 %, d192 +4 % (it spills at d64,
d224 and d256, and with 32 rows at d32). d96 moves to n128 m64 single-buffered with a 96-wide dQ chunk:
0.61x/0.73x -> 0.74x/0.87x. d160 fits one pass (160 fp32 dK/dV registers, no spill): 0.70x -> 0.88x.

Sixth session: d192 moves to the 2-D warp-grid kernel (bwd_main_grid: 8 warps, one pass, P and dS through shared
memory, V in registers) with 64 keys and 32-row query tiles: 0.55x/0.51x -> 0.70x/0.70x. The rows kernel there
needed two passes of 4 warps (dK and dV of 16 rows at d192 do not fit together). d256 takes the grid kernel in
two passes, single-buffered (64 x 256 dK and dV together with V in registers spill): 0.45x/0.44x -> 0.55x/0.57x
(0.53x/0.53x before dO got its own commit group in the dV pass, see bwd_main_grid._do_lags). Two CTAs per SM at
d128 (n64 m16, 47 KB) measured 0.62x-0.64x against n128 m32's 0.74x, and d96 n64 m32 (two CTAs) 0.70x-0.71x
against 0.74x.

Eighth session: head dims 72 and 80 (DiT/PixArt, Phi-2) pad to 80 instead of 96, on an n128 m64 double-buffered
tile with K in registers. 80 columns do not split into 16-column dQ warp slices over 8 warps' 5 x 16 columns, so
that tile's dQ GEMM steps 8 columns per warp (dq_col_step: ldmatrix.x2 K^T operands), and its 64-row Q/dO tiles
are loaded by 128 threads (cute_utils.copy_threads). vs FA2 (which runs both as 96), non-causal/causal: d72
1.07x/1.17x and d80 1.09x/1.19x, where the d96 tile they used before measures 0.75x/0.88x at d96. The 8-column
slices also let d96 take 32-row query tiles with its whole 96-wide dQ chunk over 2 x 4 dQ warps: n128 m32, Q
double-buffered, 0.75x/0.88x -> 0.79x/0.92x (n128 m32 with dO double-buffered too: 0.77x/0.91x). Head dims 40
and 48 (Stable Diffusion 1.x's first-level heads are 40) pad to 48 instead of 64, on the d64 tile's shape (n128
m32, 32 key rows per warp, two 45.5 KB CTAs per SM) double-buffered: at d48 2.485/1.310 ms on the d64 tile ->
1.979/1.055 ms (1.26x/1.24x; single-buffered 2.011/1.080 ms; the d80 shape n128 m64 with K in registers
2.419/1.290 ms).
Sixteenth session: the default mode's d80, d96 and d128 tiles take the lagged dQ (dq_lag, bwd_main_lag: one CTA
barrier per step, V in registers instead of K, dO double-buffered). B4 H16 S4096 bf16, ms non-causal/causal: d80
3.700/1.963 -> 3.322/1.776, d96 4.587/2.450 -> 4.234/2.221, d128 5.991/3.140 -> 5.765/3.010 (bench_variants'
*_mid_barrier are the tiles before). Seventeenth session: d128's default mode waits on per-stage mbarriers instead of
the barrier (dq_lag_mbar, bwd_main_pipe): 5.737/3.037 -> 5.364/2.823 ms (bench_variants' d128_lag_barrier is the
tile before); the ordered sets at d80 and d96 take the lagged step too (deterministic mode 1.10x -> 1.03x and 1.17x
-> 1.13x the default mode), d128's keeps the two-barrier step (_ORDERED_CHANGES). Then three Q/dO stages on the
mbarriers at d96 and d128 (atomic sets; d96's ordered set keeps two stages and the barrier): d128 5.358/2.837 ->
5.045/2.677 ms, d96 (B2) 2.115/1.121 -> 2.027/1.076. Nineteenth session: the ordered sets at d96 and d128 take
bwd_main_pipe too, released after the trip's GEMMs and by the warps in turn (_ORDERED_PIPE): deterministic mode
1.18x -> 1.13x (d96) and 1.22x -> 1.12x (d128) the default mode.
Twenty-third session: the 224 pad is retired; head dims 200-224 pad to 256 (the grid kernel's two passes,
dq_gemm in both modes) instead of the rows kernel's two passes on 64-key tiles (atomic dQ, dq_gemm in
deterministic mode). MHA B2 H16 S4096 bf16 on the H200, pad 224 -> 256, ms: d224 causal 4.701 -> 4.525, non-causal
8.882 -> 8.702, deterministic 4.884 / 9.818 -> 4.530 / 8.712; d200 causal 4.991 -> 4.556, non-causal 9.863 ->
8.770; GQA 2,32,8 causal + sink 9.343 -> 8.802 (deterministic 9.622 -> 8.775); a 512-token window + sink 1.369 ->
1.255; only a 128-token window + sink got slower, 0.648 -> 0.663 (deterministic 0.613 -> 0.665). The grid kernel
does 14 % more MMA work at d224 than a 224-wide tile would; on the H200 its step is latency-bound, not MMA-bound."""

from __future__ import annotations

from dataclasses import dataclass, replace

from frost.kernels.arch import SMEM_LIMIT_BYTES
from frost.kernels.geometry import swizzle_atom_cols

HEAD_DIM_MULTIPLE = 8
HEAD_DIM_MAX = 256
HEAD_DIM_PADS = (32, 48, 64, 80, 96, 128, 160, 192, 256)
GRID_WARPS = 8  # warps of a warp_grid tile (16 warps at 128 registers measured slower still: 0.58x FA2 at d128)


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
    # ordered dQ (deterministic mode, narrow bands): a query tile's first visitor stores its dQ and the last one
    # writes dQ in the io dtype (no accumulator zeroing, no convert pass; ordering.dq_order_wait). False where that
    # code spills (d192 grid on sm_90a): there ordered adds go into the zeroed accumulator, converted after.
    dq_direct: bool = True
    # masked tiles test key - row against the band offsets, one unsigned compare per score
    # (AttentionMask.zero_hidden(by_difference)): d128 GQA 2,32,8,4096 causal 3.156 -> 3.064 ms (two compares then),
    # but gpt-oss causal (d64) 2.572 -> 2.595 ms (H200, 2026-11-30); one compare instead of two (nineteenth session):
    # GQA d128 window 128 + sink -0.9 %, causal -0.2 %. d64's ordered set with it: gpt-oss window 128 + sink 0.468 ->
    # 0.455 ms, but its causal deterministic run 1.086x -> 1.114x the default mode (d64's atomic set: causal
    # +1.2 %), so d128's table tile and the narrow-band sets (_NARROW_CHANGES) only
    diff_mask: bool = False
    # ordered dQ (bwd_main's step; set in _ORDERED_CHANGES, so only the ordered set has it): release the previous
    # step's query tile right after the top-of-step barrier instead of after the mid-step one, half a step earlier. GQA
    # 2,32,8,4096 d128 causal deterministic 3.216 -> 3.175 ms, but gpt-oss d64 1.08x -> 1.14x the default mode
    # (H200, 2026-11-30, thirteenth session: there the release's MEMBAR waits on the adds just issued); only where
    # measured faster: also d32, d48, d96 (MHA B2 H16 S4096 causal deterministic: 1.170x -> 1.086x, 1.143x ->
    # 1.117x, 1.197x -> 1.073x the default mode), not d80 (0.993x -> 1.032x) or d160 (1.302x -> 1.287x). (d96 and
    # d128 run the lagged step since; see release_late)
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
    # they do): half the reduction instructions, each touching as many lines as one v2 did. The d128 step is bound
    # by the L1's LSU data pipe (ncu: 90 % of its wavefronts, 4 % of them fewer with this). d64 and d128 only: d32
    # measured 1.00x, d160 and d224 1.05x the v2 adds' time (H200, eighteenth session)
    dq_red_v4: bool = False
    # ordered dQ, lagged step (set in _ORDERED_CHANGES): release step i's query tile after trip i + 2's GEMMs
    # instead of at that trip's top, where the release's fence waits behind the adds of step i + 1 just issued.
    # Faster on bwd_main_pipe, much slower on bwd_main_lag's barrier step (nineteenth session, see both modules)
    release_late: bool = False
    # ordered dQ, lagged step: warp i % warps releases step i instead of warp 0 every step, so that on
    # bwd_main_pipe no one warp stalls on the release's fence every step while the others wait for it
    release_rotate: bool = False
    # the walk takes every query tile of a head before the next head of the GQA group (heads inner otherwise): the
    # narrow-band sets only (_NARROW_CHANGES)
    heads_outer: bool = False
    # a warp skips the work of an MMA atom (16 key rows) none of whose keys the step's query tile sees: its S^T,
    # dP^T, dV and dK MMAs, A reads, probabilities and dS^T (left exact zeros, as the mask makes them anyway).
    # bwd_main's step with 32 rows per warp (two atoms, 64 keys apart: under a narrow band the edges of a KV tile's
    # walk see one of a warp's two, so every warp's step there is about half as long, and with 32-row query tiles
    # some warps see neither and run no GEMM), or the lagged step with 16 (a warp no row sees runs no GEMM). The
    # narrow-band sets only (_NARROW_CHANGES)
    atom_skip: bool = False
    # the dQ GEMM (keys as its k) splits the KV tile into this many parts (0: none) and leaves out the parts below
    # the first or above the last that the step sees (their dS are zeros): the narrow-band sets where it measured
    # faster (_NARROW_CHANGES)
    dq_skip_parts: int = 0
    # how a step's refills (Q, dO, LSE, delta) address their tiles: 0 each thread's 64-bit addresses, rebuilt from
    # the strides every step (the compilers fold the batch, head and tile offsets into per-thread 64-bit products);
    # 1 a CTA-uniform offset per step (an asm move keeps it out of the threads' arithmetic) plus each thread's
    # 32-bit offset inside the tile; 2 that, on the batch's base pointers made once per pass (asm moves too: held in
    # uniform registers). Where it measured faster (d64's sets, _TABLE and _MHA_CHANGES)
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
        # a dQ chunk must not start inside a swizzle atom of the K tile (swizzle_atom_cols): a 32-wide
        # chunk of d=64's 64-wide atoms gave wrong dQ on the H200 (d64_r32_s11_c32 in bench_variants, 2026-11-29)
        assert self.dq_chunk % swizzle_atom_cols(d) == 0, "dq_chunk splits a swizzle atom"
        assert self.smem_bytes() <= SMEM_LIMIT_BYTES, (self, self.smem_bytes())


# The refills (TileConfig.lean_refill, async_zfill), thirtieth session: H200 bf16, whole backward, S4096, two
# processes alternating twice, ms before -> after. d64 takes lean_refill 2 with the zero-fill: gpt-oss 2,64,8 causal +
# sink 2.469 -> 2.389, deterministic 2.709 -> 2.675, 128-token window + sink 0.404 -> 0.397 (its MHA set: _MHA_CHANGES).
# The zero-fill alone elsewhere (causal; B4 H16, d160-d256 B2 H16): d32 0.694 -> 0.689, d48 1.052 -> 1.019, GQA
# 2,32,8 d96 2.077 -> 2.047, d128 2.609 -> 2.583 (non-causal 4.942 -> 4.877, GQA 2.543 -> 2.513, deterministic
# 2.710 -> 2.685), d160 2.211 -> 2.004, d192 2.518 -> 2.133, d256 4.483 -> 4.371; GQA windows + sink d96 0.341 ->
# 0.330, d128 0.410 -> 0.387; d80 slower (1.755 -> 1.891): off there. Those ran cp.async's source-size operand; the
# predicate served (cute_utils.cp_async_16_zfill) measured faster again: gpt-oss causal 2.384 -> 2.372, d160 2.006 ->
# 1.978, d192 2.139 -> 2.120 (at ptxas's default level, where it spills 4 bytes on sm_90a: compile.TARGET_PTXAS).
# Lean refills at the other pads (thirty-first session, same method, every set of a pad at once, ms served -> level
# 2 / level 1): d32 (all sets at 2) MHA B4 H16 causal 0.694 -> 0.677 / 0.700, GQA 2,32,8 causal 0.716 -> 0.676 /
# 0.709, 128-token window + sink 0.132 -> 0.129 / 0.130, deterministic MHA 0.750 -> 0.746 / 0.740; d48 (all sets at
# 1) MHA 1.031 -> 1.048 / 1.017, GQA 1.026 -> 1.031 / 1.018, window 0.188 -> 0.185 / 0.183, deterministic 1.148 ->
# 1.124 / 1.136; d80 MHA 1.762 -> 1.816 / 1.758, GQA 1.692 -> 1.748 / 1.685, window 0.271 -> 0.270 / 0.269 (kept at
# 0); d96 MHA 2.116 -> 2.127 / 2.121, GQA 2.058 -> 2.047 / 2.059, window 0.331 -> 0.337 / 0.334 (kept at 0; its
# dq_gemm set: _DQ_GEMM_CHANGES); d160's dq_gemm set (_DQ_GEMM_CHANGES) MHA B2 H16 1.994 -> 1.978 / 1.899.
_TABLE = {
    32: TileConfig(32, n_block=128, m_block=64, q_stages=2, do_stages=2, two_pass=False, dq_chunk=32,
                   rows_per_warp=32, lean_refill=2),
    48: TileConfig(48, n_block=128, m_block=32, q_stages=2, do_stages=2, two_pass=False, dq_chunk=48,
                   rows_per_warp=32, lean_refill=1),
    64: TileConfig(64, n_block=128, m_block=32, q_stages=1, do_stages=1, two_pass=False, dq_chunk=64,
                   rows_per_warp=32, dq_red_v4=True, lean_refill=2),
    80: TileConfig(80, n_block=128, m_block=64, q_stages=2, do_stages=2, two_pass=False, dq_chunk=80,
                   dq_lag=True, async_zfill=False),
    96: TileConfig(96, n_block=128, m_block=32, q_stages=3, do_stages=3, two_pass=False, dq_chunk=96,
                   dq_lag=True, dq_lag_mbar=True),
    128: TileConfig(128, n_block=128, m_block=32, q_stages=3, do_stages=3, two_pass=False, dq_chunk=128,
                    diff_mask=True, dq_lag=True, dq_lag_mbar=True, dq_red_v4=True),
    160: TileConfig(160, n_block=64, m_block=32, q_stages=2, do_stages=1, two_pass=False, dq_chunk=32),
    192: TileConfig(192, n_block=64, m_block=32, q_stages=2, do_stages=2, two_pass=False, dq_chunk=192,
                    warp_grid=True, dq_direct=False),
    256: TileConfig(256, n_block=64, m_block=32, q_stages=1, do_stages=1, two_pass=True, dq_chunk=128,
                    warp_grid=True),
}


# The ordered sets at d96 and d128 run the table's tile (bwd_main_pipe, three stages) with the release after the
# trip's GEMMs and rotated over the warps (TileConfig.release_late, release_rotate). MHA B2 H16 S4096 causal,
# deterministic / default mode, H200 bf16 (nineteenth session), against the ordered sets served before (d96: the
# lagged step with its barrier, two stages; d128: bwd_main's two-barrier step, K in registers): d128 1.225x ->
# 1.123x, GQA 2,32,8,4096 d128 1.239x -> 1.119x, d96 1.182x -> 1.134x; a 128-token window with a sink (default
# mode) GQA d128 0.524 -> 0.480 ms, d96 0.259 -> 0.249 ms. d128's ordered set adds dQ 8 bytes at a time: with
# the 16-byte adds (dq_red_v4) the late release spills on sm_120a (16-32 bytes); on the H200 they measured 0.3-0.8 %
# faster there.
_ORDERED_PIPE = {"release_late": True, "release_rotate": True}
# The set compiled for ordered dQ (deterministic mode, narrow bands) takes these changes to the pad's tile where
# they measured faster there; the atomic set keeps the table's.
# - release_at_top (see TileConfig): d32, d48 (and d96, d128 until they took the lagged step; d224 too while it was
#   a pad: MHA B2 H16 S4096 causal deterministic 1.232x -> 1.214x the default mode, fourteenth session).
# - d160: one chunk for the whole dQ, so the wait and the adds come after a single GEMM instead of being spread over
#   the step, and dO double-buffered. MHA B2 H16 S4096 causal deterministic / default mode (H200, 2026-11-30,
#   fourteenth session): 1.30x -> 1.16x with the 160-wide chunk, 1.10x with dO double-buffered too (1.20x with the
#   release at the top as well: not taken). The default mode measured the 32-wide chunks faster (bench_variants
#   d160_c160). The other pads already take their whole dQ in one chunk.
# - d96, d128: _ORDERED_PIPE (above).
_ORDERED_CHANGES = {
    32: {"release_at_top": True},
    48: {"release_at_top": True},
    96: _ORDERED_PIPE,
    128: {**_ORDERED_PIPE, "dq_red_v4": False},
    160: {"dq_chunk": 160, "do_stages": 2},
}


# The ordered sets for narrow bands (compile.KernelKey.narrow: the default mode orders dQ there too, launch.orders_dq)
# take these changes to the ordered set's tile, where they measured faster on narrow bands but slower on what the
# ordered set also serves, deterministic mode on wide bands. The GQA walk with heads outer (TileConfig.heads_outer)
# brings a query tile back to its next visitor (the KV tile above) a few steps later instead of a few times the
# group, while it is still in L2; on the relay's causal walks it breaks the visitors' lockstep (gpt-oss causal
# deterministic 1.10x -> 1.48x the default mode). The difference mask (TileConfig.diff_mask) costs d64's wide-band
# steps its registers (gpt-oss causal deterministic +1.2 %). H200 bf16, 128-token window + sink, B2 S4096,
# same process, whole backward, either mode (twenty-fifth session): gpt-oss 2,64,8 d64 0.468 -> 0.440 ms (the
# difference mask alone 0.453, heads outer alone 0.454), GQA 2,32,8 d128 0.476 -> 0.441, GQA 2,32,8 d96 0.400 -> 0.381
# (heads outer alone 0.387), MHA d64 0.147 -> 0.143, MHA d128 0.290 -> 0.285 (compile.NARROW_PTXAS included).
# d32, d48 and d80 (twenty-sixth session, same method, ordered -> heads outer alone -> both; either mode within
# 1 %): GQA 2,32,8 d32 0.143 -> 0.143 -> 0.132 ms, d48 0.211 -> 0.209 -> 0.195, d80 0.317 -> 0.306 -> 0.301; MHA
# 2,16,16 d32 0.087 -> 0.086 -> 0.083, d48 0.127 -> 0.125 -> 0.120, d80 0.209 -> 0.206 -> 0.203; d80 on a
# 512-token window (its widest ordered band) GQA 0.619 -> 0.597, MHA 0.354 -> 0.345. No spills at ptxas level 5
# (d80 takes level 6: compile.NARROW_PTXAS).
# Skipping what a step cannot see (TileConfig.atom_skip, dq_skip_parts 2; twenty-seventh session, same method, served
# -> both, ms, 128-token window + sink): gpt-oss 2,64,8 d64 0.443 -> 0.423 (without the difference mask, which with
# them spills 8 bytes on sm_90a; with it 0.413), MHA d64 0.144 -> 0.140, GQA 2,32,8 d48 0.196 -> 0.186, MHA d48
# 0.120 -> 0.117, GQA d96 0.382 -> 0.356 (atom_skip alone 0.361), GQA d80 0.296 -> 0.268 (alone 0.271), MHA d80
# 0.203 -> 0.190; on a 256-token window gpt-oss 0.602 -> 0.583, on 512 GQA d80 0.588 -> 0.567. Not taken: d32
# (atom_skip 1.00x: its 64-row query tiles leave few atoms unseen; the dQ halves 1.02x), d128 (atom_skip alone
# 0.444 -> 0.420, MHA 0.286 -> 0.270; the dQ halves slower there: atom_skip alone, except in fp16 on sm_120a,
# where it spills 32 bytes: _NARROW_TARGET_CHANGES). Twenty-eighth session: bwd_main's step (d48, d64: 32-row query
# tiles) traces a fourth path for a warp that sees none of its two atoms (under a 128-token window, two warps of four
# at a walk's first and last steps), which skips the step's GEMMs whole; that freed d64's registers for the difference
# mask (without the path it spilled 8 bytes on sm_90a; fp16 there still does: _NARROW_TARGET_CHANGES). Same method,
# ms: gpt-oss 2,64,8 d64 0.423 -> 0.404 (the path alone 0.415, the mask alone 0.413), MHA d64 0.139 -> 0.136, GQA
# 2,32,8 d48 0.187 -> 0.184. Twenty-ninth session: the dQ GEMM skips quarters of the KV tile (32 keys) instead of
# halves (TileConfig.dq_skip_parts 4; 2 before), same method, ms, served -> quarters: GQA 2,32,8 d96 0.353 / 0.352
# -> 0.340 / 0.339, MHA d96 0.228 -> 0.223; d128, which skipped no dQ part (halves spill 32 bytes on sm_120a, quarters
# do not), GQA 0.421 / 0.420 -> 0.411 / 0.409 (L 256: 0.593 -> 0.582), MHA 0.270 -> 0.265 (L 256: 0.357 -> 0.353).
# Not taken: d48 and d64 (within 0.4 %: gpt-oss 0.402 / 0.403 -> 0.402 / 0.401, L 256 0.566 / 0.567 -> 0.567 /
# 0.564), d80 (0.5 % slower); nor on the atomic d96/d128 sets (causal and full, 3-7 % slower: docs/performance.md).
_HEADS_OUTER_DIFF_MASK = {"diff_mask": True, "heads_outer": True}
_SKIP_HALVES = {"atom_skip": True, "dq_skip_parts": 2}
_SKIP_QUARTERS = {"atom_skip": True, "dq_skip_parts": 4}
_NARROW_CHANGES = ({32: _HEADS_OUTER_DIFF_MASK} | {d: _HEADS_OUTER_DIFF_MASK | _SKIP_HALVES for d in (48, 64, 80)}
                   | {96: _HEADS_OUTER_DIFF_MASK | _SKIP_QUARTERS, 128: {"heads_outer": True, **_SKIP_QUARTERS}})


def narrow_pads() -> tuple[int, ...]:
    """The Q/K pads with a narrow-band set."""
    return tuple(sorted(_NARROW_CHANGES))


def has_narrow_set(head_dim_pad: int, head_dim_v_pad: int) -> bool:
    """Whether narrow bands get an ordered set of their own at this pad pair (_NARROW_CHANGES; V padded alike)."""
    return head_dim_pad in _NARROW_CHANGES and head_dim_v_pad in (0, head_dim_pad)


# Narrower V tiles where padding V to the Q/K head dim would waste a large share of the MMA work: (Q/K pad,
# V pad) -> tile. 192/128 (DeepSeek-style MLA heads) padded to 192/192 does 15 % more MMA work (S, dK and dQ
# are 192 wide, dP and dV 128).
_TABLE_DV = {
    (192, 128): replace(_TABLE[192], head_dim_v_pad=128),
}


# Built and checked by the compile gate, timed by benchmarks/bench_variants.py, not served: the 2-D warp-grid
# kernel (bwd_main_grid) measured 0.65-0.68x FA2 at d128 on the H200 against the rows kernel's 0.72-0.74x
# (non-causal; docs/performance.md). It is served at d192 and d256 (see the top of this file).
GRID_VARIANTS = {
    "d128_grid": TileConfig(128, 64, 64, 2, 2, False, 128, warp_grid=True, dq_direct=False),
}


DQ_GEMM_QM = 32  # the query tile of the main kernels whose sets compute dQ by a GEMM of their own (their m_block)


# DqGemmTile: H200, bf16, deterministic / default mode of the whole backward (twenty-first session), MHA B4 H16
# S4096 d128 non-causal / causal, GQA 2,32,8 d128 causal, MHA B2 H16 S4096 d96 causal / non-causal: (4, 2, 64, 3)
# served 1.038 / 1.041 / 1.050 / 1.081 / 1.063; (4, 2, 32, 6) 1.062 / 1.068 / 1.073 / 1.082 / 1.065; (2, 4, 64, 3)
# 1.105 / 1.109 / 1.116 / 1.141 / 1.127; two CTAs per SM of 4 warps, (2, 2, 32, 4) and (2, 2, 64, 2), at d128
# 1.078-1.084 and 1.093-1.109 (served 1.039-1.042 in that run). One warp per query tile spills at d128 (its 128
# accumulator registers). d96 (twenty-third session, MHA B2 H16 S4096 deterministic mode, the dQ GEMM kernel alone
# causal / non-causal ms, torch profiler): (4, 2, 64, 3) 0.250 / 0.409; one warp per query tile (a 32 x 96 warp tile:
# fewer operand bytes per MMA) in two CTAs of 4 warps per SM, (4, 1, 32, 3) **0.217-0.222 / 0.331-0.341** (253
# registers on sm_90a, 248 on sm_120a, no spill), (4, 1, 16, 4) 0.219 / 0.335, (4, 1, 32, 2) 0.303 / 0.436; one
# CTA of 8 warps, (8, 1, 32, 4) 0.242 / 0.350, (8, 1, 64, 2) 0.251 / 0.357, (8, 1, 32, 3) 0.253 / 0.361; three CTAs
# of 2 warps, (2, 1, 32, 3) 0.240 / 0.409, (2, 1, 32, 4) 0.251 / 0.392.
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


# (Q/K pad, V pad: 0 = the same) -> the dQ GEMM tile of the sets whose dQ is a GEMM of its own (compile.KernelKey
# .dq_gemm): the main kernel stores dS (bwd_main_ds) and dq_gemm.py sums dQ from it. d96/d128 (bwd_main_pipe) in
# deterministic mode; d160 (bwd_main) and d192/d256 (the grid kernel) in both modes (compile.DQ_GEMM_DEFAULT_PADS).
# The d192/d256 tiles were not swept: 32-key chunks in four stages fit 80 KB, and d256 takes 4 warps per query tile so
# that each warp's accumulator stays at 64 registers (2 tiles x 4 warps: 178 registers on sm_90a, d192's 4 x 2: 250).
# d160 (and d224 while it was a pad), dQ GEMM kernel alone, MHA B2 H16 S4096 causal / non-causal (H200 bf16, torch
# profiler, twenty-second session): d160 (4, 2, 32, 4) 0.347 / 0.581 ms, (4, 2, 64, 2) 0.353 / 0.571, (4, 2, 32, 5)
# 0.346 / 0.582, (2, 4, 32, 4) 0.429 / 0.775; d224 (4, 2, 32, 4) 0.439 / 0.736, (2, 4, 32, 4) 0.540 / 0.975, (2, 4,
# 64, 2) 0.623 / 1.102, (2, 4, 32, 5) 0.542 / 0.977.
DQ_GEMM_TILES = {(96, 0): DqGemmTile(4, 1, 32, 3), (128, 0): DqGemmTile(), (160, 0): DqGemmTile(4, 2, 32, 4),
                 (192, 0): DqGemmTile(4, 2, 32, 4), (192, 128): DqGemmTile(4, 2, 32, 4),
                 (256, 0): DqGemmTile(2, 4, 32, 4)}


def dq_gemm_tile(head_dim_pad: int, head_dim_v_pad: int) -> "DqGemmTile | None":
    """DQ_GEMM_TILES' tile for a pad pair (a V pad equal to the Q/K pad counts as 0), None where there is none."""
    return DQ_GEMM_TILES.get((head_dim_pad, 0 if head_dim_v_pad == head_dim_pad else head_dim_v_pad))


def pipe_mbarriers(stages: int, ordered: bool = False) -> int:
    """bwd_main_pipe's mbarriers: a full and an empty one per Q/dO stage and per dS^T buffer (two), and with ordered
    dQ two "adds done" ones (one per dS^T buffer's step)."""
    return 2 * stages + 4 + (2 if ordered else 0)


def pad_head_dim(head_dim: int) -> int:
    """The smallest served pad that holds ``head_dim``."""
    if head_dim <= 0 or head_dim % HEAD_DIM_MULTIPLE or head_dim > HEAD_DIM_MAX:
        raise ValueError(f"head dim {head_dim}: need a positive multiple of {HEAD_DIM_MULTIPLE} <= {HEAD_DIM_MAX}")
    return next(p for p in HEAD_DIM_PADS if p >= head_dim)


def tile_for(head_dim_qk: int, head_dim_v: int) -> TileConfig:
    if head_dim_v > head_dim_qk:
        raise ValueError(f"head_dim_v {head_dim_v} > head_dim_qk {head_dim_qk} is not served")
    return tile_for_pads(pad_head_dim(head_dim_qk), pad_head_dim(head_dim_v))


# The dq_gemm sets' main kernels (bwd_main_ds) take these changes to the pad's table tile where they measured
# faster there:
# - d160: dO double-buffered (84 KB). Without the dQ GEMM that hid them, the single-buffered dO refills were the
#   step's wait: MHA H16 S4096 bf16 (H200, twenty-second session), B2 causal / non-causal 2.514 / 4.927 -> 2.228 /
#   4.293 ms, B4 5.097 / 9.837 -> 4.397 / 8.535 (main kernel 2.135 -> 1.849 ms at B2 causal). The atomic set
#   with dO double-buffered measured 2.707 / 5.310 -> 2.687 / 5.280 ms (B2): its dQ GEMM hides the refills.
# - d96 and d160: lean refills (TileConfig.lean_refill) at level 1 (thirty-first session, H200 bf16, whole backward,
#   two processes alternating twice, ms served -> level 2 / level 1): d160 MHA B2 H16 S4096 causal 1.994 -> 1.978 /
#   1.899; d96 GQA 2,32,8 S4096 causal deterministic (which takes this set) 2.151 -> 2.118 / 2.121.
# - d192: lean refills at level 2 (thirty-first session, same method, three rounds, spreads under 0.2 %): MHA B2 H16
#   S4096 causal / non-causal 2.117 / 4.135 -> 2.097 / 4.110 ms (level 1: 2.107 / 4.122). d256's measured slower
#   at either level (causal 4.270 -> 4.297 / 4.282), d128's spills 8 bytes on sm_90a at level 1.
_DQ_GEMM_CHANGES = {96: {"lean_refill": 1}, 160: {"do_stages": 2, "lean_refill": 1}, 192: {"lean_refill": 2}}


# The sets for problems without GQA (compile.KernelKey.mha, compiled with compile.MHA_PTXAS) take these changes to
# the atomic set's tile. d64 (thirtieth session, H200 bf16, whole backward, same process, MHA B4 H16 S4096 causal /
# non-causal, ms): 1.245 / 2.309 served before; lean_refill 1 with the branch zero-fill 1.235 / 2.290; the atomic
# set's lean_refill 2 with async_zfill 1.275 / 2.432 (which GQA takes: gpt-oss causal + sink 2.463 -> 2.396).
# Level 1 with the predicate zero-fill (thirty-first session, same method): 1.235 / 2.282 -> 1.213 / 2.250.
_MHA_CHANGES = {64: {"lean_refill": 1}}


def tile_for_set(tile: TileConfig, ordered: bool, dq_gemm: bool = False, narrow: bool = False,
                 mha: bool = False) -> TileConfig:
    """The tile a kernel set compiles with: the ordered set's changes (_ORDERED_CHANGES, and for the narrow-band set
    _NARROW_CHANGES after them), the dq_gemm set's (_DQ_GEMM_CHANGES) or the MHA set's (_MHA_CHANGES) applied to
    its pad's table tile (not to the narrower-V tiles, which have none)."""
    table = _ORDERED_CHANGES if ordered else _DQ_GEMM_CHANGES if dq_gemm else _MHA_CHANGES if mha else {}
    changes = table.get(tile.head_dim_pad) if not tile.head_dim_v_pad else None
    if narrow and has_narrow_set(tile.head_dim_pad, tile.head_dim_v_pad):
        changes = {**(changes or {}), **_NARROW_CHANGES[tile.head_dim_pad]}
    return replace(tile, **changes) if changes else tile


# A target whose compile of a served atomic-set or dq_gemm-set tile spills takes these changes (the compile gate
# allows no spills):
# - d128 in fp16 on sm_90a: the three-stage bwd_main_pipe spills 8 bytes there (254 registers; bf16, and fp16 on
#   SM120, do not), so that set pipelines two stages.
# - d160 in fp16 on sm_90a: the dq_gemm set's double-buffered dO (_DQ_GEMM_CHANGES) spills 8 bytes there (outside
#   the walk; bf16, and fp16 on SM120, do not), so that set keeps the table's single dO buffer (the atomic set has
#   it anyway). The dq_gemm set there spills 8 bytes with the cp.async zero-fill (TileConfig.async_zfill) too, so
#   that target's d160 sets keep the branch, and 16 bytes with lean refills at level 1 (TileConfig.lean_refill,
#   _DQ_GEMM_CHANGES), so that set refills at level 0 there.
_TARGET_CHANGES = {("sm_90a", "float16", 128): {"q_stages": 2, "do_stages": 2},
                   ("sm_90a", "float16", 160): {"do_stages": 1, "async_zfill": False, "lean_refill": 0}}
# The same for a narrow-band set: d128's atom_skip spills 32 bytes in fp16 on sm_120a (ptxas levels 5-7; bf16 there,
# and both dtypes on sm_90a, do not), so that set runs without it, and in bf16 there the cp.async zero-fill spills 8
# bytes (TileConfig.async_zfill); d64's difference mask spills 8 bytes in fp16 on sm_90a (the other three targets do
# not), so that one runs without the mask.
_NARROW_TARGET_CHANGES = {("sm_120a", "float16", 128): {"atom_skip": False},
                          ("sm_120a", "bfloat16", 128): {"async_zfill": False},
                          ("sm_90a", "float16", 64): {"diff_mask": False}}
# An ordered set (not the narrow-band one) that spills on a target takes these: d128 in fp16 on sm_120a spills 8
# bytes with the cp.async zero-fill (TileConfig.async_zfill; bf16, and both dtypes on sm_90a, do not).
_ORDERED_TARGET_CHANGES = {("sm_120a", "float16", 128): {"async_zfill": False}}


def tile_for_target(tile: TileConfig, ordered: bool, arch: str, dtype: str, dq_gemm: bool = False,
                    narrow: bool = False, mha: bool = False) -> TileConfig:
    """The tile a kernel set compiles with on ``arch`` in ``dtype``: tile_for_set, then, on the pad's table tile, the
    target's changes (the atomic and dq_gemm sets': _TARGET_CHANGES; the ordered: _ORDERED_TARGET_CHANGES; the
    narrow-band: _NARROW_TARGET_CHANGES)."""
    table = _ORDERED_TARGET_CHANGES if ordered else _TARGET_CHANGES
    changes = table.get((arch, dtype, tile.head_dim_pad)) if not tile.head_dim_v_pad else None
    if narrow and has_narrow_set(tile.head_dim_pad, tile.head_dim_v_pad):
        changes = _NARROW_TARGET_CHANGES.get((arch, dtype, tile.head_dim_pad))
    tile = tile_for_set(tile, ordered, dq_gemm, narrow, mha)
    return replace(tile, **changes) if changes else tile


def served_pads() -> tuple[tuple[int, int], ...]:
    """Every (Q/K pad, V pad) with a tile of its own (one compiled kernel set each, per dtype and arch)."""
    return tuple((d, d) for d in HEAD_DIM_PADS) + tuple(_TABLE_DV)


def all_tiles() -> tuple[TileConfig, ...]:
    """Every tile a served kernel set compiles with (both dQ orders, the dq_gemm and the narrow-band sets, each
    once)."""
    tiles = [tile_for_set(tile_for_pads(*p), o) for p in served_pads() for o in (False, True)]
    tiles += [tile_for_set(tile_for_pads(d, dv), False, True) for d, dv in DQ_GEMM_TILES]
    tiles += [tile_for_set(tile_for_pads(d), True, narrow=True) for d in narrow_pads()]
    tiles += [tile_for_set(tile_for_pads(d), False, mha=True) for d in _MHA_CHANGES]
    return tuple(dict.fromkeys(tiles))


def tile_for_pads(head_dim_pad: int, head_dim_v_pad: int = 0) -> TileConfig:
    """The tile of a padded head-dim pair: its own where _TABLE_DV has one, else the Q/K pad's (V padded up; 0:
    the same pad)."""
    tile = _TABLE_DV.get((head_dim_pad, head_dim_v_pad))
    if tile is not None:
        return tile
    try:
        return _TABLE[head_dim_pad]
    except KeyError:
        raise ValueError(f"no tile config for padded head dim {head_dim_pad}; have {HEAD_DIM_PADS}") from None

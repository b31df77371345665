"""Which CTA runs which KV tile (the launch grid's block order) and the order in which the KV tiles visiting a query
tile add their dQ when it is ordered (deterministic mode, narrow bands): the two orders the main kernels share, and
the reasons they are deadlock-free and short on waits. Also the dQ GEMM's block order (dq_gemm.py), which has the
same longest-first reason."""

import cutlass
import cutlass.cute as cute
from cutlass import Int32

from frost.kernels import cute_utils as cutil
from frost.kernels.mask import FLAG_KV_SLOWEST, FLAG_ORDERED_DQ, FLAG_Q_TILES_DOWN, MaskBounds


# Block order. Blocks are dealt out to the SMs in linear order (x fastest). A causal-like walk (no left bound, a
# right one) is longest for the low KV tiles, so there the grid is (kv heads, batch, KV tiles): every head's long
# walks start in the first waves instead of trailing at the end (longest job first). Otherwise (no mask or bands:
# walks of equal length; KV tiles past the grid's y/z limit) the grid is (KV tiles, kv heads, batch), so the CTAs
# running at once share a head's Q, dO and dQ accumulator in L2 (with heads outermost, unmasked walks wait on
# DRAM), except with ordered dQ and no left bound: there a head's KV tiles, dealt out together, start
# their walks at the same query tile and queue behind each other's releases at every tile, so the grid is
# (kv heads, batch, KV tiles) too and a wave holds a few KV tiles of every head. Both orders deal a head's KV tiles
# out in ascending order, which ordered dQ relies on.
MAX_GRID_YZ = 65535


def _grid(n_tiles, heads, batch, tiles_slowest):
    """(n_tiles, heads, batch), or (heads, batch, n_tiles) where ``tiles_slowest`` is 1 (a runtime value)."""
    keep = 1 - tiles_slowest
    return (tiles_slowest * heads + keep * n_tiles, tiles_slowest * batch + keep * heads,
            tiles_slowest * n_tiles + keep * batch)


@cute.jit
def block_order(n_kv: Int32, heads_kv: Int32, batch: Int32, bounds: MaskBounds, flags: Int32):
    """Host side: the launch grid and the flags telling the kernel which order it was given (KV tiles slowest for
    causal-like walks and for ordered dQ without a left bound)."""
    kv_slowest = Int32(0)
    ordered = (flags & FLAG_ORDERED_DQ) != 0
    if bounds.unbounded_left() & (bounds.bounded_right() | ordered) & (n_kv <= MAX_GRID_YZ):
        kv_slowest = Int32(1)
    return _grid(n_kv, heads_kv, batch, kv_slowest), flags | kv_slowest * FLAG_KV_SLOWEST


@cute.jit
def kv_tile_of_block(flags: Int32):
    """(KV tile, kv head, batch) of this CTA (see block_order)."""
    bx, by, bz = cute.arch.block_idx()
    n_block, head_kv, batch = bx, by, bz
    if (flags & FLAG_KV_SLOWEST) != 0:
        n_block, head_kv, batch = bz, bx, by
    return n_block, head_kv, batch


# The dQ GEMM (dq_gemm.py) walks, for each query tile, the KV tiles that visited it: on a causal-like walk the high
# query tiles have the long walks. Its grid was (query tiles, heads, batch), so the last head's longest walks were
# among the last CTAs dealt out and would run on alone. There the grid is (heads, batch, query tiles), dealt out
# from the last query tile down (longest job first). Elsewhere it keeps (query tiles, heads, batch) ascending
# (bands, unmasked walks: walks of equal length).
@cute.jit
def dq_gemm_block_order(n_tiles: Int32, heads: Int32, batch: Int32, bounds: MaskBounds, flags: Int32):
    """Host side: the dQ GEMM's launch grid and its flags (FLAG_Q_TILES_DOWN on causal-like walks)."""
    down = Int32(0)
    if bounds.causal_like() & (n_tiles <= MAX_GRID_YZ):
        down = Int32(1)
    return _grid(n_tiles, heads, batch, down), flags | down * FLAG_Q_TILES_DOWN


@cute.jit
def q_tile_of_block(block, grid_z: Int32, flags: Int32):
    """(query tile group, head, batch) of the dQ GEMM CTA at ``block`` (its block index) in a grid of ``grid_z``
    blocks along z (see dq_gemm_block_order)."""
    bx, by, bz = block
    tile, head, batch = bx, by, bz
    if (flags & FLAG_Q_TILES_DOWN) != 0:
        tile, head, batch = grid_z - 1 - bz, bx, by
    return tile, head, batch


# Ordered dQ (FLAG_ORDERED_DQ: deterministic mode, and the default mode on narrow bands, select.orders_dq): the KV
# tiles visiting a query tile add their dQ in a fixed order, lowest KV tile first. One semaphore per (batch, query
# head, 16 query rows) counts the visitors done with the tile; the visitor of rank r (r = n_block -
# AttentionMask.first_n_block) waits until the count reaches r (no later rank can add before that) and adds. On a
# tile with TileConfig.dq_direct, rank 0 stores instead of adding (no zeroed accumulator needed) and the last
# visitor (the next KV tile does not visit: AttentionMask.next_tile_begin) reads the sum so far, adds its own and
# writes dQ = scale * sum in the io dtype, so neither the preprocess's zeroing nor the convert pass runs (rows no
# KV tile writes are zeroed by the preprocess).
# Releasing: one lane of warp 0 releases the tile for the whole CTA one step later, right after that step's
# mid-step barrier and before its refills are issued. Every warp issued its adds before a CTA barrier that lane has
# passed since, and a release is cumulative (PTX memory model: the barrier orders the other warps' adds before it),
# so one release increment per CTA step covers them. It is a red.release (the fence of a release without the L1
# invalidate that fence.acq_rel adds), and with a step's time to land and no fresh loads outstanding its fence
# rarely waits; a release per warp would put a fence in every warp's step.
# Acquiring: an acquire load stalls the warp that issues it (its L1 invalidate), so issued early to hide its latency
# it stalls there instead. The acquire is therefore split in two: a relaxed load of the semaphore issued before the
# dQ GEMM (dq_order_peek: no invalidate, nothing stalls) and, where it already shows the rank's turn, a
# fence.acquire alone at the wait (CCTL.IVALL; else the ld.acquire spin).
# That runs on the kernel set compiled for ordered dQ (select.KernelKey.ordered); the atomic set keeps its code
# byte for byte (the peek would be work in the default mode's step, and taking the ordered path, unused there, out
# of the atomic kernel makes ptxas spill at d64). The release comes before the step's own wait, so no release waits on
# anything. The lagged steps release a step two trips later (bwd_main_lag: after the top barrier); bwd_main_pipe,
# which has no barrier, puts every thread's adds before the release through an mbarrier, releases after the trip's
# GEMMs, and lets the warps take turns releasing. docs/performance.md lists the alternatives measured.
# No deadlock: a CTA only waits on lower KV tiles of its own (batch, kv head), and block_order deals those out
# before it, so they are running or done. Short waits: every KV tile walks from the last query tile downwards, a
# tile at a time with all heads of the group inner, so the visitors of a query tile reach it in lockstep (a KV
# tile's walk only differs in where it stops: its diagonal), one step behind the tile below; and the long walks
# of causal masks are dealt out first in both modes.
@cute.jit
def dq_order_peek(sem_row: cute.Tensor, index: Int32, target: Int32) -> Int32:
    """The semaphore read early for dq_order_wait (relaxed: no L1 invalidate, so nothing stalls where it is
    issued); 0 for rank 0, which never waits."""
    seen = Int32(0)
    if target > 0:
        seen = cutil.load_relaxed(sem_row.iterator + index)
    return seen


@cute.jit
def dq_order_wait(sem_row: cute.Tensor, index: Int32, target: Int32, enabled: cutlass.Boolean, seen=None):
    """Rank 0 (the lowest visiting KV tile) adds first and never waits: no acquire for it. ``seen``: the
    semaphore as dq_order_peek read it (None: not read early)."""
    if enabled & (target > 0):
        cutil.spin_until_at_least(sem_row.iterator + index, target, seen)


@cute.jit
def dq_order_release(sem_row: cute.Tensor, index: Int32, enabled: cutlass.Boolean, warp=0):
    """One lane of warp ``warp`` (0 unless given), past a CTA barrier (bwd_main_pipe: an mbarrier wait) that
    follows every warp's adds to the tile: count the CTA done with a release increment (orders those adds before
    it)."""
    if enabled:
        if cute.arch.make_warp_uniform(cute.arch.warp_idx()) == warp:
            with cute.arch.elect_one():
                cute.arch.atomic_add(sem_row.iterator + index, Int32(1), sem="release", scope="gpu")

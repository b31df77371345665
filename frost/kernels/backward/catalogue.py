"""The backward family's catalogue: every per-head-dim, per-set and per-target choice as data. Which set a problem
runs is chosen once, by select.select, from these tables; the compile reads a set's tile, ptxas options and main
kernel variant from them. docs/performance.md lists the alternatives measured and not kept.

A kernel set is one compiled backward (preprocess, main kernel, dQ convert, and for dq_gemm sets the dQ GEMM
kernel) per (dtype, arch, padded head dims, kind). The kinds:
- atomic: dQ added in fp32 atomically (the default mode's wide bands);
- ordered: dQ added in KV-tile order (deterministic mode, and the default mode's bands up to ORDERED_BAND);
- narrow: the ordered set tuned for narrow bands (the pads of _NARROW_CHANGES);
- dq_gemm: the main kernel stores dS and a GEMM kernel of its own sums dQ per query tile (DQ_GEMM_TILES);
- mha: the atomic set compiled with other ptxas options for problems without GQA (MHA_PTXAS)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from frost.kernels.backward.tiles import DqGemmTile, TileConfig
from frost.limits import HEAD_DIM_PADS, pad_head_dim

# The tile of each padded head dim (V padded like Q/K): the atomic set's, and the base of every other set's.
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

# Narrower V tiles where padding V to the Q/K head dim would waste a large share of the MMA work: (Q/K pad, V pad)
# -> tile. 192/128 (MLA-style heads) padded to 192/192 does 15 % more MMA work (S, dK and dQ are 192 wide, dP and
# dV 128).
_TABLE_DV = {
    (192, 128): replace(_TABLE[192], head_dim_v_pad=128),
}

# The ordered set's changes to the pad's tile (the atomic set keeps the table's). d96 and d128 release a query
# tile after the trip's GEMMs, the warps in turn (bwd_main_pipe); d160 adds its whole dQ after one GEMM, with dO
# double-buffered; d128's ordered set adds dQ 8 bytes at a time (the 16-byte adds spill with the late release).
_ORDERED_PIPE = {"release_late": True, "release_rotate": True}
_ORDERED_CHANGES = {
    32: {"release_at_top": True},
    48: {"release_at_top": True},
    96: _ORDERED_PIPE,
    128: {**_ORDERED_PIPE, "dq_red_v4": False},
    160: {"dq_chunk": 160, "do_stages": 2},
}

# The narrow-band set's changes on top of the ordered set's: the GQA walk with heads outer brings a query tile back
# to its next visitor while it is still in L2, the difference mask and the skipped atoms and dQ parts cut the work a
# band leaves out. On wide bands (deterministic mode) they slow the ordered set, so narrow bands get a set of their
# own.
_HEADS_OUTER_DIFF_MASK = {"diff_mask": True, "heads_outer": True}
_SKIP_HALVES = {"atom_skip": True, "dq_skip_parts": 2}
_SKIP_QUARTERS = {"atom_skip": True, "dq_skip_parts": 4}
_NARROW_CHANGES = ({32: _HEADS_OUTER_DIFF_MASK} | {d: _HEADS_OUTER_DIFF_MASK | _SKIP_HALVES for d in (48, 64, 80)}
                   | {96: _HEADS_OUTER_DIFF_MASK | _SKIP_QUARTERS, 128: {"heads_outer": True, **_SKIP_QUARTERS}})

# The dq_gemm sets' main kernels (bwd_main_ds) take these changes to the pad's tile: with no dQ GEMM in the main
# kernel to hide them, the refills are the step's wait (d160: dO double-buffered in the room the dQ GEMM left).
_DQ_GEMM_CHANGES = {96: {"lean_refill": 1}, 160: {"do_stages": 2, "lean_refill": 1}, 192: {"lean_refill": 2}}

# The MHA set's changes to the atomic set's tile (compiled with MHA_PTXAS).
_MHA_CHANGES = {64: {"lean_refill": 1}}

# (arch, dtype, Q/K pad) -> the changes that keep a target's atomic or dq_gemm set from spilling (the compile gate
# allows no spills): d128 fp16 on sm_90a spills with three stages; d160 fp16 on sm_90a spills with the dq_gemm set's
# second dO buffer, with the cp.async zero-fill and with lean refills.
_TARGET_CHANGES = {("sm_90a", "float16", 128): {"q_stages": 2, "do_stages": 2},
                   ("sm_90a", "float16", 160): {"do_stages": 1, "async_zfill": False, "lean_refill": 0}}
# The same for a narrow-band set: d128 fp16 on sm_120a spills with atom_skip, bf16 there with the cp.async
# zero-fill; d64 fp16 on sm_90a spills with the difference mask.
_NARROW_TARGET_CHANGES = {("sm_120a", "float16", 128): {"atom_skip": False},
                          ("sm_120a", "bfloat16", 128): {"async_zfill": False},
                          ("sm_90a", "float16", 64): {"diff_mask": False}}
# The same for an ordered set: d128 fp16 on sm_120a spills with the cp.async zero-fill.
_ORDERED_TARGET_CHANGES = {("sm_120a", "float16", 128): {"async_zfill": False}}
# The packed (varlen) sets hold their segments' base addresses in registers; where that spills the table tile, the
# change that makes the main kernel spill-free: (arch, dtype, pad, ordered) -> changes
_VARLEN_TARGET_CHANGES = {("sm_90a", "bfloat16", 128, False): {"lean_refill": 2},
                          ("sm_120a", "float16", 128, True): {"release_late": False}}

# (Q/K pad, V pad: 0 = the same) -> the dQ GEMM kernel's tile of the pads that have a dq_gemm set. Deterministic
# mode takes it on wide bands at every such pad; the default mode too at DQ_GEMM_DEFAULT_PADS, whose 64-key tiles
# add twice as many fp32 dQ values per score as a 128-key tile. d256 takes 4 warps per query tile so that each
# warp's accumulator stays at 64 registers.
DQ_GEMM_TILES = {(96, 0): DqGemmTile(4, 1, 32, 3), (128, 0): DqGemmTile(), (160, 0): DqGemmTile(4, 2, 32, 4),
                 (192, 0): DqGemmTile(4, 2, 32, 4), (192, 128): DqGemmTile(4, 2, 32, 4),
                 (256, 0): DqGemmTile(2, 4, 32, 4)}
DQ_GEMM_DEFAULT_PADS = (160, 192, 256)

# Per padded Q/K head dim: the widest band (L + R) on which the default mode orders dQ too (the ordered set writes
# dQ directly, with no accumulator zeroing and no convert pass; a query tile has 2-3 visitors there). Not listed:
# never.
ORDERED_BAND = {32: 128, 48: 128, 64: 256, 80: 512, 96: 128, 128: 256, 160: 128, 256: 128}

# ptxas options of the MHA sets, by (Q/K pad, V pad, ordered): --register-usage-level 6 (ptxas's default is 5;
# higher trades registers for schedule) is faster for problems without GQA only.
MHA_PTXAS = {(64, 0, False): "--register-usage-level 6"}
# ptxas options of the narrow-band sets, by Q/K pad: at level 5 their heads-outer walk spills on sm_120a (d64,
# d128); d80 is faster at level 6.
NARROW_PTXAS = {64: "--register-usage-level 6", 80: "--register-usage-level 6", 128: "--register-usage-level 6"}
# ptxas options of a target's atomic set, by (arch, Q/K pad, V pad): d192's grid kernel with the cp.async
# zero-fill spills on sm_90a at ptxas's default level, at level 2 it does not.
TARGET_PTXAS = {("sm_90a", 192, 0): "--register-usage-level 2"}

# Built and checked by the compile gate, timed by benchmarks/bench_variants.py, not served: the 2-D warp-grid
# kernel at d128 (it is served at d192 and d256).
GRID_VARIANTS = {
    "d128_grid": TileConfig(128, 64, 64, 2, 2, False, 128, warp_grid=True, dq_direct=False),
}


@dataclass(frozen=True)
class MainVariant:
    """A main-kernel class and the sets it serves: ``serves(tile, dq_gemm)``. A new variant is an entry here and a
    class in its module."""
    module: str      # under frost.kernels.backward
    cls: str
    serves: Callable[[TileConfig, bool], bool]


# First match wins: the dq_gemm sets' kernels (they store dS), then the atomic/ordered sets' kernels.
MAIN_VARIANTS = (
    MainVariant("bwd_main_ds", "BwdMainGridDsKernel", lambda t, dq_gemm: dq_gemm and t.warp_grid),
    MainVariant("bwd_main_ds", "BwdMainDsKernel", lambda t, dq_gemm: dq_gemm and t.dq_lag_mbar),
    MainVariant("bwd_main_ds", "BwdMainRowsDsKernel", lambda t, dq_gemm: dq_gemm),
    MainVariant("bwd_main_grid", "BwdMainGridKernel", lambda t, dq_gemm: t.warp_grid),
    MainVariant("bwd_main_pipe", "BwdMainPipeKernel", lambda t, dq_gemm: t.dq_lag_mbar),
    MainVariant("bwd_main_lag", "BwdMainLagKernel", lambda t, dq_gemm: t.dq_lag),
    MainVariant("bwd_main", "BwdMainKernel", lambda t, dq_gemm: True),
)


def main_variant(tile: TileConfig, dq_gemm: bool) -> MainVariant:
    """The main-kernel variant that serves a set's tile."""
    return next(v for v in MAIN_VARIANTS if v.serves(tile, dq_gemm))


def narrow_pads() -> tuple[int, ...]:
    """The Q/K pads with a narrow-band set."""
    return tuple(sorted(_NARROW_CHANGES))


def has_narrow_set(head_dim_pad: int, head_dim_v_pad: int) -> bool:
    """Whether narrow bands get an ordered set of their own at this pad pair (V padded alike)."""
    return head_dim_pad in _NARROW_CHANGES and head_dim_v_pad in (0, head_dim_pad)


def dq_gemm_tile(head_dim_pad: int, head_dim_v_pad: int) -> DqGemmTile | None:
    """DQ_GEMM_TILES' tile for a pad pair (a V pad equal to the Q/K pad counts as 0), None where there is none."""
    return DQ_GEMM_TILES.get((head_dim_pad, 0 if head_dim_v_pad == head_dim_pad else head_dim_v_pad))


def has_dq_gemm_set(head_dim_pad: int, head_dim_v_pad: int) -> bool:
    return dq_gemm_tile(head_dim_pad, head_dim_v_pad) is not None


def has_mha_set(head_dim_pad: int, head_dim_v_pad: int, ordered: bool) -> bool:
    """Whether problems without GQA get a set of their own for this key (MHA_PTXAS)."""
    return (head_dim_pad, head_dim_v_pad, ordered) in MHA_PTXAS


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


def tile_for(head_dim_qk: int, head_dim_v: int) -> TileConfig:
    """The table tile of logical head dims."""
    if head_dim_v > head_dim_qk:
        raise ValueError(f"head_dim_v {head_dim_v} > head_dim_qk {head_dim_qk} is not served")
    return tile_for_pads(pad_head_dim(head_dim_qk), pad_head_dim(head_dim_v))


def tile_for_set(tile: TileConfig, ordered: bool, dq_gemm: bool = False, narrow: bool = False,
                 mha: bool = False) -> TileConfig:
    """The tile a kernel set compiles with: the ordered set's changes (and for the narrow-band set _NARROW_CHANGES
    after them), the dq_gemm set's or the MHA set's applied to its pad's table tile (not to the narrower-V tiles,
    which have none)."""
    table = _ORDERED_CHANGES if ordered else _DQ_GEMM_CHANGES if dq_gemm else _MHA_CHANGES if mha else {}
    changes = table.get(tile.head_dim_pad) if not tile.head_dim_v_pad else None
    if narrow and has_narrow_set(tile.head_dim_pad, tile.head_dim_v_pad):
        changes = {**(changes or {}), **_NARROW_CHANGES[tile.head_dim_pad]}
    return replace(tile, **changes) if changes else tile


def tile_for_target(tile: TileConfig, ordered: bool, arch: str, dtype: str, dq_gemm: bool = False,
                    narrow: bool = False, mha: bool = False, varlen: bool = False) -> TileConfig:
    """The tile a kernel set compiles with on ``arch`` in ``dtype``: tile_for_set, then, on the pad's table tile, the
    target's changes (the atomic and dq_gemm sets': _TARGET_CHANGES; the ordered: _ORDERED_TARGET_CHANGES; the
    narrow-band: _NARROW_TARGET_CHANGES; a packed set's: _VARLEN_TARGET_CHANGES on top)."""
    table = _ORDERED_TARGET_CHANGES if ordered else _TARGET_CHANGES
    changes = table.get((arch, dtype, tile.head_dim_pad)) if not tile.head_dim_v_pad else None
    if narrow and has_narrow_set(tile.head_dim_pad, tile.head_dim_v_pad):
        changes = _NARROW_TARGET_CHANGES.get((arch, dtype, tile.head_dim_pad))
    if varlen and not tile.head_dim_v_pad:
        changes = {**(changes or {}), **_VARLEN_TARGET_CHANGES.get((arch, dtype, tile.head_dim_pad, ordered), {})}
    tile = tile_for_set(tile, ordered, dq_gemm, narrow, mha)
    return replace(tile, **changes) if changes else tile


def ptxas_options(arch: str, head_dim_pad: int, head_dim_v_pad: int, ordered: bool, mha: bool, dq_gemm: bool,
                  narrow: bool) -> str | None:
    """A set's own ptxas options (MHA_PTXAS, NARROW_PTXAS, TARGET_PTXAS), None for ptxas's defaults."""
    if mha:
        return MHA_PTXAS[head_dim_pad, head_dim_v_pad, ordered]
    if narrow:
        return NARROW_PTXAS.get(head_dim_pad)
    if ordered or dq_gemm:
        return None
    return TARGET_PTXAS.get((arch, head_dim_pad, head_dim_v_pad))


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

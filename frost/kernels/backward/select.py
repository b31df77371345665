"""Which kernel set a problem runs, decided once: ``select`` reads the catalogue's tables and the problem and
returns the set's KernelKey. The plan (or, for direct callers, CompiledBackward.bind) calls it; the compile and the
launch take the key as given.

Each kind of set declares what it serves (the predicates below); select asks them in order:
- dq_gemm: a wide band (not one the default mode orders) at a pad with a dQ GEMM tile, in deterministic mode or at
  DQ_GEMM_DEFAULT_PADS, when the caller's workspace holds the dS region and the problem's dS fits DQ_GEMM_MAX_BYTES;
- ordered: deterministic mode, or a band of L + R up to ORDERED_BAND at the pad (where the tile writes dQ
  directly); among those, narrow: a band the default mode orders, at a pad of _NARROW_CHANGES;
- atomic otherwise;
- mha: a problem without GQA on a set of MHA_PTXAS (not a dq_gemm one)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from frost.kernels.arch import arch_config
from frost.kernels.backward import catalogue as cat
from frost.kernels.backward.ds_workspace import dq_gemm_fits
from frost.kernels.backward.tiles import TileConfig
from frost.kernels.mask import runtime_bounds
from frost.spec import Mask
from frost.limits import pad_head_dim

DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class KernelKey:
    """One compiled kernel set: everything its generated code depends on."""
    dtype: str          # "float16" | "bfloat16"
    head_dim_pad: int
    arch: str           # "sm_120a" | "sm_121a" | "sm_90a"
    head_dim_v_pad: int = 0  # 0: V padded like Q/K (catalogue.tile_for_pads)
    ordered: bool = False    # dQ added in KV-tile order, else atomically
    mha: bool = False        # the set for problems without GQA, compiled with MHA_PTXAS (serves any problem)
    dq_gemm: bool = False    # dQ by a GEMM of its own over the stored dS (dq_gemm.py; catalogue.DQ_GEMM_TILES)
    narrow: bool = False     # the ordered set for narrow bands (catalogue._NARROW_CHANGES)
    varlen: bool = False     # packed sequences: each batch's segment read from cu_seqlens (kernels/segments.py)

    def __post_init__(self):
        d, dv = self.head_dim_pad, self.head_dim_v_pad
        if self.varlen and (self.dq_gemm or self.narrow):
            raise ValueError("no varlen dq_gemm set (its dS workspace is per batch x max_seqlen squared) or "
                             "narrow-band set (packed problems take the ordered set on narrow bands)")
        if self.narrow and (not self.ordered or self.mha or not cat.has_narrow_set(d, dv)):
            raise ValueError(f"no narrow-band set for d{d} (V pad {dv}, ordered {self.ordered}, mha {self.mha}); "
                             f"catalogue._NARROW_CHANGES has {cat.narrow_pads()}")
        if self.mha and not cat.has_mha_set(d, dv, self.ordered):
            raise ValueError(f"no MHA set for d{d} (V pad {dv}, ordered {self.ordered}); catalogue.MHA_PTXAS has "
                             f"{sorted(cat.MHA_PTXAS)}")
        if self.dq_gemm and (self.ordered or self.mha or not cat.has_dq_gemm_set(d, dv)):
            raise ValueError(f"no dq_gemm set for d{d} (V pad {dv}, ordered {self.ordered}, mha {self.mha}); "
                             f"catalogue.DQ_GEMM_TILES has {sorted(cat.DQ_GEMM_TILES)}")

    @property
    def table_tile(self) -> TileConfig:
        """The pad pair's table tile (the atomic set's on most targets; the base of the others')."""
        return cat.tile_for_pads(self.head_dim_pad, self.head_dim_v_pad)

    @property
    def tile(self) -> TileConfig:
        """The tile this set compiles with (catalogue.tile_for_target)."""
        return cat.tile_for_target(self.table_tile, self.ordered, self.arch, self.dtype, self.dq_gemm, self.narrow,
                                   self.mha, self.varlen)

    @property
    def ptxas_options(self) -> str | None:
        """The set's own ptxas options, None for ptxas's defaults."""
        return cat.ptxas_options(self.arch, self.head_dim_pad, self.head_dim_v_pad, self.ordered, self.mha,
                                 self.dq_gemm, self.narrow)

    def as_str(self) -> str:
        kind = ":mha" if self.mha else ":dqg" if self.dq_gemm else ":nb" if self.narrow else ""
        return (f"frost.bwd.v4:{self.arch}:{self.dtype}:{tile_key(self.tile)}:o{int(self.ordered)}{kind}"
                + (":vl" if self.varlen else ""))


def tile_key(t: TileConfig) -> str:
    """Every field of a tile config, compactly (the code generated depends on all of them)."""
    return (f"d{t.head_dim_pad}v{t.dv_pad}:n{t.n_block}m{t.m_block}:s{t.q_stages}{t.do_stages}"
            f":p{2 if t.two_pass else 1}:c{t.dq_chunk}:b{t.min_blocks}:r{t.rows_per_warp}:g{int(t.warp_grid)}"
            f":k{int(t.k_in_regs)}:q{int(t.dq_direct)}:m{int(t.diff_mask)}:t{int(t.release_at_top)}"
            f":l{int(t.dq_lag)}{int(t.dq_lag_mbar)}:v{int(t.dq_red_v4)}"
            f":r{int(t.release_late)}{int(t.release_rotate)}:h{int(t.heads_outer)}"
            f":a{int(t.atom_skip)}{t.dq_skip_parts}:e{t.lean_refill}{int(t.async_zfill)}")


def orders_dq(tile: TileConfig, mask: Mask, deterministic: bool) -> bool:
    """Whether a problem adds dQ in KV-tile order: in deterministic mode always; in the default mode on bands of
    L + R <= ORDERED_BAND at the pad, where the tile writes dQ directly. Either way the result is bitwise
    reproducible."""
    left, right = runtime_bounds(mask)
    return deterministic or (tile.dq_direct and left + right <= cat.ORDERED_BAND.get(tile.head_dim_pad, -1))


def narrow_band_set(tile: TileConfig, mask: Mask) -> bool:
    """Whether an ordered problem runs on the narrow-band set, in either mode: a band the default mode orders at a
    pad that has that set."""
    return orders_dq(tile, mask, False) and cat.has_narrow_set(tile.head_dim_pad, tile.head_dim_v_pad)


def wants_dq_gemm(tile: TileConfig, mask: Mask, deterministic: bool) -> bool:
    """Whether a problem should run on a dq_gemm set: a pad with one, a wide band (on the narrow bands the default
    mode orders, a dS workspace of the whole score matrix would be mostly unused), in deterministic mode or at the
    pads whose default mode takes it too."""
    return ((deterministic or tile.head_dim_pad in cat.DQ_GEMM_DEFAULT_PADS)
            and cat.has_dq_gemm_set(tile.head_dim_pad, tile.head_dim_v_pad) and not orders_dq(tile, mask, False))


@dataclass(frozen=True)
class Sizes:
    """What select needs of a problem's sizes: whether its dS workspace fits (ds_workspace.dq_gemm_fits) and
    whether it has GQA."""
    batch: int
    heads: int
    heads_kv: int
    seq_q: int
    seq_kv: int


def select(dtype: str, arch: str, head_dim_qk: int, head_dim_v: int, mask: Mask, deterministic: bool, *,
           sizes: Sizes | None = None, gqa_group: int | None = None, ds_workspace: bool = True,
           varlen: bool = False) -> KernelKey:
    """The kernel set of a problem (see the top). ``sizes``: the problem's (None: not known yet, then ``gqa_group``
    says whether it has GQA, None for unknown, and a dS workspace is assumed to fit); ``ds_workspace``: whether
    the caller's workspace holds the dS region (api.workspace_regions sizes it for a dq_gemm key); ``varlen``:
    packed sequences, which run the ordered or atomic sets (a dS workspace would hold B x max_seqlen^2)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} not in {DTYPES}")
    arch_config(arch)
    tile = cat.tile_for(head_dim_qk, head_dim_v)
    gemm = ds_workspace and not varlen and wants_dq_gemm(tile, mask, deterministic) and (
        sizes is None or dq_gemm_fits(sizes.batch, sizes.heads, sizes.seq_q, sizes.seq_kv))
    ordered = orders_dq(tile, mask, deterministic) and not gemm
    without_gqa = gqa_group == 1 if sizes is None else sizes.heads == sizes.heads_kv
    mha = without_gqa and not gemm and cat.has_mha_set(tile.head_dim_pad, tile.head_dim_v_pad, ordered)
    return KernelKey(dtype, pad_head_dim(head_dim_qk), arch, tile.head_dim_v_pad, ordered, mha, gemm,
                     ordered and narrow_band_set(tile, mask) and not varlen, varlen)


def served_keys(archs=("sm_120a", "sm_90a"), dtypes=DTYPES, varlen: bool = False) -> tuple[KernelKey, ...]:
    """Every kernel set select can return on these targets (``varlen``: the packed sets, too)."""
    keys = []
    for arch in archs:
        for dt in dtypes:
            keys += [KernelKey(dt, d, arch, 0 if dv == d else dv, ordered) for d, dv in cat.served_pads()
                     for ordered in (False, True)]
            keys += [KernelKey(dt, d, arch, dv, ordered, mha=True) for d, dv, ordered in cat.MHA_PTXAS]
            keys += [KernelKey(dt, d, arch, dv, dq_gemm=True) for d, dv in cat.DQ_GEMM_TILES]
            keys += [KernelKey(dt, d, arch, ordered=True, narrow=True) for d in cat.narrow_pads()]
    if varlen:
        keys += [dataclasses.replace(k, varlen=True) for k in keys if not (k.dq_gemm or k.narrow)]
    return tuple(keys)

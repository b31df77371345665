"""Compile key -> the compiled backward (preprocess, main, dq convert behind one host entry) for one target arch.

Only what changes the generated code is in the key: dtype, padded head dims (which fix the tile config), arch,
and whether dQ is added in KV-tile order (``ordered``: deterministic mode and narrow bands, launch.orders_dq; that
set's main kernel is compiled for ordered dQ alone, which lets it read each semaphore early, see
ordering.dq_order_wait, without slowing the default mode's kernel; its preprocess and convert kernels know whether
the main kernel writes dQ, mask.main_writes_dq). Batch, heads (and the GQA group), sequence lengths (full and per
batch), logical head dims, strides, scale, the mask (band bounds, alignment) and the sink are runtime arguments
(flags and pointers), so one compiled set serves every shape and feature combination of its key. Where ptxas
options measured faster for problems without GQA only (MHA_PTXAS), such problems get a set of their own (``mha``:
the shared set's tile with tiles._MHA_CHANGES, compiled with those options; correct for any problem, chosen for
Hq == Hkv). A third kind of set
(``dq_gemm``: tiles.DQ_GEMM_TILES, deterministic mode at d96/d128, both modes at d160/d192/d256) has its main
kernel store dS and a fourth kernel compute dQ from it (dq_gemm.py), with no fp32 dQ adds. Narrow bands at some
pads run an ordered set of their own (``narrow``: tiles._NARROW_CHANGES, NARROW_PTXAS), whose changes measured
faster on narrow bands and slower on the ordered set's wide-band (deterministic) problems.
Compiling for an arch other than the device's (or with no GPU) is a cross-compile: the result can be inspected
(PTX, cubin) and exported but not launched.

The three kernels are compiled as one function, chain.BackwardChain, for TVM-FFI (``--enable-tvm-ffi``): its
launcher takes pointers as Python ints, scalars as Python numbers and the stream as a raw handle, packs them in C
and launches the kernels, so a backward costs one Python -> C call."""

import threading
from dataclasses import dataclass, field

from frost.kernels.arch import arch_config
from frost.kernels.backward.tiles import (DQ_GEMM_TILES, TileConfig, dq_gemm_tile, has_narrow_set, narrow_pads,
                                 tile_for_pads, tile_for_target)

DTYPES = ("float16", "bfloat16")

# ptxas options of the sets compiled for problems without GQA (KernelKey.mha), by (Q/K pad, V pad, ordered).
# --register-usage-level 6 (ptxas's default is 5: higher trades registers for schedule). H200 bf16, the served tile
# compiled both ways, same process (twentieth session): MHA d64 B4 H16 S4096 -4.5 % non-causal, -2.7 % causal; B2
# causal -2.7 %, B1 S16384 causal -4.0 %, B16 S1024 -2.6 % (fp16: -4.3 % / -2.3 %). With GQA groups the same build
# is slower (gpt-oss 2,64,8 causal +1.5 %, 2,32,8 causal +1.1 %, 2,64,8 non-causal +1.1 %; deterministic gpt-oss
# +2.2 %), so the default set keeps ptxas's default; at the other pads it measured within -0.4 % to +1.4 % (d48,
# d224, d256 slower), so only d64's atomic set has an MHA twin. No spills (sm_120a 250/255 registers bf16/fp16).
MHA_PTXAS = {(64, 0, False): "--register-usage-level 6"}
# ptxas options of the narrow-band sets (KernelKey.narrow), by Q/K pad: at level 5 their heads-outer walk spills on
# sm_120a (d64 8 bytes, d128 bf16 32), at level 6 it does not. d80 at level 6 (twenty-sixth session, H200 bf16,
# window + sink, B2 S4096, two processes alternating twice): GQA 2,32,8 window 128 0.303 -> 0.297 ms, window 512
# 0.597 -> 0.590, MHA unchanged (0.204); d32 and d48 measured within 0.4 % either way, so they keep the default.
NARROW_PTXAS = {64: "--register-usage-level 6", 80: "--register-usage-level 6", 128: "--register-usage-level 6"}
# ptxas options of a target's atomic set, by (arch, Q/K pad, V pad): d192's grid kernel with the cp.async zero-fill
# (tiles.TileConfig.async_zfill) spills 4 bytes on sm_90a at ptxas's default level (both dtypes; not on sm_120a),
# at level 2 it does not (250 registers). H200 bf16, MHA B2 H16 S4096 d192 causal, whole backward (thirtieth
# session, two processes alternating twice): 2.513 ms without the zero-fill, 2.140 with it at level 2 (the
# source-size form of it; the predicate form served, 2.120 at the default level with the spill).
TARGET_PTXAS = {("sm_90a", 192, 0): "--register-usage-level 2"}


# Sets whose dQ is a GEMM of its own (KernelKey.dq_gemm) exist for the pads of tiles.DQ_GEMM_TILES: deterministic
# mode takes them there; at these Q/K pads (64-key tiles, whose fp32 dQ adds are twice as many per score as a
# 128-key tile's) the default mode takes them too, and so head dims 200-224 (padded to 256 since the 224 pad went:
# its two-pass rows kernel, single-buffered with no room for a second buffer, was hardly faster without the dQ adds,
# twenty-second session, and slower than the d256 set, tiles.py's top). d160's main kernel, with dO double-buffered in
# the room the dQ GEMM left (tiles._DQ_GEMM_CHANGES), is 28 % faster (1.88 / 3.75 ms against 2.61 / 5.22), the
# backward 0.83x / 0.82x.
DQ_GEMM_DEFAULT_PADS = (160, 192, 256)


def has_dq_gemm_set(head_dim_pad: int, head_dim_v_pad: int) -> bool:
    return dq_gemm_tile(head_dim_pad, head_dim_v_pad) is not None


def has_mha_set(head_dim_pad: int, head_dim_v_pad: int, ordered: bool) -> bool:
    """Whether problems without GQA get a set of their own for this key (MHA_PTXAS)."""
    return (head_dim_pad, head_dim_v_pad, ordered) in MHA_PTXAS


@dataclass(frozen=True)
class KernelKey:
    dtype: str          # "float16" | "bfloat16"
    head_dim_pad: int
    arch: str           # "sm_120a" | "sm_121a" | "sm_90a"
    head_dim_v_pad: int = 0  # 0: V padded like Q/K (tiles.tile_for_pads)
    ordered: bool = False    # dQ added in KV-tile order (launch.orders_dq), else atomically
    mha: bool = False        # the set for problems without GQA, compiled with MHA_PTXAS (serves any problem)
    dq_gemm: bool = False    # dQ by a GEMM of its own over the stored dS (dq_gemm.py; tiles.DQ_GEMM_TILES)
    narrow: bool = False     # the ordered set for narrow bands (launch.narrow_band_set; tiles._NARROW_CHANGES)

    def __post_init__(self):
        if self.narrow and (not self.ordered or self.mha or not has_narrow_set(self.head_dim_pad,
                                                                                self.head_dim_v_pad)):
            raise ValueError(f"no narrow-band set for d{self.head_dim_pad} (V pad {self.head_dim_v_pad}, ordered "
                             f"{self.ordered}, mha {self.mha}); tiles._NARROW_CHANGES has {narrow_pads()}")
        if self.mha and not has_mha_set(self.head_dim_pad, self.head_dim_v_pad, self.ordered):
            raise ValueError(f"no MHA set for d{self.head_dim_pad} (V pad {self.head_dim_v_pad}, ordered "
                             f"{self.ordered}); MHA_PTXAS has {sorted(MHA_PTXAS)}")
        if self.dq_gemm and (self.ordered or self.mha or not has_dq_gemm_set(self.head_dim_pad,
                                                                              self.head_dim_v_pad)):
            raise ValueError(f"no dq_gemm set for d{self.head_dim_pad} (V pad {self.head_dim_v_pad}, ordered "
                             f"{self.ordered}, mha {self.mha}); tiles.DQ_GEMM_TILES has {sorted(DQ_GEMM_TILES)}")

    @property
    def tile(self) -> TileConfig:
        """The tile this set compiles with (the ordered, dq_gemm and MHA sets' and some targets' differ:
        tiles.tile_for_target)."""
        return tile_for_target(tile_for_pads(self.head_dim_pad, self.head_dim_v_pad), self.ordered, self.arch,
                               self.dtype, self.dq_gemm, self.narrow, self.mha)

    @property
    def ptxas_options(self) -> str | None:
        """The set's own ptxas options (MHA_PTXAS, NARROW_PTXAS, TARGET_PTXAS), None for ptxas's defaults."""
        if self.mha:
            return MHA_PTXAS[self.head_dim_pad, self.head_dim_v_pad, self.ordered]
        if self.narrow:
            return NARROW_PTXAS.get(self.head_dim_pad)
        if self.ordered or self.dq_gemm:
            return None
        return TARGET_PTXAS.get((self.arch, self.head_dim_pad, self.head_dim_v_pad))

    def as_str(self) -> str:
        kind = ":mha" if self.mha else ":dqg" if self.dq_gemm else ":nb" if self.narrow else ""
        return f"frost.bwd.v4:{self.arch}:{self.dtype}:{tile_key(self.tile)}:o{int(self.ordered)}{kind}"


def tile_key(t: TileConfig) -> str:
    """Every field of a tile config, compactly (the code generated depends on all of them)."""
    return (f"d{t.head_dim_pad}v{t.dv_pad}:n{t.n_block}m{t.m_block}:s{t.q_stages}{t.do_stages}"
            f":p{2 if t.two_pass else 1}:c{t.dq_chunk}:b{t.min_blocks}:r{t.rows_per_warp}:g{int(t.warp_grid)}"
            f":k{int(t.k_in_regs)}:q{int(t.dq_direct)}:m{int(t.diff_mask)}:t{int(t.release_at_top)}"
            f":l{int(t.dq_lag)}{int(t.dq_lag_mbar)}:v{int(t.dq_red_v4)}"
            f":r{int(t.release_late)}{int(t.release_rotate)}:h{int(t.heads_outer)}"
            f":a{int(t.atom_skip)}{t.dq_skip_parts}:e{t.lean_refill}{int(t.async_zfill)}")


FUNCS = ("backward",)   # the compiled functions of a set (what the disk cache exports)

# The kernel classes behind a set's cubin functions (their mangled names hold the class), by the kernel's role
KERNEL_ROLES = {"PreprocessKernel": "preprocess", "BwdMainKernel": "main", "BwdMainGridKernel": "main",
                "BwdMainLagKernel": "main", "BwdMainPipeKernel": "main", "BwdMainDsKernel": "main",
                "BwdMainGridDsKernel": "main", "BwdMainRowsDsKernel": "main",
                "DqConvertKernel": "dq_convert", "DqGemmKernel": "dq_gemm"}


def kernel_role(function: str) -> str:
    """preprocess / main / dq_convert / dq_gemm: the kernel a cubin function of a set belongs to."""
    hits = [role for cls, role in KERNEL_ROLES.items() if cls in function]
    if len(hits) != 1:
        raise ValueError(f"unknown kernel function {function[:120]}")
    return hits[0]


@dataclass
class CompiledKernels:
    key: KernelKey
    backward: object          # launcher: a raw tvm_ffi.Function (see launcher()) of chain.BackwardChain
    main_smem_bytes: int
    cubins: dict = field(default_factory=dict)     # function name -> cubin bytes (when kept; all three kernels)
    compiled: dict = field(default_factory=dict)   # function name -> cute.compile result (for export; not when loaded)


def launcher(compiled):
    """The raw tvm_ffi.Function behind a TVM-FFI compile (skips the DSL's Python kwargs wrapper). A cross-compile
    has none: it is returned as is, and calling it raises the DSL's "compiled for a different architecture" error."""
    raw = compiled.__tvm_ffi_object__()
    return compiled if raw is None else raw


def _cutlass_dtype(name: str):
    import cutlass

    return {"float16": cutlass.Float16, "bfloat16": cutlass.BFloat16}[name]


def compile_kernels(key: KernelKey, keep_cubin: bool = False, tile: TileConfig | None = None,
                    ptxas_options: str | None = None) -> CompiledKernels:
    """``tile`` overrides the table's tile config for the padded head dim and ``ptxas_options`` the set's own ptxas
    options ("": ptxas's defaults), both for benchmarks and tuning only (benchmarks/ab_variants.py)."""
    import cutlass.cute as cute
    from cutlass import Float32, Int32, Int64
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    from frost.kernels.backward.bwd_main import BwdMainKernel
    from frost.kernels.backward.bwd_main_ds import BwdMainDsKernel, BwdMainGridDsKernel, BwdMainRowsDsKernel
    from frost.kernels.backward.bwd_main_grid import BwdMainGridKernel
    from frost.kernels.backward.bwd_main_lag import BwdMainLagKernel
    from frost.kernels.backward.bwd_main_pipe import BwdMainPipeKernel
    from frost.kernels.backward.chain import BackwardChain
    from frost.kernels.backward.dq_convert import DqConvertKernel
    from frost.kernels.mask import main_writes_dq
    from frost.kernels.backward.preprocess import PreprocessKernel

    if key.dtype not in DTYPES:
        raise ValueError(f"dtype {key.dtype!r} not in {DTYPES}")
    dt = _cutlass_dtype(key.dtype)
    opts = f"--gpu-arch {key.arch} --enable-tvm-ffi"
    ptxas = key.ptxas_options if ptxas_options is None else ptxas_options
    if ptxas:
        opts += f" --ptxas-options '{ptxas}'"
    if keep_cubin:  # the DSL writes kept artifacts into the dump dir (cwd by default): keep them out of the tree
        import tempfile

        opts += f" --keep-cubin --dump-dir {tempfile.mkdtemp(prefix='frost-cubin-')}"

    def ptr(t, align=16):
        return make_ptr(t, align, cute.AddressSpace.gmem, assumed_align=align)

    tile = tile or key.tile
    if key.dq_gemm:
        main_cls = (BwdMainGridDsKernel if tile.warp_grid else BwdMainDsKernel if tile.dq_lag_mbar
                    else BwdMainRowsDsKernel)
    else:
        main_cls = (BwdMainGridKernel if tile.warp_grid else BwdMainPipeKernel if tile.dq_lag_mbar
                    else BwdMainLagKernel if tile.dq_lag else BwdMainKernel)
    arch = arch_config(key.arch)
    main_k = main_cls(dt, tile, arch, key.ordered)
    # (the dq_gemm kernel writes dQ: to the preprocess and the convert that is the same as the main kernel's doing)
    writes_dq = key.dq_gemm or main_writes_dq(tile.dq_direct, key.ordered)
    chain = BackwardChain(PreprocessKernel(dt, key.head_dim_pad, writes_dq), main_k,
                          DqConvertKernel(dt, key.head_dim_pad, writes_dq), writes_dq,
                          _dq_gemm_kernel(dt, key, tile, arch) if key.dq_gemm else None)
    i32, i64, f32 = Int32(1), Int64(8), Float32(1.0)
    # the pointers in BackwardChain's order: q k v o do (io), lse, dq dk dv (io), dq_accum lse2 delta (fp32),
    # dq_sem, dsink_part, seq_len_q, seq_len_kv, sink, dsink, dlse
    ptrs = ([ptr(dt)] * 5 + [ptr(Float32, 4)] + [ptr(dt)] * 3 + [ptr(Float32)] * 3
            + [ptr(Int32, 4), ptr(Float32, 4), ptr(Int32, 4), ptr(Int32, 4), ptr(Float32, 4), ptr(Float32, 4),
               ptr(Float32, 4)])
    backward = cute.compile(chain, *ptrs, *[i32] * 8, *[i64] * 30, f32, f32, *[i32] * 3, make_fake_stream(),
                            options=opts)
    compiled = {"backward": backward}
    cubins = {"backward": backward.__cubin__} if keep_cubin else {}
    return CompiledKernels(key, launcher(backward), main_k.smem_bytes, cubins, compiled)


def _dq_gemm_kernel(dt, key: KernelKey, tile: TileConfig, arch):
    """The dQ GEMM kernel of a dq_gemm set: its tile (tiles.DQ_GEMM_TILES), the main kernel's KV tile and whether it
    stores dS^T (the rows kernel) or dS (the grid kernel)."""
    from frost.kernels.backward.dq_gemm import DqGemmKernel

    return DqGemmKernel(dt, key.head_dim_pad, arch, dq_gemm_tile(key.head_dim_pad, key.head_dim_v_pad),
                        main_kn=tile.n_block, keys_major=not tile.warp_grid)


_CACHE: dict = {}
_LOCK = threading.Lock()


def get_kernels(key: KernelKey) -> CompiledKernels:
    """In-process cache of compiled kernel sets."""
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is None:
        hit = compile_kernels(key)
        with _LOCK:
            hit = _CACHE.setdefault(key, hit)
    return hit

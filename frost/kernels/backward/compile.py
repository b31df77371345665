"""KernelKey -> the compiled backward (preprocess, main, dQ convert, and for dq_gemm sets the dQ GEMM kernel, behind
one host entry) for one target arch.

Only what changes the generated code is in the key (select.KernelKey): dtype, padded head dims, arch and the
set's kind; the catalogue gives its tile, ptxas options and main-kernel variant. Batch, heads (and the GQA group),
sequence lengths (full and per batch), logical head dims, strides, scale, the mask (band bounds, alignment) and the
sink are runtime arguments (flags and pointers), so one compiled set serves every shape and feature combination of
its key. An ordered set's main kernel is compiled for ordered dQ alone, which lets it read each semaphore early
(ordering.dq_order_wait); its preprocess and convert kernels know whether the main kernel writes dQ
(mask.main_writes_dq). Compiling for an arch other than the device's (or with no GPU) is a cross-compile: the result
can be inspected (PTX, cubin) and exported but not launched.

The kernels are compiled as one function, chain.BackwardChain, for TVM-FFI (``--enable-tvm-ffi``): its launcher
takes pointers as Python ints, scalars as Python numbers and the stream as a raw handle, packs them in C and
launches the kernels, so a backward costs one Python -> C call."""

import importlib
from dataclasses import dataclass, field

from frost.kernels.arch import arch_config
from frost.kernels.compile_cache import CompileCache
from frost.kernels.backward.catalogue import MAIN_VARIANTS, dq_gemm_tile, main_variant
from frost.kernels.backward.select import DTYPES, KernelKey
from frost.kernels.backward.tiles import TileConfig

FUNCS = ("backward",)   # the compiled functions of a set (what the disk cache exports)

# The kernel classes behind a set's cubin functions (their mangled names hold the class), by the kernel's role
KERNEL_ROLES = ({"PreprocessKernel": "preprocess", "DqConvertKernel": "dq_convert", "DqGemmKernel": "dq_gemm"}
                | {v.cls: "main" for v in MAIN_VARIANTS})


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
    variant = main_variant(tile, key.dq_gemm)
    main_cls = getattr(importlib.import_module(f"frost.kernels.backward.{variant.module}"), variant.cls)
    arch = arch_config(key.arch)
    main_k = main_cls(dt, tile, arch, key.ordered, key.varlen)
    # (the dq_gemm kernel writes dQ: to the preprocess and the convert that is the same as the main kernel's doing)
    writes_dq = key.dq_gemm or main_writes_dq(tile.dq_direct, key.ordered)
    chain = BackwardChain(PreprocessKernel(dt, key.head_dim_pad, writes_dq, key.varlen), main_k,
                          DqConvertKernel(dt, key.head_dim_pad, writes_dq, key.varlen), writes_dq,
                          _dq_gemm_kernel(dt, key, tile, arch) if key.dq_gemm else None)
    i32, i64, f32 = Int32(1), Int64(8), Float32(1.0)
    # the pointers in BackwardChain's order: q k v o do (io), lse, dq dk dv (io), dq_accum lse2 delta (fp32),
    # dq_sem, dsink_part, seq_len_q, seq_len_kv, sink, dsink, dlse, cu_seqlens_q, cu_seqlens_kv; 11 sizes
    ptrs = ([ptr(dt)] * 5 + [ptr(Float32, 4)] + [ptr(dt)] * 3 + [ptr(Float32)] * 3
            + [ptr(Int32, 4), ptr(Float32, 4), ptr(Int32, 4), ptr(Int32, 4), ptr(Float32, 4), ptr(Float32, 4),
               ptr(Float32, 4), ptr(Int32, 4), ptr(Int32, 4)])
    backward = cute.compile(chain, *ptrs, *[i32] * 11, *[i64] * 30, f32, f32, *[i32] * 3, make_fake_stream(),
                            options=opts)
    compiled = {"backward": backward}
    cubins = {"backward": backward.__cubin__} if keep_cubin else {}
    return CompiledKernels(key, launcher(backward), main_k.smem_bytes, cubins, compiled)


def _dq_gemm_kernel(dt, key: KernelKey, tile: TileConfig, arch):
    """The dQ GEMM kernel of a dq_gemm set: its tile (catalogue.DQ_GEMM_TILES), the main kernel's KV tile and whether it
    stores dS^T (the rows kernel) or dS (the grid kernel)."""
    from frost.kernels.backward.dq_gemm import DqGemmKernel

    return DqGemmKernel(dt, key.head_dim_pad, arch, dq_gemm_tile(key.head_dim_pad, key.head_dim_v_pad),
                        main_kn=tile.n_block, keys_major=not tile.warp_grid)


_CACHE: CompileCache[KernelKey, CompiledKernels] = CompileCache(lambda key: compile_kernels(key))


def get_kernels(key: KernelKey) -> CompiledKernels:
    """In-process cache of compiled kernel sets."""
    return _CACHE.get(key)

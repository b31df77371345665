"""Compile key -> compiled kernels (preprocess, main, dq convert) for one target arch.

Only what changes the generated code is in the key: dtype, padded head dim (which fixes the tile config) and
arch. Batch, heads (and the GQA group), sequence lengths (full and per batch), logical head dims, strides, scale,
the mask (band bounds, alignment), the sink and deterministic mode are runtime arguments (flags and pointers), so
one compiled set serves every shape and feature combination of its key.
Compiling for an arch other than the device's (or with no GPU) is a cross-compile: the result can be inspected
(PTX, cubin) but not launched."""

import threading
from dataclasses import dataclass, field

from frost.kernels.tiles import TileConfig, tile_for_pad

DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class KernelKey:
    dtype: str          # "float16" | "bfloat16"
    head_dim_pad: int
    arch: str           # "sm_120a" | "sm_121a" | "sm_90a"

    @property
    def tile(self) -> TileConfig:
        return tile_for_pad(self.head_dim_pad)

    def as_str(self) -> str:
        t = self.tile
        return (f"frost.bwd.v2:{self.arch}:{self.dtype}:d{self.head_dim_pad}:n{t.n_block}m{t.m_block}"
                f":s{t.q_stages}{t.do_stages}:p{2 if t.two_pass else 1}:c{t.dq_chunk}:b{t.min_blocks}")


@dataclass
class CompiledKernels:
    key: KernelKey
    preprocess: object
    main: object
    dq_convert: object
    main_smem_bytes: int
    cubins: dict = field(default_factory=dict)   # kernel name -> cubin bytes (when kept)


def _cutlass_dtype(name: str):
    import cutlass

    return {"float16": cutlass.Float16, "bfloat16": cutlass.BFloat16}[name]


def compile_kernels(key: KernelKey, keep_cubin: bool = False, tile: TileConfig | None = None) -> CompiledKernels:
    """``tile`` overrides the table's tile config for the padded head dim (benchmarks / tuning only)."""
    import cutlass.cute as cute
    from cutlass import Float32, Int32, Int64
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    from frost.kernels.bwd_main import BwdMainKernel
    from frost.kernels.dq_convert import DqConvertKernel
    from frost.kernels.preprocess import PreprocessKernel

    if key.dtype not in DTYPES:
        raise ValueError(f"dtype {key.dtype!r} not in {DTYPES}")
    dt = _cutlass_dtype(key.dtype)
    opts = f"--gpu-arch {key.arch}"
    if keep_cubin:  # the DSL writes kept artifacts into the dump dir (cwd by default): keep them out of the tree
        import tempfile

        opts += f" --keep-cubin --dump-dir {tempfile.mkdtemp(prefix='frost-cubin-')}"

    def ptr(t, align=16):
        return make_ptr(t, align, cute.AddressSpace.gmem, assumed_align=align)

    i32, i64, stream = Int32(1), Int64(8), make_fake_stream()
    pre_k = PreprocessKernel(dt, key.head_dim_pad)
    pre = cute.compile(pre_k, ptr(dt), ptr(dt), ptr(Float32, 4), ptr(Float32), ptr(Float32), ptr(Float32),
                       ptr(Int32, 4), ptr(Float32, 4), ptr(Float32, 4), ptr(Int32, 4),
                       *[i32] * 6, *[i64] * 9, stream, options=opts)
    main_k = BwdMainKernel(dt, tile or key.tile)
    main = cute.compile(main_k, *[ptr(dt)] * 4, *[ptr(Float32)] * 3, *[ptr(dt)] * 2, *[ptr(Int32, 4)] * 3,
                        *[i32] * 8, *[i64] * 18, Float32(1.0), Float32(1.0), *[i32] * 3, stream, options=opts)
    cvt_k = DqConvertKernel(dt, key.head_dim_pad)
    cvt = cute.compile(cvt_k, ptr(Float32), ptr(dt), ptr(Float32, 4), ptr(Float32, 4), *[i32] * 6, *[i64] * 3,
                       Float32(1.0), stream, options=opts)
    cubins = {}
    if keep_cubin:
        cubins = {"preprocess": pre.__cubin__, "main": main.__cubin__, "dq_convert": cvt.__cubin__}
    return CompiledKernels(key, pre, main, cvt, main_k.smem_bytes, cubins)


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

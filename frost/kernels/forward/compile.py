"""ForwardKey -> the compiled forward kernel for one target arch, and the in-process cache of compiled kernels.

What changes the generated code is the key (select.ForwardKey): dtype, the (Q/K, V) head-dim pads (which fix the
tile, tiles.py) and the arch. Batch, heads and the GQA group, sequence lengths (full and per batch), logical head
dims, strides, the scale, the mask (band bounds, alignment) and the sink are runtime arguments, so a new shape
never recompiles. The kernel is compiled for TVM-FFI (``--enable-tvm-ffi``): its launcher takes pointers as Python
ints, scalars as Python numbers and the stream as a raw handle. Compiling for an arch other than the device's (or
with no GPU) is a cross-compile: the result can be inspected (cubin) but not launched."""

from __future__ import annotations

from dataclasses import dataclass, field

from frost.kernels.arch import arch_config
from frost.kernels.compile_cache import CompileCache
from frost.kernels.forward.select import ForwardKey
from frost.kernels.forward.tiles import ForwardTile

KERNEL_NAME = "FwdKernel"  # the class in the cubin function's mangled name


@dataclass
class CompiledForwardKernel:
    key: ForwardKey
    forward: object         # launcher: the raw tvm_ffi.Function (or the compile result for a cross-compile)
    smem_bytes: int
    cubin: bytes | None = None
    compiled: object = field(default=None, repr=False)


def _launcher(compiled):
    raw = compiled.__tvm_ffi_object__()
    return compiled if raw is None else raw


def compile_forward_kernel(key: ForwardKey, keep_cubin: bool = False,
                           tile: ForwardTile | None = None) -> CompiledForwardKernel:
    """``tile`` overrides the table's tile of the key's pads (benchmarks and tuning only)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass import Float32, Int32, Int64
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    from frost.kernels.forward.kernel import FwdKernel

    dt = {"float16": cutlass.Float16, "bfloat16": cutlass.BFloat16}[key.dtype]
    opts = f"--gpu-arch {key.arch} --enable-tvm-ffi"
    if keep_cubin:  # the DSL writes kept artifacts into the dump dir: keep them out of the tree
        import tempfile

        opts += f" --keep-cubin --dump-dir {tempfile.mkdtemp(prefix='frost-fwd-cubin-')}"

    def ptr(t, align=16):
        return make_ptr(t, align, cute.AddressSpace.gmem, assumed_align=align)

    kernel = FwdKernel(dt, tile or key.tile, arch_config(key.arch), key.varlen)
    # q k v o (io), lse (fp32), seq_len_q, seq_len_kv (int32), sink (fp32), cu_seqlens_q, cu_seqlens_kv (int32);
    # 9 sizes, 15 strides, scale_log2, band_left, band_right, flags, stream
    ptrs = [ptr(dt)] * 4 + [ptr(Float32, 4), ptr(Int32, 4), ptr(Int32, 4), ptr(Float32, 4), ptr(Int32, 4),
                            ptr(Int32, 4)]
    compiled = cute.compile(kernel, *ptrs, *[Int32(1)] * 9, *[Int64(8)] * 15, Float32(1.0), *[Int32(0)] * 3,
                            make_fake_stream(), options=opts)
    cubin = compiled.__cubin__ if keep_cubin else None
    return CompiledForwardKernel(key, _launcher(compiled), kernel.smem_bytes, cubin, compiled)


_CACHE: CompileCache[ForwardKey, CompiledForwardKernel] = CompileCache(lambda key: compile_forward_kernel(key))


def get_forward_kernel(key: ForwardKey) -> CompiledForwardKernel:
    """In-process cache of compiled forward kernels."""
    return _CACHE.get(key)

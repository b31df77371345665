"""The mma.sync ceiling: a CuTe-DSL kernel that issues only HMMA m16n8k16 (fp32 accumulation) from registers.

frost's backward kernels are built on mma.sync (the SM120 class has no wgmma/tcgen05), so the throughput this kernel
reaches on a device is the roof their TFLOP/s is judged against. Each CTA has 4 warps; each warp owns
N_ACC accumulators of 16x64 (8 independent m16n8k16 atoms each), so every warp keeps 8*N_ACC HMMA chains in flight
and the tensor pipe never waits on latency. A and B are initialised in registers from a runtime seed (nothing is
loaded, nothing is constant-folded), and the accumulators are summed and stored at the end so none is dead code.

FLOPs per launch = 2 * 64 * 64 * 16 * N_ACC * n_iter * grid (one CTA-iteration = one 64x64x16 MMA per accumulator).
Compiling needs no GPU (`compile_ceiling(dtype, "sm_90a")`); running needs one (`measure_ceiling`). This module
imports cutlass: `frost bench` loads it only for --ceiling."""

import math
from dataclasses import dataclass

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32
from cutlass.cute.nvgpu import warp
from cutlass.cute.runtime import make_fake_stream, make_ptr

from frost.bench.timing import median_ms

WARPS = 4
TILE_M, TILE_N, TILE_K = 16 * WARPS, 64, 16
N_ACC = 2                      # accumulators per warp: 2 x 8 = 16 independent HMMA chains, 64 fp32 registers
MIN_BLOCKS = 4                 # ptxas register cap so that 4 CTAs fit on one SM (<= 128 registers per thread)
DTYPES = ("bfloat16", "float16")


def flops_per_launch(grid: int, n_iter: int) -> int:
    """Dense MMA FLOPs one launch performs (2 per multiply-add)."""
    return 2 * TILE_M * TILE_N * TILE_K * N_ACC * n_iter * grid


class MmaCeilingKernel:
    def __init__(self, ab_dtype):
        self.ab_dtype = ab_dtype

    @cute.jit
    def __call__(self, p_out: cute.Pointer, grid: Int32, n_iter: Int32, seed: Float32, stream: cuda.CUstream):
        op = warp.MmaF16BF16Op(self.ab_dtype, Float32, (16, 8, 16))
        tiled_mma = cute.make_tiled_mma(op, (WARPS, 1, 1))
        out = cute.make_tensor(p_out, cute.make_layout(grid * WARPS * 32))
        self.kernel(tiled_mma, out, n_iter, seed).launch(
            grid=[grid, 1, 1], block=[WARPS * 32, 1, 1], stream=stream, min_blocks_per_mp=MIN_BLOCKS,
            preferred_smem_carveout=0)  # given, so the DSL does not query a device for it

    @cute.kernel
    def kernel(self, tiled_mma: cute.TiledMma, out: cute.Tensor, n_iter: Int32, seed: Float32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        thr = tiled_mma.get_slice(tidx)
        a = self._register_operand(thr.partition_shape_A((TILE_M, TILE_K)), seed * Float32(tidx + 1))
        b = self._register_operand(thr.partition_shape_B((TILE_N, TILE_K)), seed * Float32(bidx + 1))
        accs = [cute.make_rmem_tensor(thr.partition_shape_C((TILE_M, TILE_N)), Float32)
                for _ in range(N_ACC)]
        for acc in accs:
            acc.fill(0.0)
        for _ in cutlass.range(n_iter, unroll=4):
            for acc in accs:
                cute.gemm(tiled_mma, acc, a, b, acc)
        total = Float32(0.0)
        for acc in accs:
            total = total + acc.load().reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
        out[bidx * (WARPS * 32) + tidx] = total

    @cute.jit
    def _register_operand(self, shape, value: Float32):
        """An MMA operand fragment living in registers, from a runtime value (never a constant), distinct per
        element so that the tensor pipe sees varied data (uniform data would flatter its power draw)."""
        f32 = cute.make_rmem_tensor(shape, Float32)
        for i in cutlass.range_constexpr(cute.size(f32)):
            f32[i] = value * Float32(i + 1)
        frag = cute.make_rmem_tensor(shape, self.ab_dtype)
        frag.store(f32.load().to(self.ab_dtype))
        return frag


def _cutlass_dtype(name: str):
    return {"bfloat16": cutlass.BFloat16, "float16": cutlass.Float16}[name]


def compile_ceiling(dtype: str, arch: str, dump_dir: str | None = None):
    """Compile the ceiling kernel for `arch` ("sm_90a", "sm_120a"); works without a GPU (cross-compile). With
    `dump_dir` (an existing folder) the cubin is kept there and `compiled.__cubin__` holds its bytes."""
    kernel = MmaCeilingKernel(_cutlass_dtype(dtype))
    p_out = make_ptr(Float32, 16, cute.AddressSpace.gmem, assumed_align=16)
    opts = f"--gpu-arch {arch}" + (f" --keep-cubin --dump-dir {dump_dir}" if dump_dir else "")
    return cute.compile(kernel, p_out, Int32(1), Int32(1), Float32(1.0), make_fake_stream(), options=opts)


@dataclass(frozen=True)
class CeilingPoint:
    dtype: str
    ctas_per_sm: int
    grid: int
    ms: float
    tflops: float


def measure_ceiling(dtypes=("bfloat16", "float16"), ctas_per_sm=(1, 2, 4), n_iter: int = 1 << 17,
                    reps: int = 5) -> list[CeilingPoint]:
    """Run the kernel on the current CUDA device: median of `reps` timed launches per (dtype, CTAs per SM)."""
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}a"
    points = []
    for dtype in dtypes:
        compiled = compile_ceiling(dtype, arch)
        for k in ctas_per_sm:
            ms = _time_launch(compiled, k * sms, n_iter, reps)
            tflops = flops_per_launch(k * sms, n_iter) / (ms * 1e-3) / 1e12
            points.append(CeilingPoint(dtype, k, k * sms, ms, tflops))
    return points


def _time_launch(compiled, grid: int, n_iter: int, reps: int) -> float:
    import torch

    out = torch.empty(grid * WARPS * 32, dtype=torch.float32, device="cuda")
    p_out = make_ptr(Float32, out.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)

    def launch():
        compiled(p_out, grid, n_iter, 1e-3, stream)

    # one warm-up launch (module load, clocks), then the median of `reps` timed ones, no time cap
    ms = median_ms(lambda _: launch(), 1, warmup=1, iters=reps, max_seconds=3600.0).ms
    if not math.isfinite(float(out.sum())):
        raise RuntimeError("mma ceiling: non-finite accumulator sum (kernel misbehaved)")
    return ms

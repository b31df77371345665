"""Host-side contract of the SM120-class backward kernels (others code against these names).

    cfg = choose_config("bfloat16", 128, 128, causal=True, alignment="bottom_right", arch=detect_arch())
    ws = {name: torch.empty(n, dtype=torch.uint8, device="cuda")
          for name, n in workspace_regions(cfg, B, H, Sq, Skv)}
    bwd = compile_backward(cfg)
    bwd(q, k, v, o, do, lse, dq, dk, dv, scale=1 / math.sqrt(128), workspace=ws)

Tensors are logical BHSD (often transposed views of BSHD memory) with the head dim contiguous; every other stride
a multiple of 8 elements and every base 16-byte aligned. A call allocates nothing and never synchronizes (it only
enqueues three kernels on the stream), so it can be captured in a CUDA graph."""

from __future__ import annotations

import math
from dataclasses import dataclass

from frost.kernels import rowwise
from frost.kernels.arch import arch_config
from frost.kernels.compile import DTYPES, KernelKey, get_kernels
from frost.kernels.mask import MaskSpec
from frost.kernels.tiles import TileConfig, pad_head_dim, tile_for

LOG2_E = math.log2(math.e)
WORKSPACE_NAMES = ("dq_accum", "lse_log2", "delta")


@dataclass(frozen=True)
class KernelConfig:
    dtype: str                 # "float16" | "bfloat16"
    head_dim_qk: int           # logical (multiple of 8, <= 256)
    head_dim_v: int            # <= head_dim_qk
    causal: bool
    alignment: str             # "top_left" | "bottom_right" (ignored when not causal)
    arch: str                  # "sm_120a" | "sm_121a" | "sm_90a"
    head_dim_pad: int          # both head dims padded to this in shared memory (filled by choose_config)
    tile: TileConfig           # main-kernel tile config (filled by choose_config)

    @property
    def kernel_key(self) -> KernelKey:
        return KernelKey(self.dtype, self.head_dim_pad, self.arch)

    @property
    def mask(self) -> MaskSpec:
        return MaskSpec(self.causal, self.alignment)


def choose_config(dtype: str, head_dim_qk: int, head_dim_v: int, causal: bool, alignment: str,
                  arch: str) -> KernelConfig:
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} not in {DTYPES}")
    arch_config(arch)
    MaskSpec(bool(causal), alignment)
    tile = tile_for(head_dim_qk, head_dim_v)
    return KernelConfig(dtype, head_dim_qk, head_dim_v, bool(causal), alignment, arch,
                        pad_head_dim(head_dim_qk), tile)


def compile_key(cfg: KernelConfig) -> str:
    """Stable string of what the generated code depends on. Configs that differ only in runtime values
    (logical head dims padding alike, causal or not, alignment) share a key and one compiled kernel set."""
    return cfg.kernel_key.as_str()


def _seq_pad(seq_q: int) -> int:
    return -(-seq_q // rowwise.SEQ_PAD) * rowwise.SEQ_PAD


def workspace_regions(cfg: KernelConfig, batch: int, heads_q: int, seq_q: int, seq_kv: int) -> list[tuple[str, int]]:
    """(name, nbytes) of the caller-owned workspace: fp32 dQ accumulator and per-row LSE*log2(e) and delta,
    rows padded to a multiple of 128. Each region must start 16-byte aligned."""
    rows = batch * heads_q * _seq_pad(seq_q)
    return [("dq_accum", rows * cfg.head_dim_pad * 4), ("lse_log2", rows * 4), ("delta", rows * 4)]


def compile_backward(cfg: KernelConfig) -> "CompiledBackward":
    """Compiles (or fetches from the in-process cache) preprocess + main + dq convert for cfg.arch."""
    return CompiledBackward(cfg)


def _strides_bhs(t) -> tuple[int, int, int]:
    return t.stride(0), t.stride(1), t.stride(2)


class CompiledBackward:
    def __init__(self, cfg: KernelConfig):
        self.cfg = cfg
        self.kernels = get_kernels(cfg.kernel_key)

    def __call__(self, q, k, v, o, do, lse, dq, dk, dv, *, scale: float, workspace: dict, stream=None) -> None:
        import cuda.bindings.driver as cuda
        import torch

        cfg = self.cfg
        batch, heads, seq_q, seq_kv = self._check(q, k, v, o, do, lse, dq, dk, dv, workspace)
        if batch == 0 or heads == 0:
            return
        if stream is None:
            stream = torch.cuda.current_stream(q.device)
        cu_stream = cuda.CUstream(stream.cuda_stream)
        p = _Ptrs(cfg.dtype)
        sq_pad = _seq_pad(seq_q)
        ws = {name: workspace[name].data_ptr() for name in WORKSPACE_NAMES}
        if sq_pad:
            self.kernels.preprocess(
                p.io(o), p.io(do), p.f32(lse.data_ptr(), 4), p.f32(ws["lse_log2"]), p.f32(ws["delta"]),
                p.f32(ws["dq_accum"]), batch, heads, seq_q, sq_pad, cfg.head_dim_v,
                *_strides_bhs(o), *_strides_bhs(do), *_strides_bhs(lse), cu_stream)
        if seq_kv:
            self.kernels.main(
                p.io(q), p.io(k), p.io(v), p.io(do), p.f32(ws["lse_log2"]), p.f32(ws["delta"]),
                p.f32(ws["dq_accum"]), p.io(dk), p.io(dv), batch, heads, seq_q, seq_kv, sq_pad,
                cfg.head_dim_qk, cfg.head_dim_v, *_strides_bhs(q), *_strides_bhs(k), *_strides_bhs(v),
                *_strides_bhs(do), *_strides_bhs(dk), *_strides_bhs(dv), float(scale), float(scale) * LOG2_E,
                cfg.mask.right_offset(seq_q, seq_kv), cu_stream)
        if seq_q:
            self.kernels.dq_convert(p.f32(ws["dq_accum"]), p.io(dq), batch, heads, seq_q, sq_pad,
                                    cfg.head_dim_qk, *_strides_bhs(dq), float(scale), cu_stream)

    def _check(self, q, k, v, o, do, lse, dq, dk, dv, workspace):
        import torch

        cfg = self.cfg
        batch, heads, seq_q, dqk = q.shape
        seq_kv = k.shape[2]
        want = {"q": (q, (batch, heads, seq_q, dqk)), "k": (k, (batch, heads, seq_kv, dqk)),
                "v": (v, (batch, heads, seq_kv, cfg.head_dim_v)), "o": (o, (batch, heads, seq_q, cfg.head_dim_v)),
                "do": (do, (batch, heads, seq_q, cfg.head_dim_v)), "dq": (dq, tuple(q.shape)),
                "dk": (dk, tuple(k.shape)), "dv": (dv, tuple(v.shape))}
        tdtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[cfg.dtype]
        if dqk != cfg.head_dim_qk:
            raise ValueError(f"q head dim {dqk} != config head_dim_qk {cfg.head_dim_qk}")
        for name, (t, shape) in want.items():
            if tuple(t.shape) != shape:
                raise ValueError(f"{name}: shape {tuple(t.shape)} != {shape} (GQA is not served by these kernels yet)")
            if t.dtype != tdtype:
                raise ValueError(f"{name}: dtype {t.dtype} != {tdtype}")
            if t.numel() and (t.stride(3) != 1 or any(s % 8 for s in t.stride()[:3]) or t.data_ptr() % 16):
                raise ValueError(f"{name}: needs head-dim stride 1, other strides multiples of 8, 16-byte base")
        if tuple(lse.shape) != (batch, heads, seq_q) or lse.dtype != torch.float32:
            raise ValueError(f"lse: need fp32 {(batch, heads, seq_q)}, got {lse.dtype} {tuple(lse.shape)}")
        for name, nbytes in workspace_regions(cfg, batch, heads, seq_q, seq_kv):
            t = workspace.get(name)
            if t is None or t.numel() * t.element_size() < nbytes or t.data_ptr() % 16:
                raise ValueError(f"workspace[{name!r}]: need >= {nbytes} bytes, 16-byte aligned")
        return batch, heads, seq_q, seq_kv


class _Ptrs:
    """Typed device pointers for the compiled launchers."""

    def __init__(self, dtype: str):
        import cutlass
        import cutlass.cute as cute
        from cutlass.cute.runtime import make_ptr

        self._make, self._gmem = make_ptr, cute.AddressSpace.gmem
        self._io = {"float16": cutlass.Float16, "bfloat16": cutlass.BFloat16}[dtype]
        self._f32 = cutlass.Float32

    def io(self, t):
        return self._make(self._io, t.data_ptr(), self._gmem, assumed_align=16)

    def f32(self, addr: int, align: int = 16):
        return self._make(self._f32, addr, self._gmem, assumed_align=align)

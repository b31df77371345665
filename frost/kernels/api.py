"""Host-side contract of the SM120-class backward kernels (others code against these names).

    cfg = choose_config("bfloat16", 128, 128, causal=True, alignment="bottom_right", arch=detect_arch())
    ws = {name: torch.empty(n, dtype=torch.uint8, device="cuda")
          for name, n in workspace_regions(cfg, B, Hq, Sq, Skv, heads_kv=Hkv)}
    bwd = compile_backward(cfg)
    bwd(q, k, v, o, do, lse, dq, dk, dv, scale=1 / math.sqrt(128), workspace=ws,
        seq_len_q=None, seq_len_kv=None, band_left=None, band_right=None, sink=None, dsink=None,
        deterministic=False)

Tensors are logical BHSD (often transposed views of BSHD memory) with the head dim contiguous; every other stride
a multiple of 8 elements and every base 16-byte aligned. K/V (and dK/dV) have Hkv heads, Hq a multiple of Hkv
(GQA/MQA: query head h reads kv head h // (Hq / Hkv); dK/dV are summed over the group in fp32 in head order,
in registers -- no partials). Optional runtime features (none changes the compiled code):

- ``seq_len_q`` / ``seq_len_kv``: int32 (B,) device tensors of per-batch lengths (values in [0, Sq] / [0, Skv];
  checked only with ``check_lengths=True``, which synchronizes); padded rows of dQ/dK/dV come out exact zeros.
- ``band_left`` / ``band_right``: band around the diagonal (None = unbounded; causal in the config means
  band_right defaults to 0); the config's alignment anchors the diagonal (bottom-right: j = i + skv_b - sq_b).
- ``sink`` fp32 (Hq,) with ``dsink`` fp32 (Hq,) output: dsink_h = -sum exp(sink_h - LSE) * delta over valid rows.
- ``deterministic=True``: dQ contributions are added in KV-tile order (bitwise-reproducible dQ; dK, dV and
  dsink are deterministic in every mode).

A call allocates nothing and never synchronizes (it only enqueues three kernels on the stream, plus a dsink
zero-fill when Sq = 0), so it can be captured in a CUDA graph."""

from __future__ import annotations

import math
from dataclasses import dataclass

from frost.kernels import rowwise
from frost.kernels.arch import arch_config
from frost.kernels.compile import DTYPES, KernelKey, get_kernels
from frost.errors import TensorError
from frost.kernels.mask import (FLAG_DETERMINISTIC, FLAG_SEQ_KV, FLAG_SEQ_Q, FLAG_SINK, MAX_SEQ, MaskSpec)
from frost.kernels.preprocess import SEM_ROWS
from frost.kernels.tiles import TileConfig, pad_head_dim, tile_for

LOG2_E = math.log2(math.e)
WORKSPACE_NAMES = ("dq_accum", "lse_log2", "delta", "dq_sem", "dsink_part")


@dataclass(frozen=True)
class KernelConfig:
    dtype: str                 # "float16" | "bfloat16"
    head_dim_qk: int           # logical (multiple of 8, <= 256)
    head_dim_v: int            # <= head_dim_qk
    causal: bool
    alignment: str             # "top_left" | "bottom_right" (anchors causal and band bounds)
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
    (logical head dims padding alike, causal or not, alignment; and per call: GQA group, lengths, band, sink,
    deterministic) share a key and one compiled kernel set."""
    return cfg.kernel_key.as_str()


def _seq_pad(seq_q: int) -> int:
    return -(-seq_q // rowwise.SEQ_PAD) * rowwise.SEQ_PAD


def workspace_regions(cfg: KernelConfig, batch: int, heads_q: int, seq_q: int, seq_kv: int,
                      heads_kv: int | None = None) -> list[tuple[str, int]]:
    """(name, nbytes) of the caller-owned workspace: fp32 dQ accumulator and per-row LSE*log2(e) and delta
    (rows padded to a multiple of 128), the deterministic-mode dQ-order semaphores (one int32 per 16 rows) and the
    dsink partials (one fp32 per 128 rows). Each region must start 16-byte aligned. No region depends on heads_kv
    (GQA sums dK/dV in registers) or on the features used, so one workspace serves every call of a shape."""
    del heads_kv, seq_kv
    rows = batch * heads_q * _seq_pad(seq_q)
    return [("dq_accum", rows * cfg.head_dim_pad * 4), ("lse_log2", rows * 4), ("delta", rows * 4),
            ("dq_sem", _round16(rows // SEM_ROWS * 4)), ("dsink_part", _round16(rows // rowwise.ROWS_PER_CTA * 4))]


def _round16(n: int) -> int:
    return -(-n // 16) * 16


def compile_backward(cfg: KernelConfig) -> "CompiledBackward":
    """Compiles (or fetches from the in-process cache) preprocess + main + dq convert for cfg.arch."""
    return CompiledBackward(cfg)


def _strides_bhs(t) -> tuple[int, int, int]:
    return t.stride(0), t.stride(1), t.stride(2)


class CompiledBackward:
    def __init__(self, cfg: KernelConfig):
        self.cfg = cfg
        self.kernels = get_kernels(cfg.kernel_key)

    def __call__(self, q, k, v, o, do, lse, dq, dk, dv, *, scale: float, workspace: dict, stream=None,
                 seq_len_q=None, seq_len_kv=None, band_left: int | None = None, band_right: int | None = None,
                 sink=None, dsink=None, deterministic: bool = False, check_lengths: bool = False) -> None:
        import cuda.bindings.driver as cuda
        import torch

        cfg = self.cfg
        batch, heads, heads_kv, seq_q, seq_kv = self._check(q, k, v, o, do, lse, dq, dk, dv, workspace)
        mask = MaskSpec(cfg.causal, cfg.alignment, band_left, band_right)
        left, right = mask.bounds()
        flags = mask.flags() | (FLAG_DETERMINISTIC if deterministic else 0)
        flags |= _check_side_inputs(q, batch, heads, seq_q, seq_kv, seq_len_q, seq_len_kv, sink, dsink,
                                    check_lengths)
        if batch == 0 or heads == 0:
            if dsink is not None:
                dsink.zero_()
            return
        if stream is None:
            stream = torch.cuda.current_stream(q.device)
        cu_stream = cuda.CUstream(stream.cuda_stream)
        p = _Ptrs(cfg.dtype)
        sq_pad = _seq_pad(seq_q)
        ws = {name: workspace[name].data_ptr() for name in WORKSPACE_NAMES}
        dummy = ws["delta"]  # stands in for absent optional tensors (never dereferenced: its flag is off)
        seq_q_ptr = p.i32(seq_len_q.data_ptr() if seq_len_q is not None else dummy)
        seq_kv_ptr = p.i32(seq_len_kv.data_ptr() if seq_len_kv is not None else dummy)
        sink_ptr = p.f32(sink.data_ptr() if sink is not None else dummy, 4)
        dsink_ptr = p.f32(dsink.data_ptr() if dsink is not None else dummy, 4)
        if sq_pad:
            self.kernels.preprocess(
                p.io(o), p.io(do), p.f32(lse.data_ptr(), 4), p.f32(ws["lse_log2"]), p.f32(ws["delta"]),
                p.f32(ws["dq_accum"]), seq_q_ptr, sink_ptr, p.f32(ws["dsink_part"], 4), p.i32(ws["dq_sem"]),
                batch, heads, seq_q, sq_pad, cfg.head_dim_v, flags,
                *_strides_bhs(o), *_strides_bhs(do), *_strides_bhs(lse), cu_stream)
        elif dsink is not None:
            dsink.zero_()
        if seq_kv:
            self.kernels.main(
                p.io(q), p.io(k), p.io(v), p.io(do), p.f32(ws["lse_log2"]), p.f32(ws["delta"]),
                p.f32(ws["dq_accum"]), p.io(dk), p.io(dv), seq_q_ptr, seq_kv_ptr, p.i32(ws["dq_sem"]),
                batch, heads, heads_kv, seq_q, seq_kv, sq_pad, cfg.head_dim_qk, cfg.head_dim_v,
                *_strides_bhs(q), *_strides_bhs(k), *_strides_bhs(v), *_strides_bhs(do), *_strides_bhs(dk),
                *_strides_bhs(dv), float(scale), float(scale) * LOG2_E, left, right, flags, cu_stream)
        if seq_q:
            self.kernels.dq_convert(p.f32(ws["dq_accum"]), p.io(dq), p.f32(ws["dsink_part"], 4), dsink_ptr,
                                    batch, heads, seq_q, sq_pad, cfg.head_dim_qk, flags, *_strides_bhs(dq),
                                    float(scale), cu_stream)

    def _check(self, q, k, v, o, do, lse, dq, dk, dv, workspace):
        import torch

        cfg = self.cfg
        batch, heads, seq_q, dqk = q.shape
        heads_kv, seq_kv = k.shape[1], k.shape[2]
        if heads_kv == 0 and heads or heads_kv and heads % heads_kv:
            raise TensorError("k.shape[1]", heads_kv, f"a divisor of the query heads {heads} (GQA/MQA)")
        if max(seq_q, seq_kv) > MAX_SEQ:
            raise TensorError("sequence length", max(seq_q, seq_kv), f"<= {MAX_SEQ}")
        want = {"q": (q, (batch, heads, seq_q, dqk)), "k": (k, (batch, heads_kv, seq_kv, dqk)),
                "v": (v, (batch, heads_kv, seq_kv, cfg.head_dim_v)), "o": (o, (batch, heads, seq_q, cfg.head_dim_v)),
                "do": (do, (batch, heads, seq_q, cfg.head_dim_v)), "dq": (dq, tuple(q.shape)),
                "dk": (dk, tuple(k.shape)), "dv": (dv, tuple(v.shape))}
        tdtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[cfg.dtype]
        if dqk != cfg.head_dim_qk:
            raise ValueError(f"q head dim {dqk} != config head_dim_qk {cfg.head_dim_qk}")
        for name, (t, shape) in want.items():
            if tuple(t.shape) != shape:
                raise ValueError(f"{name}: shape {tuple(t.shape)} != {shape}")
            if t.dtype != tdtype:
                raise ValueError(f"{name}: dtype {t.dtype} != {tdtype}")
            if t.numel() and (t.stride(3) != 1 or any(s % 8 for s in t.stride()[:3]) or t.data_ptr() % 16):
                raise ValueError(f"{name}: needs head-dim stride 1, other strides multiples of 8, 16-byte base")
        if tuple(lse.shape) != (batch, heads, seq_q) or lse.dtype != torch.float32:
            raise ValueError(f"lse: need fp32 {(batch, heads, seq_q)}, got {lse.dtype} {tuple(lse.shape)}")
        for name, nbytes in workspace_regions(cfg, batch, heads, seq_q, seq_kv, heads_kv):
            t = workspace.get(name)
            if t is None or t.numel() * t.element_size() < max(nbytes, 16) or t.data_ptr() % 16:
                raise ValueError(f"workspace[{name!r}]: need >= {max(nbytes, 16)} bytes, 16-byte aligned")
        return batch, heads, heads_kv, seq_q, seq_kv


def _check_side_tensor(name: str, t, shape: tuple, dtype, device) -> None:
    import torch

    if not isinstance(t, torch.Tensor):
        raise TensorError(name, type(t).__name__, f"a {dtype} tensor of shape {shape} on {device}")
    if tuple(t.shape) != shape:
        raise TensorError(f"{name}.shape", tuple(t.shape), f"{shape}")
    if t.dtype != dtype:
        raise TensorError(f"{name}.dtype", t.dtype, f"{dtype}")
    if t.device != device:
        raise TensorError(f"{name}.device", t.device, f"{device} (the device of q)")
    if t.numel() > 1 and t.stride(0) != 1:
        raise TensorError(f"{name}.stride", t.stride(), "contiguous")


def _check_side_inputs(q, batch, heads, seq_q, seq_kv, seq_len_q, seq_len_kv, sink, dsink, check_lengths) -> int:
    """Validate the optional runtime tensors (before any launch); returns their feature flags."""
    import torch

    flags = 0
    for name, t, full, flag in (("seq_len_q", seq_len_q, seq_q, FLAG_SEQ_Q),
                                ("seq_len_kv", seq_len_kv, seq_kv, FLAG_SEQ_KV)):
        if t is None:
            continue
        _check_side_tensor(name, t, (batch,), torch.int32, q.device)
        flags |= flag
        if check_lengths and batch and (int(t.min()) < 0 or int(t.max()) > full):
            raise TensorError(name, t.tolist(), f"lengths in [0, {full}]")
    if (sink is None) != (dsink is None):
        raise TensorError("dsink", None if dsink is None else "a tensor",
                          "a fp32 (Hq,) output exactly when sink is given")
    if sink is not None:
        _check_side_tensor("sink", sink, (heads,), torch.float32, q.device)
        _check_side_tensor("dsink", dsink, (heads,), torch.float32, q.device)
        flags |= FLAG_SINK
    return flags


class _Ptrs:
    """Typed device pointers for the compiled launchers."""

    def __init__(self, dtype: str):
        import cutlass
        import cutlass.cute as cute
        from cutlass.cute.runtime import make_ptr

        self._make, self._gmem = make_ptr, cute.AddressSpace.gmem
        self._io = {"float16": cutlass.Float16, "bfloat16": cutlass.BFloat16}[dtype]
        self._f32, self._i32 = cutlass.Float32, cutlass.Int32

    def io(self, t):
        return self._make(self._io, t.data_ptr(), self._gmem, assumed_align=16)

    def f32(self, addr: int, align: int = 16):
        return self._make(self._f32, addr, self._gmem, assumed_align=align)

    def i32(self, addr: int):
        return self._make(self._i32, addr, self._gmem, assumed_align=4)

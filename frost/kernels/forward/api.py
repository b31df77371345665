"""Host-side contract of the SM120-class forward kernel.

    cfg = choose_forward_config("bfloat16", 128, 128, arch=detect_arch())
    fwd = compile_forward(cfg)
    fwd(q, k, v, o, lse, scale=1 / math.sqrt(128), causal=True, alignment="bottom_right",
        band_left=None, band_right=None, seq_len_q=None, seq_len_kv=None, sink=None, stream=None)

q (B, Hq, Sq, Dqk), k (B, Hkv, Skv, Dqk), v (B, Hkv, Skv, Dv) and the output o (B, Hq, Sq, Dv) are logical BHSD
(often transposed views of BSHD memory) in one io dtype, head dim contiguous, every other stride a multiple of 8
elements and every base 16-byte aligned; lse (B, Hq, Sq) fp32, any strides, receives the natural-log LSE with the
sink term. Hq is a multiple of Hkv (query head h reads kv head h // (Hq / Hkv)). Runtime features, none of which
changes the compiled code:

- ``causal`` / ``alignment`` / ``band_left`` / ``band_right``: the mask (mask.MaskSpec: causal means band_right
  defaults to 0; None is unbounded; the alignment anchors the diagonal, bottom-right at j = i + skv_b - sq_b).
- ``seq_len_q`` / ``seq_len_kv``: int32 (B,) device tensors of per-batch lengths (clamped to [0, S] in the kernel;
  checked only with ``check_lengths=True``, which synchronizes). Padded rows get O = 0 and LSE = -inf.
- ``scale``: a finite number > 0 (the IR's attn_scale contract).
- ``sink``: fp32 (Hq,) logits in natural-log units (not scaled): they enlarge each row's softmax denominator.

A call allocates nothing and never synchronizes (one launch through TVM-FFI), so it can be captured in a CUDA
graph. Rows past Sq are not written; a (B, H, 0) problem launches nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass

from frost.errors import TensorError
from frost.kernels.arch import arch_config
from frost.kernels.forward.compile import DTYPES, ForwardKey, get_forward_kernel
from frost.kernels.forward.tiles import forward_pads
from frost.kernels.geometry import LOG2_E
from frost.kernels.mask import FLAG_SEQ_KV, FLAG_SEQ_Q, FLAG_SINK, MaskSpec
from frost.kernels.packed import Packed


@dataclass(frozen=True)
class ForwardConfig:
    dtype: str            # "float16" | "bfloat16"
    head_dim_qk: int      # logical (multiple of 8, <= 256)
    head_dim_v: int       # <= head_dim_qk
    arch: str             # "sm_120a" | "sm_121a" | "sm_90a"
    head_dim_pad: int     # Q/K tile width (filled by choose_forward_config)
    head_dim_v_pad: int   # V / O tile width
    varlen: bool = False  # packed sequences (the kernel reads each batch's segment from cu_seqlens)

    @property
    def key(self) -> ForwardKey:
        return ForwardKey(self.dtype, self.head_dim_pad, self.head_dim_v_pad, self.arch, self.varlen)


def choose_forward_config(dtype: str, head_dim_qk: int, head_dim_v: int, arch: str,
                          varlen: bool = False) -> ForwardConfig:
    """The config of a forward problem: the dtype, the head-dim pads, the target and packing pick the compiled
    kernel."""
    if dtype not in DTYPES:
        raise TensorError("dtype", dtype, f"one of {DTYPES}")
    try:
        arch_config(arch)
        pad, pad_v = forward_pads(head_dim_qk, head_dim_v)
    except ValueError as e:
        raise TensorError("forward config", (head_dim_qk, head_dim_v, arch), "see detail", str(e)) from None
    return ForwardConfig(dtype, head_dim_qk, head_dim_v, arch, pad, pad_v, bool(varlen))


def forward_compile_key(cfg: ForwardConfig) -> str:
    """Stable string of what the generated code depends on (configs padding alike share it)."""
    return cfg.key.as_str()


def compile_forward(cfg: ForwardConfig) -> "CompiledForward":
    """Compiles (or fetches from the in-process cache) the forward kernel for cfg.arch."""
    return CompiledForward(cfg)


def mask_values(causal: bool, alignment: str, band_left, band_right) -> tuple[int, int, int]:
    """(band_left, band_right, alignment flags) the kernel takes, from the caller's mask keywords."""
    try:
        spec = MaskSpec(bool(causal), alignment, band_left, band_right)
    except ValueError as e:
        raise TensorError("mask", (causal, alignment, band_left, band_right), "see detail", str(e)) from None
    left, right = spec.bounds()
    return left, right, spec.flags()


@dataclass(frozen=True)
class ForwardMask:
    """What a plan fixes for every call of its forward: the softmax scale and the mask (mask.MaskSpec's rules)."""
    scale: float
    causal: bool = False
    alignment: str = "top_left"
    band_left: int | None = None
    band_right: int | None = None


class CompiledForward:
    def __init__(self, cfg: ForwardConfig, kernel=None):
        """``kernel``: an already compiled CompiledForwardKernel for ``cfg.key`` (by default the in-process
        cache compiles or returns it)."""
        self.cfg = cfg
        self.kernel = get_forward_kernel(cfg.key) if kernel is None else kernel

    def __call__(self, q, k, v, o, lse, *, scale: float, causal: bool = False, alignment: str = "top_left",
                 band_left: int | None = None, band_right: int | None = None, seq_len_q=None, seq_len_kv=None,
                 sink=None, stream=None, check_lengths: bool = False, packed: Packed | None = None) -> None:
        """Checks every tensor, then launches (bind + call). ``packed``: the segments of a varlen config's call
        (q, k, v, o logical (H, T, D), lse (Hq, Tq); seq_len_q / seq_len_kv are then seqused)."""
        from frost.kernels.forward.checks import check_forward_tensors, check_packed_forward_tensors
        from frost.kernels.host_checks import check_length_values
        from frost.kernels.packed import check_packed_values

        if self.cfg.varlen:
            check_packed_forward_tensors(self.cfg, q, k, v, o, lse, seq_len_q, seq_len_kv, sink, packed)
            if check_lengths:
                check_packed_values(packed, q.shape[1], k.shape[1], seq_len_q, seq_len_kv)
        else:
            _, _, _, seq_q, seq_kv = check_forward_tensors(self.cfg, q, k, v, o, lse, seq_len_q, seq_len_kv, sink)
            if check_lengths:
                check_length_values(seq_len_q, seq_len_kv, seq_q, seq_kv)
        launch = self.bind(ForwardMask(scale, causal, alignment, band_left, band_right))
        launch(q, k, v, o, lse, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, sink=sink, stream=stream, packed=packed)

    def bind(self, mask: ForwardMask) -> "BoundForward":
        """A launch with ``mask`` fixed, for callers that have checked the tensors themselves (the engine, whose
        executor checks them against the plan): a call then only reads pointers, sizes and strides."""
        scale = mask.scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
            raise TensorError("scale", scale, "a finite number > 0 (the softmax's max runs on unscaled scores)")
        left, right, flags = mask_values(mask.causal, mask.alignment, mask.band_left, mask.band_right)
        return BoundForward(self.kernel.forward, self.cfg, float(scale) * LOG2_E, left, right, flags)


@dataclass(frozen=True)
class BoundForward:
    launch: object          # the compiled host entry
    cfg: ForwardConfig
    scale_log2: float
    band_left: int
    band_right: int
    flags: int              # the mask's flags; the optional inputs' flags are added per call

    def __call__(self, q, k, v, o, lse, *, seq_len_q=None, seq_len_kv=None, sink=None, stream=None,
                 packed: Packed | None = None) -> None:
        if self.cfg.varlen:
            self._call_packed(q, k, v, o, lse, seq_len_q, seq_len_kv, sink, stream, packed)
            return
        batch, heads, seq_q = q.shape[:3]
        if batch == 0 or heads == 0 or seq_q == 0:
            return
        sizes = (batch, heads, k.shape[1], seq_q, k.shape[2], self.cfg.head_dim_qk, self.cfg.head_dim_v, 0, 0)
        strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], *lse.stride())
        self._launch(q, k, v, o, lse, seq_len_q, seq_len_kv, sink, None, sizes, strides, stream)

    def _call_packed(self, q, k, v, o, lse, seq_len_q, seq_len_kv, sink, stream, packed: Packed) -> None:
        """q, k, v, o logical (H, T, D), lse (Hq, Tq): each batch's segment from packed.cu_seqlens_*."""
        heads, tokens_q = q.shape[:2]
        if packed.batch == 0 or heads == 0 or packed.max_seqlen_q == 0 or tokens_q == 0:
            return
        sizes = (packed.batch, heads, k.shape[0], packed.max_seqlen_q, packed.max_seqlen_kv, self.cfg.head_dim_qk,
                 self.cfg.head_dim_v, tokens_q, k.shape[1])
        strides = tuple(x for t in (q, k, v, o, lse) for x in (0, *t.stride()[:2]))
        self._launch(q, k, v, o, lse, seq_len_q, seq_len_kv, sink, packed, sizes, strides, stream)

    def _launch(self, q, k, v, o, lse, seq_len_q, seq_len_kv, sink, packed, sizes, strides, stream) -> None:
        flags = self.flags | (FLAG_SEQ_Q if seq_len_q is not None else 0) | \
            (FLAG_SEQ_KV if seq_len_kv is not None else 0) | (FLAG_SINK if sink is not None else 0)
        stand_in = lse.data_ptr()  # never read: its flag is off
        ptrs = [q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                stand_in if seq_len_q is None else seq_len_q.data_ptr(),
                stand_in if seq_len_kv is None else seq_len_kv.data_ptr(),
                stand_in if sink is None else sink.data_ptr(),
                stand_in if packed is None else packed.cu_seqlens_q.data_ptr(),
                stand_in if packed is None else packed.cu_seqlens_kv.data_ptr()]
        device = q.get_device()
        s = _current_stream(device) if stream is None else _raw_stream(stream)
        with _device_guard(device):
            self.launch(*ptrs, *sizes, *strides, self.scale_log2, self.band_left, self.band_right, flags, s)


def _raw_stream(stream) -> int:
    """A torch.cuda.Stream (or anything with .cuda_stream), a cuda.CUstream or a raw handle."""
    handle = getattr(stream, "cuda_stream", None)
    return int(stream) if handle is None else handle


def _current_stream(device: int) -> int:
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def _device_guard(device: int):
    import torch

    return torch.cuda.device(device)

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

- ``causal`` / ``alignment`` / ``band_left`` / ``band_right``: the mask (frost.spec.Mask: causal means band_right
  defaults to 0; None is unbounded; the alignment anchors the diagonal, bottom-right at j = i + skv_b - sq_b).
- ``seq_len_q`` / ``seq_len_kv``: int32 (B,) device tensors of per-batch lengths (clamped to [0, S] in the kernel;
  checked only with ``check_lengths=True``, which synchronizes). Padded rows get O = 0 and LSE = -inf.
- ``scale``: a number in (0, FP32_MAX] (the IR's attn_scale contract).
- ``sink``: fp32 (Hq,) logits in natural-log units (not scaled): they enlarge each row's softmax denominator.

A call allocates nothing and never synchronizes (one launch through TVM-FFI), so it can be captured in a CUDA
graph. Rows past Sq are not written; a (B, H, 0) problem launches nothing. A call gathers its tensors into one
launch.ForwardTensors, checks them (checks.py), then runs a launch.BoundForward bound to its scale and mask;
callers that check the tensors themselves (the engine) bind once with ``fwd.bind(scale, mask)`` and call the
result with each call's ForwardTensors."""

from __future__ import annotations

from dataclasses import dataclass

from frost.errors import TensorError
from frost.kernels.forward.checks import check_call, check_scale
from frost.kernels.forward.compile import get_forward_kernel
from frost.kernels.forward.launch import BoundForward, ForwardTensors
from frost.kernels.forward.select import DTYPES, ForwardKey, select
from frost.kernels.geometry import LOG2_E
from frost.kernels.mask import mask_flags, runtime_bounds
from frost.kernels.optional_inputs import given
from frost.kernels.packed import Packed
from frost.spec import Mask, caller_mask


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
    kernel (select.select)."""
    if dtype not in DTYPES:
        raise TensorError("dtype", dtype, f"one of {DTYPES}")
    try:
        key = select(dtype, arch, head_dim_qk, head_dim_v, varlen=varlen)
    except ValueError as e:
        raise TensorError("forward config", (head_dim_qk, head_dim_v, arch), "see detail", str(e)) from None
    return ForwardConfig(dtype, head_dim_qk, head_dim_v, arch, key.head_dim_pad, key.head_dim_v_pad, key.varlen)


def forward_compile_key(cfg: ForwardConfig) -> str:
    """Stable string of what the generated code depends on (configs padding alike share it)."""
    return cfg.key.as_str()


def compile_forward(cfg: ForwardConfig) -> "CompiledForward":
    """Compiles (or fetches from the in-process cache) the forward kernel for cfg.arch."""
    return CompiledForward(cfg)


class CompiledForward:
    def __init__(self, cfg: ForwardConfig, kernel=None):
        """``kernel``: an already compiled CompiledForwardKernel for ``cfg.key`` (by default the in-process
        cache compiles or returns it)."""
        self.cfg = cfg
        self.kernel = get_forward_kernel(cfg.key) if kernel is None else kernel

    def __call__(self, q, k, v, o, lse, *, scale: float, causal: bool = False, alignment: str = "top_left",
                 band_left: int | None = None, band_right: int | None = None, stream=None,
                 check_lengths: bool = False, packed: Packed | None = None, **optional) -> None:
        """Checks every tensor, then launches (bind + call). ``packed``: the segments of a varlen config's call
        (q, k, v, o logical (H, T, D), lse (Hq, Tq); seq_len_q / seq_len_kv are then seqused). ``optional``: the
        optional tensors by frost.spec role (seq_len_q, seq_len_kv, sink; None: not given)."""
        t = ForwardTensors(q, k, v, o, lse, given("forward", optional, "CompiledForward"), packed)
        check_call(self.cfg, t, check_lengths)
        self.bind(scale, caller_mask(causal, alignment, band_left, band_right))(t, stream)

    def bind(self, scale: float, mask: Mask) -> BoundForward:
        """A launch with the scale and the mask fixed, for callers that have checked the tensors themselves (the
        engine, whose executor checks them against the plan): a call then only reads pointers, sizes and
        strides."""
        check_scale(scale)
        return BoundForward(self.kernel.forward, self.cfg, float(scale) * LOG2_E, runtime_bounds(mask),
                            mask_flags(mask))

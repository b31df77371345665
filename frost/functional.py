"""frost.sdpa_backward: the FlashAttention-style functional API over BSHD tensors.

q (B, Sq, Hq, Dqk), k (B, Skv, Hkv, Dqk), v (B, Skv, Hkv, Dv), out and dout (B, Sq, Hq, Dv), lse (B, Hq, Sq) fp32
including the sink term; optional seq_len_q / seq_len_kv int32 (B,), sink fp32 (Hq,), dlse fp32 (B, Hq, Sq) (the
gradient on that LSE when the loss uses it). Any strides with the head dim
innermost work. Returns dq, dk, dv laid out like q, k, v (torch.empty_like: same strides when those are dense,
else contiguous BSHD) and dsink fp32 (Hq,) (None without a sink). deterministic=None (the default) follows
torch.use_deterministic_algorithms.

A call is keyed by its tensors' dtypes, shapes, strides and device plus the options; the first call with a key builds
a graph and a plan (kernels come from the kernel cache, so a new B or S never recompiles), later calls reuse it. On a
kernel engine a later call skips plan.execute's per-tensor checks (the key already holds what they compare; only the
pointers' 16-byte alignment is checked) and passes the BSHD tensors as they are, without transposed views."""

from __future__ import annotations

import torch

from frost.compile_api import build_plan, compiler_tag
from frost.errors import GraphError, TensorError
from frost.ir import Graph, SdpaBackwardOp, SdpaInputs, SdpaOutputs, TensorSpec
from frost.ir.tensors import DTYPE_BYTES
from frost.lowering.plan_cache import PLANS
from frost.target import detect_target

ROLES_4D = ("q", "k", "v", "o", "do", "dq", "dk", "dv")
OPTIONAL = ("sink", "dlse", "seq_len_q", "seq_len_kv")
_targets: dict[object, str] = {}


def sdpa_backward(q, k, v, out, dout, lse, *, softmax_scale=None, causal=False, window_size=(None, None),
                  causal_alignment="top_left", seq_len_q=None, seq_len_kv=None, sink=None, deterministic=None,
                  dlse=None):
    """Attention backward -> (dq, dk, dv, dsink). window_size=(left, right) keeps keys j in
    [diag - left, diag + right] (None or -1: unbounded); causal=True sets right to 0 unless given.
    deterministic=None follows torch.are_deterministic_algorithms_enabled(). dlse (B, Hq, Sq) fp32: the gradient
    on the forward's LSE output, when the loss uses it."""
    left, right = window(window_size)
    deterministic = resolve_deterministic(deterministic)
    given = {"q": q, "k": k, "v": v, "o": out, "do": dout, "lse": lse, "sink": sink, "dlse": dlse,
             "seq_len_q": seq_len_q, "seq_len_kv": seq_len_kv}
    given = {n: t for n, t in given.items() if t is not None}
    options = (softmax_scale, bool(causal), left, right, causal_alignment, deterministic)
    key = ("functional", options, compiler_tag(), *((n, *_meta(n, t)) for n, t in given.items()))
    grads = {"dq": torch.empty_like(q), "dk": torch.empty_like(k), "dv": torch.empty_like(v)}
    if sink is not None:
        grads["dsink"] = torch.empty(sink.shape, dtype=torch.float32, device=sink.device)
    tensors = given | grads
    plan = PLANS.get_or_build(key, lambda: _build(tensors, options, q.device))
    if plan.runs_seq_major:  # the key holds what plan.execute would check (tensors built the plan: _build)
        plan._execute_trusted_seq_major(tensors, q.device)
    else:
        plan.execute({n: (t.transpose(1, 2) if n in ROLES_4D else t) for n, t in tensors.items()})
    return grads["dq"], grads["dk"], grads["dv"], grads.get("dsink")


def _build(tensors: dict, options: tuple, device):
    """The plan of a new key. One device per call is checked here, once: the key holds every tensor's device."""
    for name, t in tensors.items():
        if t.device != device:
            raise TensorError(f"{name}.device", str(t.device), f"{device} (the device of q; one device per call)")
    return build_plan(_graph(tensors, options), target_of(device))


def resolve_deterministic(deterministic) -> bool:
    """A bool as given; None follows torch.use_deterministic_algorithms (a set flag is honoured, never ignored)."""
    if deterministic is None:
        return torch.are_deterministic_algorithms_enabled()
    if not isinstance(deterministic, bool):
        raise TensorError("deterministic", deterministic, "True, False or None (follow "
                          "torch.are_deterministic_algorithms_enabled())")
    return deterministic


def window(window_size) -> tuple[int | None, int | None]:
    """(left, right) band bounds from FlashAttention's window_size; None or a negative value means unbounded."""
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise TensorError("window_size", window_size, "a pair (left, right) of None or int") from None
    return tuple(None if x is None or x < 0 else int(x) for x in (left, right))  # type: ignore[return-value]


def target_of(device: torch.device) -> str:
    """The probe target for tensors on `device` ("cpu", or sm_XY of that CUDA device), memoised per device."""
    target = _targets.get(device)
    if target is None:
        target = _targets[device] = detect_target(device)
    return target


def _meta(name: str, t) -> tuple:
    if not isinstance(t, torch.Tensor):
        raise TensorError(name, type(t).__name__, "a torch.Tensor")
    if name in ROLES_4D and t.dim() != 4:
        raise TensorError(f"{name}.shape", tuple(t.shape), "rank 4: (B, S, H, D), FlashAttention's layout")
    return t.dtype, t.shape, t.stride(), t.device


# What each role accepts, for a dtype the IR has no name for (int64 lengths, float8): the IR checks the rest
_ACCEPTED_DTYPES = {"seq_len_q": "int32", "seq_len_kv": "int32", "lse": "float32", "sink": "float32",
                    "dlse": "float32"}


def _spec(name: str, t: torch.Tensor) -> TensorSpec:
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in DTYPE_BYTES:
        raise TensorError(f"{name}.dtype", t.dtype,
                          _ACCEPTED_DTYPES.get(name, "float16, bfloat16, float32 or float64 (one for q, k, v, out, "
                                                     "dout)"))
    if name in ROLES_4D:
        t = t.transpose(1, 2)
    return TensorSpec(name=name, shape=tuple(t.shape), strides=tuple(t.stride()), dtype=dtype)


def _graph(given: dict, options: tuple) -> Graph:
    """The one-op graph of a functional call, in logical (B, H, S, D) shapes."""
    scale, causal, left, right, alignment, deterministic = options
    specs = {n: _spec(n, t) for n, t in given.items()}
    op = SdpaBackwardOp(
        name="attn", inputs=SdpaInputs(**{n: n for n in ("q", "k", "v", "o", "do", "lse", *OPTIONAL) if n in specs}),
        outputs=SdpaOutputs(dq="dq", dk="dk", dv="dv", dsink="dsink" if "sink" in specs else None),
        attn_scale=scale, causal=causal, alignment=alignment, band_left=left, band_right=right,
        deterministic=deterministic)
    try:
        return Graph(name="sdpa_backward", tensors=tuple(specs.values()), ops=(op,))
    except GraphError as exc:
        raise TensorError(f"{exc.subject} [shapes as logical (B, H, S, D)]", exc.value, exc.accepted) from exc

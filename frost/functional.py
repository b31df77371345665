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
pointers' 16-byte alignment is checked) and passes the BSHD tensors as they are, without transposed views. The
first call of a key checks every argument in the caller's terms (frost.functional_checks). An empty problem (B,
Sq or Skv = 0) returns empty or zero gradients, as torch's SDPA does."""

from __future__ import annotations

import operator

import torch

from frost.compile_api import build_plan, compiler_tag
from frost.errors import FrostError, TensorError
from frost.functional_checks import caller_name, check_options, check_tensors, in_caller_terms, is_empty
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
    causal = strict_bool("causal", causal)
    deterministic = resolve_deterministic(deterministic)
    given = {"q": q, "k": k, "v": v, "o": out, "do": dout, "lse": lse, "sink": sink, "dlse": dlse,
             "seq_len_q": seq_len_q, "seq_len_kv": seq_len_kv}
    given = {n: t for n, t in given.items() if t is not None}
    options = (softmax_scale, causal, left, right, causal_alignment, deterministic)
    key = ("functional", options, compiler_tag(), *((n, *_meta(n, t)) for n, t in given.items()))
    if is_empty(q, k):
        return _empty_backward(given, options)
    grads = {"dq": torch.empty_like(q), "dk": torch.empty_like(k), "dv": torch.empty_like(v)}
    if sink is not None:
        grads["dsink"] = torch.empty(sink.shape, dtype=torch.float32, device=sink.device)
    tensors = given | grads
    run_plan(PLANS.get_or_build(key, lambda: _build(tensors, options, q.device)), tensors, q.device)
    return grads["dq"], grads["dk"], grads["dv"], grads.get("dsink")


def run_plan(plan, tensors: dict, device) -> None:
    """Execute a functional call's plan on its BSHD tensors. A plan that runs seq-major skips plan.execute's
    per-tensor checks (the call's key holds what they compare: its tensors built the plan) and takes the BSHD
    tensors as they are; an error from the launch is named in the caller's terms."""
    try:
        if plan.runs_seq_major:
            plan._execute_trusted_seq_major(tensors, device)
        else:
            plan.execute({n: (t.transpose(1, 2) if n in ROLES_4D else t) for n, t in tensors.items()})
    except TensorError as exc:   # a pointer's alignment or a length's value
        raise in_caller_terms(exc) from exc


def _build(tensors: dict, options: tuple, device):
    """The plan of a new key, after every argument is checked in the caller's terms (the key holds each tensor's
    device, dtype, shape and strides, so later calls with this key pass the same checks)."""
    graph = checked_graph(tensors, options)
    return build_plan(graph, target_of(device))


def checked_graph(tensors: dict, options: tuple) -> Graph:
    """The call's one-op graph, built after the caller-terms checks; an IR error that still fires is renamed to
    the caller's parameters."""
    check_options(options[0], options[4])
    check_tensors({n: t for n, t in tensors.items() if n not in ("dq", "dk", "dv", "dsink")})
    return graph_of(tensors, options)


def graph_of(tensors: dict, options: tuple) -> Graph:
    """_graph, with an IR error renamed to the caller's parameters."""
    try:
        return _graph(tensors, options)
    except FrostError as exc:
        raise in_caller_terms(exc) from exc


def _empty_backward(given: dict, options: tuple):
    """B, Sq or Skv = 0: the reference engine's gradients (empty, or zero where the other extents are not)."""
    from frost.reference import attention_backward

    check_options(options[0], options[4])
    check_tensors(given)
    scale, causal, left, right, alignment, _ = options
    t = {n: (x.transpose(1, 2) if n in ROLES_4D else x) for n, x in given.items()}
    dq, dk, dv, dsink = attention_backward(
        t["q"], t["k"], t["v"], t["o"], t["do"], t["lse"], scale=scale, causal=causal, alignment=alignment,
        band_left=left, band_right=right, seq_len_q=t.get("seq_len_q"), seq_len_kv=t.get("seq_len_kv"),
        sink=t.get("sink"), dlse=t.get("dlse"))
    grads = [torch.empty_like(given[n]) for n in ("q", "k", "v")]
    for grad, value in zip(grads, (dq, dk, dv)):
        grad.copy_(value.transpose(1, 2))
    return (*grads, None if dsink is None else dsink.to(torch.float32))


def resolve_deterministic(deterministic) -> bool:
    """A bool as given; None follows torch.use_deterministic_algorithms (a set flag is honoured, never ignored)."""
    if deterministic is None:
        return torch.are_deterministic_algorithms_enabled()
    if not isinstance(deterministic, bool):
        raise TensorError("deterministic", deterministic, "True, False or None (follow "
                          "torch.are_deterministic_algorithms_enabled())")
    return deterministic


def strict_bool(name: str, value) -> bool:
    """True or False only: a truthy string such as "yes" is a mistake, not a request."""
    if not isinstance(value, bool):
        raise TensorError(name, value, "True or False")
    return value


def window(window_size) -> tuple[int | None, int | None]:
    """(left, right) band bounds from FlashAttention's window_size; None or a negative int means unbounded."""
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise TensorError("window_size", window_size, "a pair (left, right) of None or int") from None
    return _bound(left, window_size), _bound(right, window_size)


def _bound(x, window_size) -> int | None:
    if x is None:
        return None
    try:
        if isinstance(x, bool):
            raise TypeError
        x = operator.index(x)   # int, numpy integers; never a float or a string
    except TypeError:
        raise TensorError("window_size", window_size, "a pair (left, right), each None or an int "
                          "(negative: unbounded)") from None
    return None if x < 0 else x


def target_of(device: torch.device) -> str:
    """The probe target for tensors on `device` ("cpu", or sm_XY of that CUDA device), memoised per device."""
    target = _targets.get(device)
    if target is None:
        target = _targets[device] = detect_target(device)
    return target


def _meta(name: str, t) -> tuple:
    if not isinstance(t, torch.Tensor):
        raise TensorError(caller_name(name), type(t).__name__, "a torch.Tensor")
    if name in ROLES_4D and t.dim() != 4:
        raise TensorError(f"{caller_name(name)}.shape", tuple(t.shape), "rank 4: (B, S, H, D), FlashAttention's "
                          "layout")
    return t.dtype, t.shape, t.stride(), t.device


def _spec(name: str, t: torch.Tensor) -> TensorSpec:
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in DTYPE_BYTES:   # the caller-terms checks name what each role accepts; this is a backstop
        raise TensorError(f"{caller_name(name)}.dtype", t.dtype, ", ".join(DTYPE_BYTES))
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
    return Graph(name="sdpa_backward", tensors=tuple(specs.values()), ops=(op,))

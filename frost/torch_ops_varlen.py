"""torch.library custom ops and frost.attention_varlen, the autograd path for packed (THD) sequences.

frost::attention_varlen_forward is functional_varlen.sdpa_forward_varlen and frost::sdpa_backward_varlen is
functional_varlen.sdpa_backward_varlen; max_seqlen_q / max_seqlen_kv travel as int arguments. Both ops have fake
implementations whose strides match the real outputs (out and lse fresh and contiguous, the gradients zeros_like
their inputs), so torch.compile traces them without graph breaks. The forward (and its fake, on concrete shapes)
checks every argument the backward will need, once per distinct key."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from frost.errors import NotSupported, TensorError
from frost.functional import resolve_deterministic, strict_bool, target_of, window
from frost.functional_checks import check_options
from frost.functional_varlen import _given, _metas, _nothing_to_compute, sdpa_backward_varlen, sdpa_forward_varlen
from frost.functional_varlen import varlen_graph
from frost.functional_varlen_checks import check_max_seqlen, check_varlen_tensors, varlen_caller_terms
from frost.torch_ops import CheckedKeys, _concrete, _dense, _meta_like

_NO_SINK = (0,)   # dsink's shape when there is no sink (a custom op cannot return None)
_checked = CheckedKeys()   # forward keys whose arguments passed check_forward_varlen


@torch.library.custom_op("frost::sdpa_backward_varlen", mutates_args=())
def sdpa_backward_varlen_op(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor,
                            cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor, max_seqlen_q: int, max_seqlen_kv: int,
                            seqused_q: Optional[Tensor], seqused_kv: Optional[Tensor], sink: Optional[Tensor],
                            softmax_scale: Optional[float], causal: bool, window_left: Optional[int],
                            window_right: Optional[int], causal_alignment: str, deterministic: bool,
                            dlse: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Packed backward; dsink is an empty (0,) tensor when there is no sink."""
    dq, dk, dv, dsink = sdpa_backward_varlen(
        q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv,
        softmax_scale=softmax_scale, causal=causal, window_size=(window_left, window_right),
        causal_alignment=causal_alignment, seqused_q=seqused_q, seqused_kv=seqused_kv, sink=sink,
        deterministic=deterministic, dlse=dlse)
    return dq, dk, dv, dsink if dsink is not None else q.new_empty(_NO_SINK, dtype=torch.float32)


@sdpa_backward_varlen_op.register_fake
def _(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, seqused_q, seqused_kv, sink,
      softmax_scale, causal, window_left, window_right, causal_alignment, deterministic, dlse=None):
    dsink_shape = sink.shape if sink is not None else _NO_SINK
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            q.new_empty(dsink_shape, dtype=torch.float32))


@torch.library.custom_op("frost::attention_varlen_forward", mutates_args=())
def attention_varlen_forward_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor,
                                max_seqlen_q: int, max_seqlen_kv: int, seqused_q: Optional[Tensor],
                                seqused_kv: Optional[Tensor], sink: Optional[Tensor], softmax_scale: Optional[float],
                                causal: bool, window_left: Optional[int], window_right: Optional[int],
                                causal_alignment: str, deterministic: Optional[bool] = None) -> tuple[Tensor, Tensor]:
    """Packed forward -> out (Tq, Hq, Dv) contiguous, lse (Hq, Tq) fp32. ``deterministic`` is the backward's."""
    args = (q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, seqused_q, seqused_kv, sink)
    check_forward_varlen(*args, softmax_scale, causal, window_left, window_right, causal_alignment, deterministic)
    return sdpa_forward_varlen(*args[:7], softmax_scale=softmax_scale, causal=causal,
                               window_size=(window_left, window_right), causal_alignment=causal_alignment,
                               seqused_q=seqused_q, seqused_kv=seqused_kv, sink=sink)


@attention_varlen_forward_op.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, seqused_q, seqused_kv, sink, softmax_scale,
      causal, window_left, window_right, causal_alignment, deterministic=None):
    args = (q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, seqused_q, seqused_kv, sink)
    if _concrete(q, k, v, cu_seqlens_q, cu_seqlens_kv, seqused_q, seqused_kv, sink) \
            and all(isinstance(n, int) for n in (max_seqlen_q, max_seqlen_kv)):   # symbolic: checked when it runs
        check_forward_varlen(*args, softmax_scale, causal, window_left, window_right, causal_alignment,
                             deterministic)
    tq, hq, _ = q.shape
    return q.new_empty((tq, hq, v.shape[2])), q.new_empty((hq, tq), dtype=torch.float32)


def check_forward_varlen(q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, seqused_q, seqused_kv,
                         sink, softmax_scale, causal, left, right, alignment, deterministic) -> None:
    """Everything the backward will need, checked when the forward runs (in the caller's terms): devices, dtypes,
    shapes, options, and that some engine serves the backward on this device. Once per key."""
    given = _given(q, k, v, cu_seqlens_q, cu_seqlens_kv, seqused_q, seqused_kv, sink)
    options = (softmax_scale, causal, left, right, alignment, check_max_seqlen("max_seqlen_q", max_seqlen_q),
               check_max_seqlen("max_seqlen_kv", max_seqlen_kv), bool(deterministic))
    key = (options, *_metas(given))

    def check() -> None:
        check_options(softmax_scale, alignment)
        check_varlen_tensors(given)
        if not _nothing_to_compute(given, options):
            _check_backward_served(given, options)

    _checked.once(key, check)


def _check_backward_served(given: dict, options: tuple) -> None:
    """The backward's ragged graph, with meta stand-ins for out, dout, lse and the gradients: the IR accepts it and
    an engine serves it on the device of q."""
    from frost.analyzer import probe

    q, k, v = given["q"], given["k"], given["v"]
    (tq, hq, _), dv = q.shape, v.shape[2]
    stand_in = {"o": _meta_like((tq, hq, dv), q.dtype), "do": _meta_like((tq, hq, dv), q.dtype),
                "lse": _meta_like((hq, tq), torch.float32), "dq": _meta_like(q.shape, q.dtype),
                "dk": _meta_like(k.shape, q.dtype), "dv": _meta_like(v.shape, q.dtype)}
    if "sink" in given:
        stand_in["dsink"] = _meta_like((hq,), torch.float32)
    try:
        graph = varlen_graph(given | stand_in, options, "backward")
    except TensorError as exc:
        raise varlen_caller_terms(exc) from exc
    report = probe(graph, target_of(q.device))
    if not report.supported:
        raise NotSupported(f"no engine serves this packed attention's backward on {report.target}\n"
                           f"{report.to_text()}", report)


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, cu_q, cu_kv, max_q, max_kv, seqused_q, seqused_kv, sink, *options = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_kv, seqused_q, seqused_kv, sink)
    ctx.max_seqlens = (max_q, max_kv)
    ctx.options = options
    ctx.has_sink = sink is not None
    ctx.set_materialize_grads(False)   # an unused output's gradient comes as None (no dlse pass for it)


def _backward(ctx, grad_out, grad_lse):
    """Gradients for q, k, v and sink, including what flows in through the returned lse (grad_lse: None when the
    loss does not use it). Deterministic as asked at the forward, or (None) as torch says now."""
    q, k, v, out, lse, cu_q, cu_kv, seqused_q, seqused_kv, sink = ctx.saved_tensors
    if grad_out is None:   # only the lse output was used
        grad_out = torch.zeros_like(out)
    scale, causal, left, right, alignment, deterministic = ctx.options
    dq, dk, dv, dsink = torch.ops.frost.sdpa_backward_varlen(
        q, k, v, out, _dense(grad_out), lse, cu_q, cu_kv, *ctx.max_seqlens, seqused_q, seqused_kv, sink, scale,
        causal, left, right, alignment, resolve_deterministic(deterministic),
        None if grad_lse is None else _dense(grad_lse))
    return (dq, dk, dv, None, None, None, None, None, None, dsink if ctx.has_sink else None,
            None, None, None, None, None, None)


attention_varlen_forward_op.register_autograd(_backward, setup_context=_setup_context)


def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor, max_seqlen_q: int,
                     max_seqlen_kv: int, *, softmax_scale: float | None = None, causal: bool = False,
                     window_size=(None, None), causal_alignment: str = "top_left", seqused_q: Tensor | None = None,
                     seqused_kv: Tensor | None = None, sink: Tensor | None = None, return_lse: bool = False,
                     deterministic: bool | None = None):
    """Attention on packed sequences with a frost backward: out (Tq, Hq, Dv), and lse (Hq, Tq) fp32 when
    return_lse. Differentiable in q, k, v and sink (and through lse). q (Tq, Hq, Dqk), k / v (Tkv, Hkv, D),
    cu_seqlens_* int32 (B + 1,) on q's device, max_seqlen_* host ints, seqused_* int32 (B,). Every mask option
    means per sequence what it means per batch row of frost.attention; the forward checks every argument the
    backward needs. The backward is bitwise deterministic with deterministic=True, or with None (the default)
    while torch.use_deterministic_algorithms(True) is in force when it runs."""
    left, right = window(window_size)
    causal = strict_bool("causal", causal)
    for name, t in (("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_kv", cu_seqlens_kv)):
        if not isinstance(t, Tensor):
            raise TensorError(name, type(t).__name__, "a torch.Tensor")
    max_seqlen_q = check_max_seqlen("max_seqlen_q", max_seqlen_q)
    max_seqlen_kv = check_max_seqlen("max_seqlen_kv", max_seqlen_kv)
    if deterministic is not None:
        resolve_deterministic(deterministic)   # a bad value fails here, not in the backward
    out, lse = torch.ops.frost.attention_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q,
                                                        max_seqlen_kv, seqused_q, seqused_kv, sink, softmax_scale,
                                                        causal, left, right, causal_alignment, deterministic)
    return (out, lse) if return_lse else out


__all__ = ["attention_varlen", "check_forward_varlen"]

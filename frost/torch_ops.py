"""torch.library custom ops and frost.attention, the autograd path.

frost::attention_forward is frost's forward (functional_forward.sdpa_forward: the cute_sm120 kernel on CUDA where
it serves the problem, else the reference engine, the CPU default); frost::sdpa_backward is frost's backward
(functional.sdpa_backward). Both have fake implementations whose strides match the real outputs (the
gradients are torch.empty_like their inputs, the forward's outputs are fresh contiguous tensors), so torch.compile
traces them without graph breaks. Both the forward and its fake check every argument the backward will need (devices,
dtypes, shapes, options) when the forward is called, once per distinct key (check_forward)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from frost.errors import NotSupported, TensorError
from frost.functional import (_meta, graph_of, resolve_deterministic, sdpa_backward, strict_bool, target_of,
                              window)
from frost.functional_checks import check_options, check_tensors, is_empty
from frost.functional_forward import sdpa_forward

_NO_SINK = (0,)  # dsink's shape when there is no sink (a custom op cannot return None)


class CheckedKeys:
    """Keys whose arguments passed a forward's checks, so that a training loop checks once per key (bounded: the
    set is emptied when it holds ``limit`` keys)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit, self._keys = limit, set()

    def once(self, key, check) -> None:
        """Run ``check()`` unless ``key`` passed it already; remember the key when it passes."""
        if key in self._keys:
            return
        check()
        if len(self._keys) >= self.limit:
            self._keys.clear()
        self._keys.add(key)


_checked = CheckedKeys()   # forward keys whose arguments passed check_forward


@torch.library.custom_op("frost::sdpa_backward", mutates_args=())
def sdpa_backward_op(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor,
                     seq_len_q: Optional[Tensor], seq_len_kv: Optional[Tensor], sink: Optional[Tensor],
                     softmax_scale: Optional[float], causal: bool, window_left: Optional[int],
                     window_right: Optional[int], causal_alignment: str, deterministic: bool,
                     dlse: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """BSHD backward; dsink is an empty (0,) tensor when there is no sink."""
    dq, dk, dv, dsink = sdpa_backward(q, k, v, out, dout, lse, softmax_scale=softmax_scale, causal=causal,
                                      window_size=(window_left, window_right), causal_alignment=causal_alignment,
                                      seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, sink=sink,
                                      deterministic=deterministic, dlse=dlse)
    return dq, dk, dv, dsink if dsink is not None else q.new_empty(_NO_SINK, dtype=torch.float32)


@sdpa_backward_op.register_fake
def _(q, k, v, out, dout, lse, seq_len_q, seq_len_kv, sink, softmax_scale, causal, window_left, window_right,
      causal_alignment, deterministic, dlse=None):
    dsink_shape = sink.shape if sink is not None else _NO_SINK
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            q.new_empty(dsink_shape, dtype=torch.float32))


@torch.library.custom_op("frost::attention_forward", mutates_args=())
def attention_forward_op(q: Tensor, k: Tensor, v: Tensor, seq_len_q: Optional[Tensor], seq_len_kv: Optional[Tensor],
                         sink: Optional[Tensor], softmax_scale: Optional[float], causal: bool,
                         window_left: Optional[int], window_right: Optional[int], causal_alignment: str,
                         deterministic: Optional[bool] = None) -> tuple[Tensor, Tensor]:
    """BSHD forward (frost.sdpa_forward) -> out (B, Sq, Hq, Dv) contiguous, lse (B, Hq, Sq) fp32.
    ``deterministic`` is the backward's (None: torch's flag when the backward runs)."""
    check_forward(q, k, v, seq_len_q, seq_len_kv, sink, softmax_scale, causal, window_left, window_right,
                  causal_alignment, deterministic)
    return sdpa_forward(q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=(window_left, window_right),
                        causal_alignment=causal_alignment, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, sink=sink)


@attention_forward_op.register_fake
def _(q, k, v, seq_len_q, seq_len_kv, sink, softmax_scale, causal, window_left, window_right, causal_alignment,
      deterministic=None):
    if _concrete(q, k, v, seq_len_q, seq_len_kv, sink):   # symbolic shapes are checked when the op runs
        check_forward(q, k, v, seq_len_q, seq_len_kv, sink, softmax_scale, causal, window_left, window_right,
                      causal_alignment, deterministic)
    b, sq, hq, _ = q.shape
    return q.new_empty(_out_shape(q, v)), q.new_empty((b, hq, sq), dtype=torch.float32)


def check_forward(q, k, v, seq_len_q, seq_len_kv, sink, softmax_scale, causal, left, right, alignment,
                  deterministic) -> None:
    """Everything the backward will need, checked when the forward runs (in the caller's terms): devices, dtypes,
    shapes, options, and that some engine serves the backward on this device. Once per key: the key holds every
    tensor's metadata and the options."""
    given = {"q": q, "k": k, "v": v, "sink": sink, "seq_len_q": seq_len_q, "seq_len_kv": seq_len_kv}
    given = {n: t for n, t in given.items() if t is not None}
    options = (softmax_scale, causal, left, right, alignment, bool(deterministic))
    key = (options, *((n, *_meta(n, t)) for n, t in given.items()))

    def check() -> None:
        check_options(softmax_scale, alignment)
        check_tensors(given)
        if not is_empty(q, k):
            _check_backward_served(given, options)

    _checked.once(key, check)


def _check_backward_served(given: dict, options: tuple) -> None:
    """The backward's graph, with stand-ins (meta tensors) for out, dout, lse and the gradients: the IR accepts
    it and an engine serves it on the device of q."""
    from frost.analyzer import probe

    q, k, v = given["q"], given["k"], given["v"]
    b, sq, hq, _ = q.shape
    stand_in = {"o": _meta_like(_out_shape(q, v), q.dtype), "do": _meta_like(_out_shape(q, v), q.dtype),
                "lse": _meta_like((b, hq, sq), torch.float32), "dq": _meta_like(q.shape, q.dtype),
                "dk": _meta_like(k.shape, q.dtype), "dv": _meta_like(v.shape, q.dtype)}
    if "sink" in given:
        stand_in["dsink"] = _meta_like((hq,), torch.float32)
    graph = graph_of(given | stand_in, options)
    report = probe(graph, target_of(q.device))
    if not report.supported:
        raise NotSupported(f"no engine serves this attention's backward on {report.target}\n{report.to_text()}",
                           report)


def _concrete(*tensors) -> bool:
    """Whether every shape and stride is a plain int (not a SymInt of a dynamic-shape trace)."""
    return all(isinstance(n, int) for t in tensors if t is not None for n in (*t.shape, *t.stride()))


def _meta_like(shape, dtype) -> Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device="meta")


def _out_shape(q: Tensor, v: Tensor) -> tuple:
    return (q.shape[0], q.shape[1], q.shape[2], v.shape[3])


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, seq_len_q, seq_len_kv, sink, *options = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, seq_len_q, seq_len_kv, sink)
    ctx.options = options
    ctx.has_sink = sink is not None
    ctx.set_materialize_grads(False)   # an unused output's gradient comes as None (no dlse pass for it)


def _backward(ctx, grad_out, grad_lse):
    """Gradients for q, k, v and sink, including what flows in through the returned LSE (grad_lse: None when the
    loss does not use it). Deterministic as asked at the forward, or (None) as torch.use_deterministic_algorithms
    says now."""
    q, k, v, out, lse, seq_len_q, seq_len_kv, sink = ctx.saved_tensors
    if grad_out is None:   # only the LSE output was used
        grad_out = torch.zeros_like(out)
    scale, causal, left, right, alignment, deterministic = ctx.options
    dq, dk, dv, dsink = torch.ops.frost.sdpa_backward(q, k, v, out, _dense(grad_out), lse, seq_len_q, seq_len_kv,
                                                      sink, scale, causal, left, right, alignment,
                                                      resolve_deterministic(deterministic),
                                                      None if grad_lse is None else _dense(grad_lse))
    return dq, dk, dv, None, None, dsink if ctx.has_sink else None, None, None, None, None, None, None


def _dense(t: Tensor) -> Tensor:
    """Incoming gradients may be broadcast views (stride 0) or transposed: the backward wants the last dim dense."""
    if t.stride(-1) != 1 or 0 in t.stride():
        return t.contiguous()
    return t


attention_forward_op.register_autograd(_backward, setup_context=_setup_context)


def attention(q: Tensor, k: Tensor, v: Tensor, *, softmax_scale: float | None = None, causal: bool = False,
              window_size=(None, None), causal_alignment: str = "top_left", seq_len_q: Tensor | None = None,
              seq_len_kv: Tensor | None = None, sink: Tensor | None = None, return_lse: bool = False,
              deterministic: bool | None = None):
    """Attention on BSHD tensors with a frost backward: out (B, Sq, Hq, Dv), and lse (B, Hq, Sq) when
    return_lse. Differentiable in q, k, v and sink; the forward is frost.sdpa_forward (on CUDA the cute_sm120
    kernel where it serves the problem) and checks every argument the backward needs (a FrostError names the
    parameter). An empty problem (B, Sq or Skv = 0) gives
    empty or zero outputs and gradients. The backward is
    bitwise deterministic with deterministic=True, or with None (the default) while
    torch.use_deterministic_algorithms(True) is in force when it runs."""
    left, right = window(window_size)
    causal = strict_bool("causal", causal)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TensorError(name, type(t).__name__, "a torch.Tensor")
    if deterministic is not None:
        resolve_deterministic(deterministic)   # a bad value fails here, not in the backward
    out, lse = torch.ops.frost.attention_forward(q, k, v, seq_len_q, seq_len_kv, sink, softmax_scale, causal, left,
                                                 right, causal_alignment, deterministic)
    return (out, lse) if return_lse else out

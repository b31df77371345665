"""frost.attention and frost.attention_varlen: the autograd path, over two torch custom ops that serve dense and
packed calls alike (a packed call passes cu_seqlens; a dense one passes None).

frost::attention_forward is the functional forward (api.calls) and frost::attention_backward the functional
backward. Both have fake implementations whose shapes match the real outputs, so torch.compile traces them without
graph breaks. The forward (and its fake, on concrete shapes) checks every argument the backward will need (devices,
dtypes, shapes, options, and that an engine serves the backward on this device), once per distinct key. Each op
body passes the argument gate (api.arguments), so a direct torch.ops.frost call is checked as a frost call is;
arguments of a type the op's schema does not admit are refused by torch's dispatcher before frost sees them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Hashable, Literal, Optional, Union, overload

import torch
from torch import Tensor

from frost.api import arguments as gate
from frost.api.calls import DENSE, PACKED, Call, Layout, backward, forward
from frost.api.checks import check_tensors, in_caller_terms
from frost.api.functional import Scale, Window
from frost.api.plans import target_of
from frost.errors import ArgumentTypeError, FrostError, NotSupported
from frost.spec import Alignment, Kind

_NO_SINK = (0,)  # dsink's shape when there is no sink (a custom op cannot return None)


class CheckedKeys:
    """Keys whose arguments passed a forward's checks, so that a training loop checks once per key (bounded: the
    set is emptied when it holds ``limit`` keys)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._keys: set[Hashable] = set()

    def once(self, key: Hashable, check: Callable[[], None]) -> None:
        """Run ``check()`` unless ``key`` passed it already; remember the key when it passes."""
        if key in self._keys:
            return
        check()
        if len(self._keys) >= self.limit:
            self._keys.clear()
        self._keys.add(key)


_checked = CheckedKeys()


def _call(kind: Kind, q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor],
          cu_seqlens_kv: Optional[Tensor], max_seqlen_q: int, max_seqlen_kv: int, seq_len_q: Optional[Tensor],
          seq_len_kv: Optional[Tensor], sink: Optional[Tensor], softmax_scale: Optional[float], causal: bool,
          window_left: Optional[int], window_right: Optional[int], causal_alignment: str,
          deterministic: Optional[bool], extra: Optional[dict[str, Optional[Tensor]]] = None) -> Call:
    """An op's arguments through the gate, as the Call of its layout (packed iff cu_seqlens_q is given: then
    cu_seqlens_kv must be too, and a dense call passes neither and max_seqlens >= 0, which it does not read)."""
    layout = PACKED if cu_seqlens_q is not None else DENSE
    if not layout.packed:
        if cu_seqlens_kv is not None:
            raise ArgumentTypeError("cu_seqlens_q", None, "a tensor when cu_seqlens_kv is given (a packed call "
                                    "passes both; a dense call neither)")
        for name, n in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_kv", max_seqlen_kv)):
            gate.host_int(name, n)
    options = gate.options(softmax_scale, causal, (window_left, window_right), causal_alignment, deterministic)
    values: dict[str, Any] = dict(q=q, k=k, v=v, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, sink=sink,
                                  **(extra or {}))
    given, max_seqlens = _gated_tensors(layout, values, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv)
    resolved = bool(deterministic) if kind == "backward" else False
    return Call(kind, layout, given, options, max_seqlens, resolved)


def _gated_tensors(layout: Layout, values: dict[str, Any], cu_seqlens_q: Optional[Tensor],
                   cu_seqlens_kv: Optional[Tensor], max_seqlen_q: int, max_seqlen_kv: int
                   ) -> tuple[dict[str, Tensor], Optional[tuple[int, int]]]:
    """A call's tensors by role through the gate (a packed call's offsets after the rest), and a packed call's
    max_seqlens as host ints (None for a dense call)."""
    max_seqlens = None
    if layout.packed:
        values = {**values, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_kv": cu_seqlens_kv}
        max_seqlens = (gate.host_int("max_seqlen_q", max_seqlen_q), gate.host_int("max_seqlen_kv", max_seqlen_kv))
    return gate.tensors(values, layout.packed), max_seqlens


def _attention_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor,
                          cu_seqlens_q: Optional[Tensor], cu_seqlens_kv: Optional[Tensor], max_seqlen_q: int,
                          max_seqlen_kv: int, seq_len_q: Optional[Tensor], seq_len_kv: Optional[Tensor],
                          sink: Optional[Tensor], softmax_scale: Optional[float], causal: bool,
                          window_left: Optional[int], window_right: Optional[int], causal_alignment: str,
                          deterministic: bool, dlse: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The backward of either layout; dsink is an empty (0,) tensor when there is no sink."""
    call = _call("backward", q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, seq_len_q,
                 seq_len_kv, sink, softmax_scale, causal, window_left, window_right, causal_alignment,
                 gate.strict_bool("deterministic", deterministic), dict(o=out, do=dout, lse=lse, dlse=dlse))
    dq, dk, dv, dsink = backward(call)
    return dq, dk, dv, dsink if dsink is not None else q.new_empty(_NO_SINK, dtype=torch.float32)


attention_backward_op = torch.library.custom_op("frost::attention_backward", mutates_args=())(_attention_backward)


@attention_backward_op.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor, cu_seqlens_q: Optional[Tensor],
      cu_seqlens_kv: Optional[Tensor], max_seqlen_q: int, max_seqlen_kv: int, seq_len_q: Optional[Tensor],
      seq_len_kv: Optional[Tensor], sink: Optional[Tensor], softmax_scale: Optional[float], causal: bool,
      window_left: Optional[int], window_right: Optional[int], causal_alignment: str, deterministic: bool,
      dlse: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    dsink_shape = sink.shape if sink is not None else _NO_SINK
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            q.new_empty(dsink_shape, dtype=torch.float32))


def _attention_forward(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor],
                         cu_seqlens_kv: Optional[Tensor], max_seqlen_q: int, max_seqlen_kv: int,
                         seq_len_q: Optional[Tensor], seq_len_kv: Optional[Tensor], sink: Optional[Tensor],
                         softmax_scale: Optional[float], causal: bool, window_left: Optional[int],
                         window_right: Optional[int], causal_alignment: str,
                         deterministic: Optional[bool] = None) -> tuple[Tensor, Tensor]:
    """The forward of either layout -> out (the caller's layout, contiguous) and lse fp32 ((B, Hq, Sq) or
    (Hq, Tq)). ``deterministic`` is the backward's (None: torch's flag when the backward runs)."""
    call = _call("forward", q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, seq_len_q,
                 seq_len_kv, sink, softmax_scale, causal, window_left, window_right, causal_alignment, deterministic)
    check_forward(call)
    return forward(call)


attention_forward_op = torch.library.custom_op("frost::attention_forward", mutates_args=())(_attention_forward)


@attention_forward_op.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor], cu_seqlens_kv: Optional[Tensor],
      max_seqlen_q: int, max_seqlen_kv: int, seq_len_q: Optional[Tensor], seq_len_kv: Optional[Tensor],
      sink: Optional[Tensor], softmax_scale: Optional[float], causal: bool, window_left: Optional[int],
      window_right: Optional[int], causal_alignment: str, deterministic: Optional[bool] = None
      ) -> tuple[Tensor, Tensor]:
    concrete = _concrete(q, k, v, cu_seqlens_q, cu_seqlens_kv, seq_len_q, seq_len_kv, sink) and \
        all(isinstance(n, int) for n in (max_seqlen_q, max_seqlen_kv))
    if concrete:   # symbolic shapes are checked when the op runs
        check_forward(_call("forward", q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv,
                            seq_len_q, seq_len_kv, sink, softmax_scale, causal, window_left, window_right,
                            causal_alignment, deterministic))
    out = q.new_empty((*q.shape[:-1], v.shape[-1]))
    if cu_seqlens_q is not None:
        return out, q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    return out, q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


def check_forward(call: Call) -> None:
    """Everything the backward will need, checked when the forward runs (in the caller's terms), once per key:
    devices, dtypes, shapes, options, and that some engine serves the backward on this device."""
    key = (call.key(), call.options.deterministic)
    _checked.once(key, lambda: _check_backward_served(call))


def _check_backward_served(call: Call) -> None:
    """The backward's graph, with meta stand-ins for out, dout, lse and the gradients: the IR accepts it and an
    engine serves it on the device of q."""
    from frost.analyzer import probe

    check_tensors(call.given, call.layout.packed)
    g = call.given
    q, k, v = g["q"], g["k"], g["v"]
    io = _meta_like((*q.shape[:-1], v.shape[-1]), q.dtype)
    lse_shape = (q.shape[1], q.shape[0]) if call.layout.packed else (q.shape[0], q.shape[2], q.shape[1])
    stand_in = {"o": io, "do": io, "lse": _meta_like(lse_shape, torch.float32)}
    grads = {"dq": _meta_like(q.shape, q.dtype), "dk": _meta_like(k.shape, q.dtype), "dv": _meta_like(v.shape, q.dtype)}
    if "sink" in g:
        grads["dsink"] = _meta_like((q.shape[-2],), torch.float32)
    bwd = Call("backward", call.layout, g | stand_in, call.options, call.max_seqlens,
               bool(call.options.deterministic))
    try:
        graph = bwd.graph(grads)
    except FrostError as exc:
        raise in_caller_terms(exc, call.layout.packed) from exc
    report = probe(graph, target_of(q.device))
    if not report.supported:
        what = "packed attention's" if call.layout.packed else "attention's"
        raise NotSupported(f"no engine serves this {what} backward on {report.target}\n{report.to_text()}", report)


def _concrete(*tensors: Optional[Tensor]) -> bool:
    """Whether every shape and stride is a plain int (not a SymInt of a dynamic-shape trace)."""
    return all(isinstance(n, int) for t in tensors if t is not None for n in (*t.shape, *t.stride()))


def _meta_like(shape: Sequence[int], dtype: torch.dtype) -> Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device="meta")


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, Tensor]) -> None:
    """Keep what the backward reads (ctx is torch's autograd context object: it takes any attribute)."""
    q, k, v, cu_q, cu_kv, max_q, max_kv, seq_len_q, seq_len_kv, sink, *options = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_kv, seq_len_q, seq_len_kv, sink)
    ctx.max_seqlens = (max_q, max_kv)
    ctx.options = options
    ctx.has_sink = sink is not None
    ctx.set_materialize_grads(False)   # an unused output's gradient comes as None (no dlse pass for it)


def _backward(ctx: Any, grad_out: Optional[Tensor], grad_lse: Optional[Tensor]) -> tuple[Optional[Tensor], ...]:
    """The op's registered backward (what torch.compile and direct op users get): through the backward op."""
    q, k, v, out, lse, cu_q, cu_kv, seq_len_q, seq_len_kv, sink = ctx.saved_tensors
    dout, dlse = _incoming(out, grad_out, grad_lse)
    scale, causal, left, right, alignment, deterministic = ctx.options
    dq, dk, dv, dsink = torch.ops.frost.attention_backward(
        q, k, v, out, dout, lse, cu_q, cu_kv, *ctx.max_seqlens, seq_len_q, seq_len_kv, sink, scale, causal, left,
        right, alignment, gate.resolve_deterministic(deterministic), dlse)
    return _input_gradients(ctx, dq, dk, dv, dsink)


def _incoming(out: Tensor, grad_out: Optional[Tensor], grad_lse: Optional[Tensor]) -> tuple[Tensor, Optional[Tensor]]:
    """dout and dlse for the backward: zeros for dout when only lse was used (grad_lse: None when the loss does not
    use lse), each with its last dim dense."""
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    return _dense(grad_out), None if grad_lse is None else _dense(grad_lse)


def _input_gradients(ctx: Any, dq: Tensor, dk: Tensor, dv: Tensor, dsink: Optional[Tensor]
                     ) -> tuple[Optional[Tensor], ...]:
    """The op's 16 inputs' gradients: q, k, v and (with a sink) sink."""
    return (dq, dk, dv, None, None, None, None, None, None, dsink if ctx.has_sink else None,
            None, None, None, None, None, None)


def _dense(t: Tensor) -> Tensor:
    """Incoming gradients may be broadcast views (stride 0) or transposed: the backward wants the last dim dense."""
    if t.stride(-1) != 1 or 0 in t.stride():
        return t.contiguous()
    return t


attention_forward_op.register_autograd(_backward, setup_context=_setup_context)


class _Attention(torch.autograd.Function):
    """frost.attention's autograd node in eager mode: the same saved tensors and gradients as the op's registered
    autograd, running the forward's Call that _attention gated (the op's arguments follow it, as setup_context
    reads them), and a backward Call made of the saved tensors, the incoming gradients and that forward's gated
    options (nothing passes the gate twice). The op's dispatch and its autograd wrapper (which refills the 16
    schema defaults for setup_context on every call), and gating the arguments a second time in the op's body, cost
    more host time than the rest of the call; torch.compile traces the op instead (see _attention)."""

    @staticmethod
    def forward(ctx: Any, call: Call, *inputs: Any) -> tuple[Tensor, Tensor]:
        check_forward(call)
        output = forward(call)
        _setup_context(ctx, inputs, output)
        # no tensors here: the saved ones stay the only references (saved-tensor hooks, checkpointing)
        ctx.gated = (call.layout, call.options, call.max_seqlens)
        return output

    @staticmethod
    def backward(ctx: Any, grad_out: Optional[Tensor], grad_lse: Optional[Tensor]) -> tuple[Optional[Tensor], ...]:
        q, k, v, out, lse, cu_q, cu_kv, seq_len_q, seq_len_kv, sink = ctx.saved_tensors
        dout, dlse = _incoming(out, grad_out, grad_lse)
        # by role, in the order the op's backward gates them (the plan key follows the order)
        roles = (("q", q), ("k", k), ("v", v), ("seq_len_q", seq_len_q), ("seq_len_kv", seq_len_kv), ("sink", sink),
                 ("o", out), ("do", dout), ("lse", lse), ("dlse", dlse), ("cu_seqlens_q", cu_q),
                 ("cu_seqlens_kv", cu_kv))
        layout, options, max_seqlens = ctx.gated
        call = Call("backward", layout, {role: t for role, t in roles if t is not None}, options, max_seqlens,
                    gate.resolve_deterministic(options.deterministic))
        dq, dk, dv, dsink = backward(call)
        if torch.is_grad_enabled() and not dq.requires_grad:   # create_graph=True, and an engine autograd cannot see
            anchor = next((t for t in (q, k, v, sink) if t is not None and t.requires_grad), q)
            dq, dk, dv, dsink = _refuse_double_backward(anchor, dq, dk, dv, dsink)
        return (None, *_input_gradients(ctx, dq, dk, dv, dsink))


_attention_node: Callable[..., tuple[Tensor, Tensor]] = _Attention.apply


class _DoubleBackward(torch.autograd.Function):
    """Hangs the kernel backward's gradients on the graph that create_graph=True builds, so that differentiating
    them raises instead of silently contributing nothing (a gradient penalty would lose its attention terms)."""

    @staticmethod
    def forward(ctx: Any, anchor: Tensor, *grads: Tensor) -> tuple[Tensor, ...]:
        return tuple(g.view_as(g) for g in grads)

    @staticmethod
    def backward(ctx: Any, *grads: Optional[Tensor]) -> tuple[Optional[Tensor], ...]:
        raise NotSupported("double backward: the gradients of frost.attention's CUDA kernels are not differentiable "
                           "(create_graph=True, then a backward through them); the reference engine's are: run "
                           "that part on the CPU, or use attention without create_graph")


_double_backward_node: Callable[..., tuple[Tensor, ...]] = _DoubleBackward.apply


def _refuse_double_backward(anchor: Tensor, dq: Tensor, dk: Tensor, dv: Tensor, dsink: Optional[Tensor]
                            ) -> tuple[Tensor, Tensor, Tensor, Optional[Tensor]]:
    if dsink is None:
        dq, dk, dv = _double_backward_node(anchor, dq, dk, dv)
    else:
        dq, dk, dv, dsink = _double_backward_node(anchor, dq, dk, dv, dsink)
    return dq, dk, dv, dsink


def _attention(layout: Layout, q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor],
               cu_seqlens_kv: Optional[Tensor], max_seqlen_q: int, max_seqlen_kv: int, seq_len_q: Optional[Tensor],
               seq_len_kv: Optional[Tensor], sink: Optional[Tensor], softmax_scale: Scale, causal: bool,
               window_size: Window, causal_alignment: Alignment, return_lse: bool,
               deterministic: Optional[bool]) -> Union[Tensor, tuple[Tensor, Tensor]]:
    options = gate.options(softmax_scale, causal, window_size, causal_alignment, deterministic)
    return_lse = gate.strict_bool("return_lse", return_lse)
    values: dict[str, Any] = dict(q=q, k=k, v=v, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, sink=sink)
    given, max_seqlens = _gated_tensors(layout, values, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv)
    if max_seqlens is not None:
        max_seqlen_q, max_seqlen_kv = max_seqlens
    op_args = (q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, seq_len_q, seq_len_kv, sink,
               options.softmax_scale, options.causal, options.left, options.right, options.alignment,
               options.deterministic)
    out: Tensor
    lse: Tensor
    # eager: the autograd node of our own, on the Call gated here; under torch.compile: the op and its registered
    # autograd (Dynamo traces them, and refuses an autograd.Function given one tensor twice, as seq_len_q =
    # seq_len_kv often is)
    if torch.compiler.is_compiling():
        out, lse = torch.ops.frost.attention_forward(*op_args)
    else:
        out, lse = _attention_node(Call("forward", layout, given, options, max_seqlens), *op_args)
    return (out, lse) if return_lse else out


# return_lse picks the return type for a type checker: out alone, or (out, lse)
@overload
def attention(q: Tensor, k: Tensor, v: Tensor, *, softmax_scale: Scale = ..., causal: bool = ...,
              window_size: Window = ..., causal_alignment: Alignment = ..., seq_len_q: Optional[Tensor] = ...,
              seq_len_kv: Optional[Tensor] = ..., sink: Optional[Tensor] = ...,
              return_lse: Literal[False] = ..., deterministic: Optional[bool] = ...) -> Tensor: ...
@overload
def attention(q: Tensor, k: Tensor, v: Tensor, *, softmax_scale: Scale = ..., causal: bool = ...,
              window_size: Window = ..., causal_alignment: Alignment = ..., seq_len_q: Optional[Tensor] = ...,
              seq_len_kv: Optional[Tensor] = ..., sink: Optional[Tensor] = ...,
              return_lse: Literal[True], deterministic: Optional[bool] = ...) -> tuple[Tensor, Tensor]: ...
@overload
def attention(q: Tensor, k: Tensor, v: Tensor, *, softmax_scale: Scale = ..., causal: bool = ...,
              window_size: Window = ..., causal_alignment: Alignment = ..., seq_len_q: Optional[Tensor] = ...,
              seq_len_kv: Optional[Tensor] = ..., sink: Optional[Tensor] = ...,
              return_lse: bool, deterministic: Optional[bool] = ...) -> Union[Tensor, tuple[Tensor, Tensor]]: ...


def attention(q: Tensor, k: Tensor, v: Tensor, *, softmax_scale: Scale = None, causal: bool = False,
              window_size: Window = (None, None), causal_alignment: Alignment = "top_left",
              seq_len_q: Optional[Tensor] = None, seq_len_kv: Optional[Tensor] = None, sink: Optional[Tensor] = None,
              return_lse: bool = False, deterministic: Optional[bool] = None) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """Attention on (B, S, H, D) tensors with a frost backward: out (B, Sq, Hq, Dv), and lse (B, Hq, Sq) fp32 when
    return_lse. Differentiable in q, k, v and sink (and through lse). The options mean what they mean for
    frost.sdpa_forward; the forward checks every argument the backward will need (a FrostError names it). An empty
    problem (B, Sq or Skv = 0) gives empty or zero outputs and gradients. The backward is bitwise deterministic with
    deterministic=True, or with None (the default) while torch.use_deterministic_algorithms(True) is in force when
    it runs. Gradients taken with create_graph=True are differentiable on the reference engine; the CUDA kernels'
    are not, and a backward through them raises NotSupported."""
    return _attention(DENSE, q, k, v, None, None, 0, 0, seq_len_q, seq_len_kv, sink, softmax_scale, causal,
                      window_size, causal_alignment, return_lse, deterministic)


@overload
def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor,
                     max_seqlen_q: int, max_seqlen_kv: int, *, softmax_scale: Scale = ..., causal: bool = ...,
                     window_size: Window = ..., causal_alignment: Alignment = ..., seqused_q: Optional[Tensor] = ...,
                     seqused_kv: Optional[Tensor] = ..., sink: Optional[Tensor] = ...,
                     return_lse: Literal[False] = ..., deterministic: Optional[bool] = ...) -> Tensor: ...
@overload
def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor,
                     max_seqlen_q: int, max_seqlen_kv: int, *, softmax_scale: Scale = ..., causal: bool = ...,
                     window_size: Window = ..., causal_alignment: Alignment = ..., seqused_q: Optional[Tensor] = ...,
                     seqused_kv: Optional[Tensor] = ..., sink: Optional[Tensor] = ...,
                     return_lse: Literal[True], deterministic: Optional[bool] = ...) -> tuple[Tensor, Tensor]: ...
@overload
def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor,
                     max_seqlen_q: int, max_seqlen_kv: int, *, softmax_scale: Scale = ..., causal: bool = ...,
                     window_size: Window = ..., causal_alignment: Alignment = ..., seqused_q: Optional[Tensor] = ...,
                     seqused_kv: Optional[Tensor] = ..., sink: Optional[Tensor] = ...,
                     return_lse: bool, deterministic: Optional[bool] = ...) -> Union[Tensor, tuple[Tensor, Tensor]]: ...


def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor,
                     max_seqlen_q: int, max_seqlen_kv: int, *, softmax_scale: Scale = None, causal: bool = False,
                     window_size: Window = (None, None), causal_alignment: Alignment = "top_left",
                     seqused_q: Optional[Tensor] = None, seqused_kv: Optional[Tensor] = None,
                     sink: Optional[Tensor] = None, return_lse: bool = False,
                     deterministic: Optional[bool] = None) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """Attention on packed sequences with a frost backward: out (Tq, Hq, Dv), and lse (Hq, Tq) fp32 when
    return_lse. q (Tq, Hq, Dqk), k / v (Tkv, Hkv, D), cu_seqlens_* int32 (B + 1,) on q's device, max_seqlen_* host
    ints, seqused_* int32 (B,). Every option means per sequence what it means per batch row of frost.attention."""
    return _attention(PACKED, q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, seqused_q,
                      seqused_kv, sink, softmax_scale, causal, window_size, causal_alignment, return_lse,
                      deterministic)


__all__ = ["attention", "attention_varlen", "check_forward"]

"""A builder that reads like the math: declare tensors, add the op, get named outputs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Union

from frost.errors import GraphError
from frost.ir.graph import Graph
from frost.ir.pydantic_errors import as_graph_errors
from frost.ir.ops import (STRUCTURED_OPS, GenericOp, SdpaBackwardOp, SdpaForwardInputs, SdpaForwardOp,
                          SdpaForwardOutputs, SdpaInputs, SdpaOutputs)
from frost.ir.tensors import LAYOUTS, DType, Layout, Ragged, TensorSpec, layout_strides
from frost.spec import Alignment, as_int, gqa_accepted, heads_divide

if TYPE_CHECKING:
    from typing_extensions import Unpack


class ForwardAttrs(TypedDict, total=False):
    """The attributes of an attention op that the one-call graph functions pass on (**op_attrs)."""

    attn_scale: float | None
    causal: bool
    alignment: Alignment
    band_left: int | None
    band_right: int | None


class BackwardAttrs(ForwardAttrs, total=False):
    deterministic: bool


class _ForwardPorts(TypedDict, total=False):
    """The optional inputs of a one-call graph's forward, by keyword (tensor names)."""

    sink: str
    seq_len_q: str
    seq_len_kv: str
    cu_seqlens_q: str
    cu_seqlens_kv: str


class _BackwardPorts(_ForwardPorts, total=False):
    dlse: str


@dataclass(frozen=True)
class SdpaGrads:
    """Names of the tensors the op writes."""

    dq: str
    dk: str
    dv: str
    dsink: str | None = None


@dataclass(frozen=True)
class SdpaResult:
    """Names of the tensors a forward writes."""

    o: str
    lse: str


class GraphBuilder:
    """Collects tensors and ops; `build()` validates everything and returns an immutable Graph."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self._tensors: dict[str, TensorSpec] = {}
        self._ops: list[Union[SdpaBackwardOp, SdpaForwardOp, GenericOp]] = []

    def tensor(self, name: str, shape: tuple[int, ...], dtype: DType, *, layout: Layout = "bhsd",
               strides: tuple[int, ...] | None = None, ragged: Ragged | None = None) -> str:
        """Declare a tensor with a logical shape; `layout` ("bhsd" or "bshd") picks strides unless `strides` is
        given. A packed tensor passes `ragged` (its offsets tensor and longest sequence) and a logical (H, T, D)
        shape; "bshd" then lays it out as packed THD memory (token, head, head dim)."""
        if layout not in LAYOUTS:
            raise GraphError(f"tensor {name!r} layout", layout, " or ".join(repr(x) for x in LAYOUTS))
        shape = _ints(f"tensor {name!r}.shape", shape)
        if strides is not None:
            strides = _ints(f"tensor {name!r}.strides", strides)
        elif layout != "bhsd":
            strides = layout_strides(shape, layout, ragged=ragged is not None)
        with as_graph_errors(f"tensor {name!r}"):
            spec = TensorSpec(name=name, shape=shape, dtype=dtype, strides=strides, ragged=ragged)
        self._declare(spec)
        return name

    def _declare(self, spec: TensorSpec) -> None:
        """Add a tensor; a second tensor of the same name is an error, not a silent replacement."""
        if spec.name in self._tensors:
            raise GraphError("tensor name", spec.name, "unique tensor names")
        self._tensors[spec.name] = spec

    def _like(self, name: str, src: str, dtype: DType | None = None) -> str:
        ref = self._tensors[src]
        self._declare(TensorSpec(name=name, shape=ref.shape, strides=ref.strides, dtype=dtype or ref.dtype,
                                 ragged=ref.ragged))
        return name

    def _check_refs(self, kind: str, name: str, refs: Iterable[str | None]) -> None:
        for ref in refs:
            if ref is not None and ref not in self._tensors:
                raise GraphError(f"{kind} {name!r} tensor reference", ref,
                                 f"a declared tensor ({', '.join(sorted(self._tensors)) or 'none declared'})")

    def _output_like(self, name: str, src: str, head_dim: int) -> str:
        """A (B, H, S, head_dim) tensor in the io dtype, laid out as `src` is when that is BSHD (else BHSD); for a
        ragged `src`, an (H, T, head_dim) tensor ragged like it, packed THD when `src` is."""
        ref = self._tensors[src]
        shape = (*ref.shape[:-1], head_dim)
        ragged = ref.ragged is not None
        strides = None
        if ref.strides is not None and ref.strides == layout_strides(ref.shape, "bshd", ragged=ragged):
            strides = layout_strides(shape, "bshd", ragged=ragged)
        self._declare(TensorSpec(name=name, shape=shape, strides=strides, dtype=ref.dtype, ragged=ref.ragged))
        return name

    def _expect_io_rank(self, q: str, v: str, cu_seqlens_q: str | None) -> None:
        """q and v are rank 4, logical (B, H, S, D); rank 3, (H, T, D), in a ragged op."""
        qs, vs = self._tensors[q], self._tensors[v]
        rank, logical = (3, "(H, T, D), ragged") if cu_seqlens_q or qs.ragged else (4, "(B, H, S, D)")
        for role, spec in (("q", qs), ("v", vs)):
            if spec.rank != rank:
                raise GraphError(f"{role} tensor {spec.name!r}.shape", spec.shape, f"rank {rank}, logical {logical}")

    def sdpa_forward(self, q: str, k: str, v: str, *, sink: str | None = None, seq_len_q: str | None = None,
                     seq_len_kv: str | None = None, cu_seqlens_q: str | None = None,
                     cu_seqlens_kv: str | None = None, attn_scale: float | None = None, causal: bool = False,
                     alignment: Alignment = "top_left", band_left: int | None = None, band_right: int | None = None,
                     name: str | None = None) -> SdpaResult:
        """Add an attention forward; o is (B, Hq, Sq, Dv) in the io dtype, laid out like q (BSHD or BHSD), lse fp32
        (B, Hq, Sq). With cu_seqlens_q / cu_seqlens_kv (packed sequences; q, k, v ragged over them) o is (Hq, Tq, Dv)
        and lse (Hq, Tq), both ragged like q. The mask keywords mean what they mean for sdpa_backward."""
        name = name or f"sdpa_forward_{len(self._ops)}"
        self._check_refs("sdpa_forward", name, (q, k, v, sink, seq_len_q, seq_len_kv, cu_seqlens_q, cu_seqlens_kv))
        self._expect_io_rank(q, v, cu_seqlens_q)
        qs, vs = self._tensors[q], self._tensors[v]
        result = SdpaResult(o=self._output_like(f"{name}.o", q, vs.shape[-1]), lse=f"{name}.lse")
        self._declare(TensorSpec(name=result.lse, shape=qs.shape[:-1], dtype="float32", ragged=qs.ragged))
        with as_graph_errors(f"sdpa_forward {name!r}"):
            self._ops.append(SdpaForwardOp(
                name=name, inputs=SdpaForwardInputs(q=q, k=k, v=v, sink=sink, seq_len_q=seq_len_q,
                                                    seq_len_kv=seq_len_kv, cu_seqlens_q=cu_seqlens_q,
                                                    cu_seqlens_kv=cu_seqlens_kv),
                outputs=SdpaForwardOutputs(o=result.o, lse=result.lse), attn_scale=attn_scale, causal=causal,
                alignment=alignment, band_left=band_left, band_right=band_right,
            ))
        return result

    def sdpa_backward(self, q: str, k: str, v: str, o: str, do: str, lse: str, *, sink: str | None = None,
                      dlse: str | None = None, seq_len_q: str | None = None, seq_len_kv: str | None = None,
                      cu_seqlens_q: str | None = None, cu_seqlens_kv: str | None = None,
                      attn_scale: float | None = None,
                      causal: bool = False, alignment: Alignment = "top_left", band_left: int | None = None,
                      band_right: int | None = None, deterministic: bool = False, name: str | None = None) -> SdpaGrads:
        """Add an attention backward; outputs dq/dk/dv take the layout (and raggedness) of q/k/v, dsink is fp32
        (Hq,). ``dlse``: the gradient of the loss with respect to the forward's LSE output, when the loss uses it.
        cu_seqlens_q / cu_seqlens_kv: packed sequences, as for sdpa_forward."""
        name = name or f"sdpa_backward_{len(self._ops)}"
        self._check_refs("sdpa_backward", name,
                         (q, k, v, o, do, lse, sink, dlse, seq_len_q, seq_len_kv, cu_seqlens_q, cu_seqlens_kv))
        grads = SdpaGrads(
            dq=self._like(f"{name}.dq", q), dk=self._like(f"{name}.dk", k), dv=self._like(f"{name}.dv", v),
            dsink=self._like(f"{name}.dsink", sink, "float32") if sink is not None else None,
        )
        with as_graph_errors(f"sdpa_backward {name!r}"):
            self._ops.append(SdpaBackwardOp(
                name=name,
                inputs=SdpaInputs(q=q, k=k, v=v, o=o, do=do, lse=lse, sink=sink, dlse=dlse, seq_len_q=seq_len_q,
                                  seq_len_kv=seq_len_kv, cu_seqlens_q=cu_seqlens_q, cu_seqlens_kv=cu_seqlens_kv),
                outputs=SdpaOutputs(dq=grads.dq, dk=grads.dk, dv=grads.dv, dsink=grads.dsink),
                attn_scale=attn_scale, causal=causal, alignment=alignment, band_left=band_left,
                band_right=band_right, deterministic=deterministic,
            ))
        return grads

    def op(self, op: str, name: str, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = (),
           **attrs: Any) -> None:
        """Add a node frost does not serve itself (it stays in the graph, reported as unclaimed)."""
        if op in STRUCTURED_OPS:
            raise GraphError(f"op {name!r}.op", op, "any other op kind (declare attention with "
                             "GraphBuilder.sdpa_forward or GraphBuilder.sdpa_backward)")
        with as_graph_errors(f"op {name!r}"):
            self._ops.append(GenericOp(op=op, name=name, inputs=tuple(inputs), outputs=tuple(outputs), attrs=attrs))

    def build(self) -> Graph:
        with as_graph_errors(f"graph {self.name!r}"):
            return Graph(name=self.name, tensors=tuple(self._tensors.values()), ops=tuple(self._ops))


def _ints(subject: str, values: object) -> tuple[int, ...]:
    """A declared shape or strides as ints: Python or numpy integers pass; a float, a string or a bool is a mistake
    (never truncated or parsed), and so is a lone int where a tuple goes."""
    accepted = "a tuple of ints (Python or numpy integers; not floats, strings or bools)"
    if not isinstance(values, Iterable) or isinstance(values, (str, bytes)):
        raise GraphError(subject, values, accepted)
    values = tuple(values)
    ints = tuple(as_int(x) for x in values)
    if None in ints:
        raise GraphError(subject, values, accepted)
    return ints  # type: ignore[return-value]


def _size(name: str, value: object) -> int:
    """A size argument of a one-call graph function, checked under its own name: an int (a numpy integer too;
    never a bool, a float or a string), >= 1 for a head count or head dim, >= 0 for a batch, sequence or token
    count (those may be empty)."""
    minimum = 1 if name.startswith(("heads", "head_dim")) else 0
    accepted = f"an int >= {minimum}" + (" (heads and head dims are never empty)" if minimum else
                                         " (batches, sequences and token counts may be empty)")
    n = as_int(value)
    if n is None:
        raise GraphError(name, value, accepted)
    if n < minimum:
        raise GraphError(name, n, accepted)
    return n


def _size_or(name: str, value: object, default: int) -> int:
    """An optional size argument: ``default`` when None (0 is a size, never "not given")."""
    return default if value is None else _size(name, value)


def _dense_sizes(batch: int, heads_q: int, seq_q: int, head_dim: int, heads_kv: int | None, seq_kv: int | None,
                 head_dim_v: int | None) -> tuple[int, int, int, int, int, int, int]:
    """(B, Hq, Sq, D, Hkv, Skv, Dv) of a dense one-call graph, checked; the kv sizes default to the q side's."""
    b, hq, sq, d = (_size(n, x) for n, x in (("batch", batch), ("heads_q", heads_q), ("seq_q", seq_q),
                                              ("head_dim", head_dim)))
    return b, hq, sq, d, _heads_kv(heads_kv, hq), _size_or("seq_kv", seq_kv, sq), _size_or("head_dim_v", head_dim_v, d)


def _packed_sizes(batch: int, heads_q: int, tokens_q: int, max_len_q: int, head_dim: int, heads_kv: int | None,
                  tokens_kv: int | None, max_len_kv: int | None, head_dim_v: int | None
                  ) -> tuple[int, int, int, int, int, int, int, int, int]:
    """(B, Hq, Tq, max Sq, D, Hkv, Tkv, max Skv, Dv) of a packed one-call graph, checked; the kv sizes default
    to the q side's."""
    b, hq, tq, mq, d = (_size(n, x) for n, x in (("batch", batch), ("heads_q", heads_q), ("tokens_q", tokens_q),
                                                  ("max_len_q", max_len_q), ("head_dim", head_dim)))
    return (b, hq, tq, mq, d, _heads_kv(heads_kv, hq), _size_or("tokens_kv", tokens_kv, tq),
            _size_or("max_len_kv", max_len_kv, mq), _size_or("head_dim_v", head_dim_v, d))


def _heads_kv(heads_kv: int | None, heads_q: int) -> int:
    """heads_kv (default heads_q): a divisor of heads_q, named as the caller spelled it."""
    hkv = _size_or("heads_kv", heads_kv, heads_q)
    if not heads_divide(heads_q, hkv):
        raise GraphError("heads_kv", hkv, gqa_accepted(heads_q, "heads_q"))
    return hkv


def _flags(**flags: object) -> None:
    """The one-call graph functions' switches (sink, padded, seqused, dlse): True or False only, so a truthy
    string or a 1 is refused under its own name instead of adding a port."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise GraphError(name, value, "True or False")


def sdpa_backward_graph(batch: int, heads_q: int, seq_q: int, head_dim: int, *, heads_kv: int | None = None,
                        seq_kv: int | None = None, head_dim_v: int | None = None, dtype: DType = "bfloat16",
                        layout: Layout = "bshd", sink: bool = False, padded: bool = False, dlse: bool = False,
                        **op_attrs: Unpack[BackwardAttrs]) -> Graph:
    """The common one-op graph, declared in one call (used by the demo, the functional API and tests)."""
    batch, heads_q, seq_q, head_dim, hkv, skv, dv = _dense_sizes(batch, heads_q, seq_q, head_dim, heads_kv, seq_kv,
                                                                  head_dim_v)
    _flags(sink=sink, padded=padded, dlse=dlse)
    b = GraphBuilder("sdpa_backward")
    q = b.tensor("q", (batch, heads_q, seq_q, head_dim), dtype, layout=layout)
    k = b.tensor("k", (batch, hkv, skv, head_dim), dtype, layout=layout)
    v = b.tensor("v", (batch, hkv, skv, dv), dtype, layout=layout)
    o = b.tensor("o", (batch, heads_q, seq_q, dv), dtype, layout=layout)
    do = b.tensor("do", (batch, heads_q, seq_q, dv), dtype, layout=layout)
    lse = b.tensor("lse", (batch, heads_q, seq_q), "float32")
    extras: _BackwardPorts = {}
    if sink:
        extras["sink"] = b.tensor("sink", (heads_q,), "float32")
    if dlse:
        extras["dlse"] = b.tensor("dlse", (batch, heads_q, seq_q), "float32")
    if padded:
        extras["seq_len_q"] = b.tensor("seq_len_q", (batch,), "int32")
        extras["seq_len_kv"] = b.tensor("seq_len_kv", (batch,), "int32")
    b.sdpa_backward(q, k, v, o, do, lse, name="attn", **extras, **op_attrs)
    return b.build()


def sdpa_forward_graph(batch: int, heads_q: int, seq_q: int, head_dim: int, *, heads_kv: int | None = None,
                       seq_kv: int | None = None, head_dim_v: int | None = None, dtype: DType = "bfloat16",
                       layout: Layout = "bshd", sink: bool = False, padded: bool = False,
                       **op_attrs: Unpack[ForwardAttrs]) -> Graph:
    """The common one-op forward graph, declared in one call; its outputs are "attn.o" and "attn.lse"."""
    batch, heads_q, seq_q, head_dim, hkv, skv, dv = _dense_sizes(batch, heads_q, seq_q, head_dim, heads_kv, seq_kv,
                                                                  head_dim_v)
    _flags(sink=sink, padded=padded)
    b = GraphBuilder("sdpa_forward")
    q = b.tensor("q", (batch, heads_q, seq_q, head_dim), dtype, layout=layout)
    k = b.tensor("k", (batch, hkv, skv, head_dim), dtype, layout=layout)
    v = b.tensor("v", (batch, hkv, skv, dv), dtype, layout=layout)
    extras: _ForwardPorts = {}
    if sink:
        extras["sink"] = b.tensor("sink", (heads_q,), "float32")
    if padded:
        extras["seq_len_q"] = b.tensor("seq_len_q", (batch,), "int32")
        extras["seq_len_kv"] = b.tensor("seq_len_kv", (batch,), "int32")
    b.sdpa_forward(q, k, v, name="attn", **extras, **op_attrs)
    return b.build()


def _varlen_side(b: GraphBuilder, extras: _ForwardPorts, batch: int, max_len_q: int, max_len_kv: int,
                 seqused: bool) -> tuple[Ragged, Ragged]:
    """Declare the offsets (and seqused lengths) of a packed one-op graph, adding them to the op's keyword inputs
    `extras`; returns the two Ragged."""
    extras["cu_seqlens_q"] = b.tensor("cu_seqlens_q", (batch + 1,), "int32")
    extras["cu_seqlens_kv"] = b.tensor("cu_seqlens_kv", (batch + 1,), "int32")
    if seqused:
        extras["seq_len_q"] = b.tensor("seq_len_q", (batch,), "int32")
        extras["seq_len_kv"] = b.tensor("seq_len_kv", (batch,), "int32")
    return Ragged(offsets="cu_seqlens_q", max_len=max_len_q), Ragged(offsets="cu_seqlens_kv", max_len=max_len_kv)


def sdpa_backward_varlen_graph(batch: int, heads_q: int, tokens_q: int, max_len_q: int, head_dim: int, *,
                               heads_kv: int | None = None, tokens_kv: int | None = None,
                               max_len_kv: int | None = None, head_dim_v: int | None = None,
                               dtype: DType = "bfloat16", layout: Layout = "bshd", sink: bool = False,
                               seqused: bool = False, dlse: bool = False,
                               **op_attrs: Unpack[BackwardAttrs]) -> Graph:
    """The one-op backward over packed sequences (B of them, tokens_q query tokens in all), declared in one call:
    q (Hq, Tq, D) ragged over "cu_seqlens_q", k/v over "cu_seqlens_kv", packed THD ("bshd") by default, lse (Hq, Tq)
    head-major; `seqused` adds per-sequence valid lengths as "seq_len_q" / "seq_len_kv"."""
    batch, heads_q, tokens_q, max_len_q, head_dim, hkv, tkv, mkv, dv = _packed_sizes(
        batch, heads_q, tokens_q, max_len_q, head_dim, heads_kv, tokens_kv, max_len_kv, head_dim_v)
    _flags(sink=sink, seqused=seqused, dlse=dlse)
    b = GraphBuilder("sdpa_backward_varlen")
    extras: _BackwardPorts = {}
    rq, rkv = _varlen_side(b, extras, batch, max_len_q, mkv, seqused)
    q = b.tensor("q", (heads_q, tokens_q, head_dim), dtype, layout=layout, ragged=rq)
    k = b.tensor("k", (hkv, tkv, head_dim), dtype, layout=layout, ragged=rkv)
    v = b.tensor("v", (hkv, tkv, dv), dtype, layout=layout, ragged=rkv)
    o = b.tensor("o", (heads_q, tokens_q, dv), dtype, layout=layout, ragged=rq)
    do = b.tensor("do", (heads_q, tokens_q, dv), dtype, layout=layout, ragged=rq)
    lse = b.tensor("lse", (heads_q, tokens_q), "float32", ragged=rq)
    if sink:
        extras["sink"] = b.tensor("sink", (heads_q,), "float32")
    if dlse:
        extras["dlse"] = b.tensor("dlse", (heads_q, tokens_q), "float32", ragged=rq)
    b.sdpa_backward(q, k, v, o, do, lse, name="attn", **extras, **op_attrs)
    return b.build()


def sdpa_forward_varlen_graph(batch: int, heads_q: int, tokens_q: int, max_len_q: int, head_dim: int, *,
                              heads_kv: int | None = None, tokens_kv: int | None = None,
                              max_len_kv: int | None = None, head_dim_v: int | None = None,
                              dtype: DType = "bfloat16", layout: Layout = "bshd", sink: bool = False,
                              seqused: bool = False, **op_attrs: Unpack[ForwardAttrs]) -> Graph:
    """The one-op forward over packed sequences, declared in one call (names as sdpa_backward_varlen_graph); its
    outputs are "attn.o" (Hq, Tq, Dv), laid out like q, and "attn.lse" (Hq, Tq) head-major."""
    batch, heads_q, tokens_q, max_len_q, head_dim, hkv, tkv, mkv, dv = _packed_sizes(
        batch, heads_q, tokens_q, max_len_q, head_dim, heads_kv, tokens_kv, max_len_kv, head_dim_v)
    _flags(sink=sink, seqused=seqused)
    b = GraphBuilder("sdpa_forward_varlen")
    extras: _ForwardPorts = {}
    rq, rkv = _varlen_side(b, extras, batch, max_len_q, mkv, seqused)
    q = b.tensor("q", (heads_q, tokens_q, head_dim), dtype, layout=layout, ragged=rq)
    k = b.tensor("k", (hkv, tkv, head_dim), dtype, layout=layout, ragged=rkv)
    v = b.tensor("v", (hkv, tkv, dv), dtype, layout=layout, ragged=rkv)
    if sink:
        extras["sink"] = b.tensor("sink", (heads_q,), "float32")
    b.sdpa_forward(q, k, v, name="attn", **extras, **op_attrs)
    return b.build()

"""A builder that reads like the math: declare tensors, add the op, get named outputs."""

from __future__ import annotations

from dataclasses import dataclass

from frost.errors import GraphError
from frost.ir.graph import Graph
from frost.ir.pydantic_errors import as_graph_errors
from frost.ir.ops import (STRUCTURED_OPS, Alignment, GenericOp, SdpaBackwardOp, SdpaForwardInputs,
                          SdpaForwardOp, SdpaForwardOutputs, SdpaInputs, SdpaOutputs)
from frost.ir.tensors import LAYOUTS, DType, Layout, TensorSpec, layout_strides


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
        self._ops: list = []

    def tensor(self, name: str, shape: tuple[int, ...], dtype: DType, *, layout: Layout = "bhsd",
               strides: tuple[int, ...] | None = None) -> str:
        """Declare a tensor with a logical shape; `layout` ("bhsd" or "bshd") picks strides unless `strides` is
        given."""
        if layout not in LAYOUTS:
            raise GraphError(f"tensor {name!r} layout", layout, " or ".join(repr(x) for x in LAYOUTS))
        shape = tuple(int(x) for x in shape)
        if strides is None and layout != "bhsd":
            strides = layout_strides(shape, layout)
        with as_graph_errors(f"tensor {name!r}"):
            spec = TensorSpec(name=name, shape=shape, dtype=dtype, strides=tuple(strides) if strides is not None else None)
        self._declare(spec)
        return name

    def _declare(self, spec: TensorSpec) -> None:
        """Add a tensor; a second tensor of the same name is an error, not a silent replacement."""
        if spec.name in self._tensors:
            raise GraphError("tensor name", spec.name, "unique tensor names")
        self._tensors[spec.name] = spec

    def _like(self, name: str, src: str, dtype: DType | None = None) -> str:
        ref = self._tensors[src]
        self._declare(TensorSpec(name=name, shape=ref.shape, strides=ref.strides, dtype=dtype or ref.dtype))
        return name

    def _check_refs(self, kind: str, name: str, refs) -> None:
        for ref in refs:
            if ref is not None and ref not in self._tensors:
                raise GraphError(f"{kind} {name!r} tensor reference", ref,
                                 f"a declared tensor ({', '.join(sorted(self._tensors)) or 'none declared'})")

    def _output_like(self, name: str, src: str, head_dim: int) -> str:
        """A (B, H, S, head_dim) tensor in the io dtype, laid out as `src` is when that is BSHD (else BHSD)."""
        ref = self._tensors[src]
        shape = (*ref.shape[:3], head_dim)
        strides = None
        if ref.strides is not None and ref.strides == layout_strides(ref.shape, "bshd"):
            strides = layout_strides(shape, "bshd")
        self._declare(TensorSpec(name=name, shape=shape, strides=strides, dtype=ref.dtype))
        return name

    def sdpa_forward(self, q: str, k: str, v: str, *, sink: str | None = None, seq_len_q: str | None = None,
                     seq_len_kv: str | None = None, attn_scale: float | None = None, causal: bool = False,
                     alignment: Alignment = "top_left", band_left: int | None = None, band_right: int | None = None,
                     name: str | None = None) -> SdpaResult:
        """Add an attention forward; o is (B, Hq, Sq, Dv) in the io dtype, laid out like q (BSHD or BHSD), lse fp32
        (B, Hq, Sq). The mask keywords mean what they mean for sdpa_backward."""
        name = name or f"sdpa_forward_{len(self._ops)}"
        self._check_refs("sdpa_forward", name, (q, k, v, sink, seq_len_q, seq_len_kv))
        qs, vs = self._tensors[q], self._tensors[v]
        if qs.rank != 4 or vs.rank != 4:
            bad, spec = ("q", qs) if qs.rank != 4 else ("v", vs)
            raise GraphError(f"{bad} tensor {spec.name!r}.shape", spec.shape, "rank 4, logical (B, H, S, D)")
        result = SdpaResult(o=self._output_like(f"{name}.o", q, vs.shape[3]), lse=f"{name}.lse")
        self._declare(TensorSpec(name=result.lse, shape=qs.shape[:3], dtype="float32"))
        with as_graph_errors(f"sdpa_forward {name!r}"):
            self._ops.append(SdpaForwardOp(
                name=name, inputs=SdpaForwardInputs(q=q, k=k, v=v, sink=sink, seq_len_q=seq_len_q,
                                                    seq_len_kv=seq_len_kv),
                outputs=SdpaForwardOutputs(o=result.o, lse=result.lse), attn_scale=attn_scale, causal=causal,
                alignment=alignment, band_left=band_left, band_right=band_right,
            ))
        return result

    def sdpa_backward(self, q: str, k: str, v: str, o: str, do: str, lse: str, *, sink: str | None = None,
                      dlse: str | None = None, seq_len_q: str | None = None, seq_len_kv: str | None = None,
                      attn_scale: float | None = None,
                      causal: bool = False, alignment: Alignment = "top_left", band_left: int | None = None,
                      band_right: int | None = None, deterministic: bool = False, name: str | None = None) -> SdpaGrads:
        """Add an attention backward; outputs dq/dk/dv take the layout of q/k/v, dsink is fp32 (Hq,). ``dlse``: the
        gradient of the loss with respect to the forward's LSE output, when the loss uses it."""
        name = name or f"sdpa_backward_{len(self._ops)}"
        self._check_refs("sdpa_backward", name, (q, k, v, o, do, lse, sink, dlse, seq_len_q, seq_len_kv))
        grads = SdpaGrads(
            dq=self._like(f"{name}.dq", q), dk=self._like(f"{name}.dk", k), dv=self._like(f"{name}.dv", v),
            dsink=self._like(f"{name}.dsink", sink, "float32") if sink is not None else None,
        )
        with as_graph_errors(f"sdpa_backward {name!r}"):
            self._ops.append(SdpaBackwardOp(
                name=name,
                inputs=SdpaInputs(q=q, k=k, v=v, o=o, do=do, lse=lse, sink=sink, dlse=dlse, seq_len_q=seq_len_q,
                                  seq_len_kv=seq_len_kv),
                outputs=SdpaOutputs(dq=grads.dq, dk=grads.dk, dv=grads.dv, dsink=grads.dsink),
                attn_scale=attn_scale, causal=causal, alignment=alignment, band_left=band_left,
                band_right=band_right, deterministic=deterministic,
            ))
        return grads

    def op(self, op: str, name: str, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = (), **attrs) -> None:
        """Add a node frost does not serve itself (it stays in the graph, reported as unclaimed)."""
        if op in STRUCTURED_OPS:
            raise GraphError(f"op {name!r}.op", op, "any other op kind (declare attention with "
                             "GraphBuilder.sdpa_forward or GraphBuilder.sdpa_backward)")
        with as_graph_errors(f"op {name!r}"):
            self._ops.append(GenericOp(op=op, name=name, inputs=tuple(inputs), outputs=tuple(outputs), attrs=attrs))

    def build(self) -> Graph:
        with as_graph_errors(f"graph {self.name!r}"):
            return Graph(name=self.name, tensors=tuple(self._tensors.values()), ops=tuple(self._ops))


def sdpa_backward_graph(batch: int, heads_q: int, seq_q: int, head_dim: int, *, heads_kv: int | None = None,
                        seq_kv: int | None = None, head_dim_v: int | None = None, dtype: DType = "bfloat16",
                        layout: Layout = "bshd", sink: bool = False, padded: bool = False, dlse: bool = False,
                        **op_attrs) -> Graph:
    """The common one-op graph, declared in one call (used by the demo, the functional API and tests)."""
    hkv = heads_kv or heads_q
    skv = seq_kv or seq_q
    dv = head_dim_v or head_dim
    b = GraphBuilder("sdpa_backward")
    q = b.tensor("q", (batch, heads_q, seq_q, head_dim), dtype, layout=layout)
    k = b.tensor("k", (batch, hkv, skv, head_dim), dtype, layout=layout)
    v = b.tensor("v", (batch, hkv, skv, dv), dtype, layout=layout)
    o = b.tensor("o", (batch, heads_q, seq_q, dv), dtype, layout=layout)
    do = b.tensor("do", (batch, heads_q, seq_q, dv), dtype, layout=layout)
    lse = b.tensor("lse", (batch, heads_q, seq_q), "float32")
    extras = {}
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
                       layout: Layout = "bshd", sink: bool = False, padded: bool = False, **op_attrs) -> Graph:
    """The common one-op forward graph, declared in one call; its outputs are "attn.o" and "attn.lse"."""
    hkv = heads_kv or heads_q
    skv = seq_kv or seq_q
    b = GraphBuilder("sdpa_forward")
    q = b.tensor("q", (batch, heads_q, seq_q, head_dim), dtype, layout=layout)
    k = b.tensor("k", (batch, hkv, skv, head_dim), dtype, layout=layout)
    v = b.tensor("v", (batch, hkv, skv, head_dim_v or head_dim), dtype, layout=layout)
    extras = {}
    if sink:
        extras["sink"] = b.tensor("sink", (heads_q,), "float32")
    if padded:
        extras["seq_len_q"] = b.tensor("seq_len_q", (batch,), "int32")
        extras["seq_len_kv"] = b.tensor("seq_len_kv", (batch,), "int32")
    b.sdpa_forward(q, k, v, name="attn", **extras, **op_attrs)
    return b.build()

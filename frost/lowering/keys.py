"""Compile keys: exactly what changes the generated code, so equal keys can share one compiled kernel.

dtype, head dims, mask kind and alignment, tile config and arch come from the kernel library's own key; frost adds
the feature facts (GQA, packed sequences, the optional inputs of frost.spec, deterministic, 64-bit offsets) and the
tensors' signatures. A signature records what a compiled kernel may depend on and nothing that changes between
steps: dtype, rank, stride order, which dims are dense, 16-byte alignment of the strides, and the head count and head
dim (the key takes its kernel_tag: unit head-dim stride, 16-byte strides; the executor checks a call's tensors
against it). Batch and sequence extents (and stride values) never enter a signature or a key, so a training loop
whose B or S changes reuses compiled kernels."""

from __future__ import annotations

from dataclasses import dataclass

from frost.analyzer.facts import Facts
from frost.ir.tensors import DTYPE_BYTES, TensorSpec
from frost.limits import strides_aligned
from frost.spec import INPUT_FEATURES


@dataclass(frozen=True)
class TensorSignature:
    dtype: str
    rank: int
    stride_order: tuple[int, ...]   # dims of extent > 1, outermost (largest stride) first; size-1 dims say nothing
    dense: tuple[bool, ...]         # per dim: no gap between it and the next-inner dim (always True at extent 1)
    inner_unit: bool                # the last dim (head dim) has stride 1
    strides_aligned16: bool         # every stride of a dim of extent > 1, except a unit one, is a multiple of 16 bytes
    heads: int | None               # H of (B, H, S, D) / (B, H, S) or of a ragged (H, T, D) / (H, T); None otherwise
    head_dim: int | None            # D of a rank-4 tensor or a ragged rank-3 one

    @property
    def kernel_tag(self) -> str:
        """The part of the signature a shape-generic kernel is specialised on (strides are runtime values)."""
        return f"{self.dtype}{'.u' if self.inner_unit else '.s'}{'.a16' if self.strides_aligned16 else ''}"


def _order(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    dims = [d for d, e in enumerate(shape) if e > 1]
    return tuple(sorted(dims, key=lambda d: (-strides[d], d)))


def _dense(shape: tuple[int, ...], strides: tuple[int, ...], order: tuple[int, ...]) -> tuple[bool, ...]:
    dense = [True] * len(shape)
    inner_span = 1  # stride a dim must have to sit right outside the dims inside it
    for d in reversed(order):
        dense[d] = strides[d] == inner_span
        inner_span = strides[d] * shape[d]
    return tuple(dense)


def _heads(shape: tuple[int, ...], ragged: bool) -> int | None:
    if ragged:
        return shape[0] if len(shape) in (2, 3) else None
    return shape[1] if len(shape) in (3, 4) else None


def _head_dim(shape: tuple[int, ...], ragged: bool) -> int | None:
    return shape[-1] if len(shape) == (3 if ragged else 4) else None


def make_signature(dtype: str, shape: tuple[int, ...], strides: tuple[int, ...], *,
                   ragged: bool = False) -> TensorSignature:
    """Signature of a tensor given as plain values (a graph spec or a runtime tensor's metadata). A ragged tensor's
    logical shape has no B: (H, T, D) or (H, T); its token count T is a sequence extent and never recorded."""
    shape, strides = tuple(shape), tuple(strides)
    itemsize = DTYPE_BYTES.get(dtype, 1)
    order = _order(shape, strides)
    aligned = strides_aligned(shape, strides, itemsize)
    return TensorSignature(
        dtype=dtype, rank=len(shape), stride_order=order, dense=_dense(shape, strides, order),
        inner_unit=not shape or shape[-1] == 1 or strides[-1] == 1, strides_aligned16=aligned,
        heads=_heads(shape, ragged), head_dim=_head_dim(shape, ragged),
    )


def spec_signature(spec: TensorSpec) -> TensorSignature:
    return make_signature(spec.dtype, spec.shape, spec.effective_strides, ragged=spec.ragged is not None)


def tensor_signature(t) -> TensorSignature:
    """Signature of a torch tensor (duck-typed: torch is not imported here)."""
    return make_signature(str(t.dtype).removeprefix("torch."), tuple(t.shape), tuple(t.stride()))


def feature_tag(facts: Facts) -> str:
    flags = (("gqa", facts.gqa_group > 1), ("varlen", facts.varlen),
             *((f.tag, getattr(facts, f.facts)) for f in INPUT_FEATURES),
             ("det", facts.deterministic), ("i64", facts.needs_int64_offsets))
    return "+".join(name for name, on in flags if on) or "plain"


def signature_tag(signatures: list[TensorSignature]) -> str:
    return ",".join(sorted({s.kernel_tag for s in signatures}))


def compile_key(engine: str, kernel_key: str, facts: Facts, signatures: list[TensorSignature]) -> str:
    return f"{engine}|{kernel_key}|{feature_tag(facts)}|{signature_tag(signatures)}"


def runtime_features_key(engine: str, kernel_key: str, signatures: list[TensorSignature]) -> str:
    """The key of a kernel whose features (GQA, optional inputs, mask, 64-bit offsets) are all runtime values, like
    the forward's: the kernel library's key and the tensors' signatures alone."""
    return f"{engine}|{kernel_key}|{signature_tag(signatures)}"


def op_signatures(graph, op) -> list[TensorSignature]:
    """Signatures of the op's io tensors with a head dim (the ones a kernel addresses with strides): rank 4, or
    rank 3 when ragged (H, T, D)."""
    ts = graph.tensor_map()
    return [spec_signature(ts[n]) for n in op.input_names() + op.output_names()
            if ts[n].rank == 4 or (ts[n].ragged is not None and ts[n].rank == 3)]

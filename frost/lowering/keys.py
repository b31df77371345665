"""Compile keys: exactly what changes the generated code, so equal keys can share one compiled kernel.

dtype, head dims, mask kind and alignment, tile config and arch come from the kernel library's own key; frost adds
the feature facts (GQA, packed sequences, the optional inputs of frost.spec, deterministic, 64-bit offsets) and the tensors' kernel-relevant signature
(unit head-dim stride, 16-byte strides). Batch and sequence extents never enter a key."""

from __future__ import annotations

from frost.analyzer.facts import Facts
from frost.lowering.signature import TensorSignature
from frost.spec import INPUT_FEATURES


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
    from frost.lowering.signature import spec_signature

    ts = graph.tensor_map()
    return [spec_signature(ts[n]) for n in op.input_names() + op.output_names()
            if ts[n].rank == 4 or (ts[n].ragged is not None and ts[n].rank == 3)]

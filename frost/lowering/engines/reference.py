"""The reference engine adapter: runs frost.reference (torch math) for one op, forward or backward, dense or packed
(ragged tensors over cu_seqlens, through frost.reference.varlen). Any device, every feature; it allocates its own
temporaries and may synchronise (it validates sequence lengths and reads packed offsets), so it is not capturable."""

from __future__ import annotations

from frost import spec
from frost.analyzer.facts import Facts
from frost.lowering.keys import feature_tag
from frost.lowering.plan import KernelLaunch, Lowering


def reference_key(facts: Facts) -> str:
    kind = "|forward" if facts.op == "sdpa_forward" else ""
    kind += "|varlen" if facts.varlen else ""
    return (f"reference{kind}|{facts.dtype}|d{facts.head_dim_qk}x{facts.head_dim_v}|{facts.mask.kind}"
            f"|{facts.mask.alignment}|g{facts.gqa_group}|{feature_tag(facts)}")


def _options(op, facts: Facts) -> dict:
    return dict(scale=facts.attn_scale, **facts.mask.keywords())


def _optional_args(kind: spec.Kind, ins) -> dict[str, str]:
    """Keyword -> graph tensor of the optional inputs frost.spec declares for an op of ``kind`` that this op has;
    the reference takes them by the caller's names (a packed op's seq_len_* are its seqused_*)."""
    packed = ins.cu_seqlens_q is not None
    return {spec.caller_name(role, packed): name for role, name in spec.optional_ports(kind, ins, None).items()}


def _offsets(ins) -> tuple[str, ...]:
    """A packed op's prefix sums (the varlen reference's positional cu_q, cu_kv); none for a dense op."""
    return () if ins.cu_seqlens_q is None else (ins.cu_seqlens_q, ins.cu_seqlens_kv)


def _packed_check(ins, facts: Facts):
    """tensors -> None: a packed op's prefix sums and seqused checked as every engine checks them
    (length_checks.check_lengths, when on); nothing for a dense op (the reference validates its lengths itself)."""
    from frost.lowering.engines.length_checks import call_lengths

    lengths = call_lengths(ins, facts) if facts.varlen else None

    def check(tensors: dict) -> None:
        if lengths is not None:
            lengths(tensors)

    return check


class ReferenceEngine:
    name = "reference"

    def lower(self, graph, op, facts: Facts, target: str) -> Lowering:
        if op.op == "sdpa_forward":
            return _lower_forward(op, facts)
        ins, outs = op.inputs, op.outputs
        grads = tuple(getattr(outs, grad.role) for grad in spec.outputs("backward"))
        options = _options(op, facts)
        optional = _optional_args("backward", ins)
        operands = (ins.q, ins.k, ins.v, ins.o, ins.do, ins.lse, *_offsets(ins))
        ragged = op.ragged
        check = _packed_check(ins, facts)

        def run(tensors: dict, workspace: dict, stream) -> None:
            from frost.reference import attention_backward, attention_backward_varlen

            check(tensors)
            backward = attention_backward_varlen if ragged else attention_backward
            extra = {key: tensors[name] for key, name in optional.items()}
            results = backward(*(tensors[n] for n in operands), **options, **extra)
            for name, value in zip(grads, results):
                if name is not None:
                    tensors[name].copy_(value)

        launch = KernelLaunch(f"{op.name}/reference", reference_key(facts), None)
        return Lowering(kernels=(launch,), workspace=(), run=run)


def _lower_forward(op, facts: Facts) -> Lowering:
    ins, outs = op.inputs, op.outputs
    options = _options(op, facts)
    optional = _optional_args("forward", ins)
    operands = (ins.q, ins.k, ins.v, *_offsets(ins))
    ragged = op.ragged
    check = _packed_check(ins, facts)

    def run(tensors: dict, workspace: dict, stream) -> None:
        from frost.reference import attention_forward, attention_forward_varlen

        check(tensors)
        forward = attention_forward_varlen if ragged else attention_forward
        extra = {key: tensors[name] for key, name in optional.items()}
        o, lse = forward(*(tensors[n] for n in operands), **options, **extra)
        tensors[outs.o].copy_(o)
        tensors[outs.lse].copy_(lse)

    return Lowering(kernels=(KernelLaunch(f"{op.name}/reference", reference_key(facts), None),), workspace=(),
                    run=run)

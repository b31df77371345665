"""frost through its public APIs (BSHD tensors): the backward is frost.sdpa_backward, the forward frost.sdpa_forward,
a step frost.attention's forward and autograd backward; a deterministic case passes deterministic=True to both.
The detail column names the engine frost's plan chose for the case's backward, so a run where the CuTe engine
declines (and the reference engine runs) is visible as such instead of looking like a slow kernel."""

from __future__ import annotations

from frost import spec
from frost.bench.backends.base import Backend, Prepared, autograd_step
from frost.bench.cases import Case

_TORCH_TO_IR = {"torch.bfloat16": "bfloat16", "torch.float16": "float16"}
DIFFERENTIABLE = frozenset(t.grad_of for t in spec.TENSORS if t.grad_of)   # roles frost gives a gradient for


class FrostBackend(Backend):
    name = "frost"
    same_class = True
    holds_itself = True   # kernels/arch.py: launch_smem_bytes
    takes = frozenset(t.role for t in spec.TENSORS if t.optional)

    def prepare(self, c: Case, sets: list, scale: float, which: str = "backward") -> Prepared:
        import frost

        mask = dict(softmax_scale=scale, causal=c.causal, window_size=(c.band[0], None))
        detail = plan_engine(c, str(sets[0].q.dtype), scale, sets[0].q.device)
        if which == "forward":
            fwd = [by_caller(read_by("forward", s.optional)) for s in sets]
            return Prepared(lambda i: frost.sdpa_forward(sets[i].q, sets[i].k, sets[i].v, **fwd[i], **mask),
                            detail=detail)
        det = c.deterministic
        if which == "step":
            return Prepared(training_step(sets[0], dict(mask, deterministic=det)), detail=detail)
        bwd = [by_caller(read_by("backward", s.optional)) for s in sets]

        def run(i: int):
            s = sets[i]
            return frost.sdpa_backward(s.q, s.k, s.v, s.out, s.dout, s.lse, **bwd[i], deterministic=det, **mask)

        return Prepared(run, detail=detail)


def read_by(kind: spec.Kind, optional: dict) -> dict:
    """The optional inputs (by role) that an op of ``kind`` reads: a call passes on only what it takes."""
    roles = spec.role_names(spec.inputs(kind, packed=False), optional=True)
    return {role: t for role, t in optional.items() if role in roles}


def by_caller(tensors: dict) -> dict:
    """Role-keyed tensors as keyword arguments of frost's dense calls."""
    return {spec.caller_name(role): t for role, t in tensors.items()}


def training_step(s, options: dict):
    """run() of frost.attention's forward and the gradients of q, k, v and of each optional input that has one
    (the others pass as constants)."""
    import frost

    given = read_by("forward", s.optional)
    learned = {role: t for role, t in given.items() if role in DIFFERENTIABLE}
    fixed = by_caller({role: t for role, t in given.items() if role not in learned})
    names = tuple(by_caller(learned))
    leaves = tuple(t.detach().requires_grad_() for t in (s.q, s.k, s.v, *learned.values()))
    forward = lambda q, k, v, *rest: frost.attention(q, k, v, **dict(zip(names, rest)), **fixed,  # noqa: E731
                                                      **options)
    return autograd_step(forward, leaves, s.dout)


def plan_engine(c: Case, torch_dtype: str, scale: float, device) -> str:
    """The engine frost's plan picks for this case on this device (what the functional API will run). The graph
    builder turns an optional input on by a flag of its role's name."""
    import frost
    from frost.api.plans import target_of

    left, _ = c.band
    try:
        graph = frost.sdpa_backward_graph(
            c.batch, c.heads_q, c.seq_q, c.head_dim, heads_kv=c.heads_kv, seq_kv=c.seq_kv, head_dim_v=c.head_dim_v,
            dtype=_TORCH_TO_IR.get(torch_dtype, torch_dtype), layout="bshd", attn_scale=scale, causal=c.causal,
            band_left=left, deterministic=c.deterministic, **dict.fromkeys(c.optional_inputs, True))
        return frost.compile(graph, target=target_of(device)).engine
    except Exception as exc:  # noqa: BLE001 -- a label, never a reason to stop the run
        return f"? ({type(exc).__name__})"

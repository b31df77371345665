"""frost through its public APIs (BSHD tensors): the backward is frost.sdpa_backward, the forward frost.sdpa_forward,
a step frost.attention's forward and autograd backward; a deterministic case passes deterministic=True to both.
The detail column names the engine frost's plan chose for the case's backward, so a run where the CuTe engine
declines (and the reference engine runs) is visible as such instead of looking like a slow kernel."""

from __future__ import annotations

from frost.bench.backends.base import Backend, Prepared, autograd_step
from frost.bench.cases import Case

_TORCH_TO_IR = {"torch.bfloat16": "bfloat16", "torch.float16": "float16"}


class FrostBackend(Backend):
    name = "frost"
    same_class = True
    holds_itself = True   # kernels/arch.py: launch_smem_bytes

    def prepare(self, c: Case, sets: list, scale: float, which: str = "backward") -> Prepared:
        import frost

        mask = dict(softmax_scale=scale, causal=c.causal, window_size=(c.band[0], None))
        detail = plan_engine(c, str(sets[0].q.dtype), scale, sets[0].q.device)
        if which == "forward":
            return Prepared(lambda i: frost.sdpa_forward(sets[i].q, sets[i].k, sets[i].v, sink=sets[i].sink, **mask),
                            detail=detail)
        det = c.deterministic
        if which == "step":
            s = sets[0]
            leaves = tuple(t.detach().requires_grad_() for t in (s.q, s.k, s.v, s.sink) if t is not None)
            forward = lambda q, k, v, sink=None: frost.attention(q, k, v, sink=sink, deterministic=det,  # noqa: E731
                                                                 **mask)
            return Prepared(autograd_step(forward, leaves, s.dout), detail=detail)

        def run(i: int):
            s = sets[i]
            return frost.sdpa_backward(s.q, s.k, s.v, s.out, s.dout, s.lse, sink=s.sink, deterministic=det, **mask)

        return Prepared(run, detail=detail)


def plan_engine(c: Case, torch_dtype: str, scale: float, device) -> str:
    """The engine frost's plan picks for this case on this device (what the functional API will run)."""
    import frost
    from frost.api.target import target_of

    left, _ = c.band
    try:
        graph = frost.sdpa_backward_graph(
            c.batch, c.heads_q, c.seq_q, c.head_dim, heads_kv=c.heads_kv, seq_kv=c.seq_kv, head_dim_v=c.head_dim_v,
            dtype=_TORCH_TO_IR.get(torch_dtype, torch_dtype), layout="bshd", sink=c.sink, attn_scale=scale,
            causal=c.causal, band_left=left, deterministic=c.deterministic)
        return frost.compile(graph, target=target_of(device)).engine
    except Exception as exc:  # noqa: BLE001 -- a label, never a reason to stop the run
        return f"? ({type(exc).__name__})"

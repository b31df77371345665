"""torch SDPA with one backend forced (FLASH = FA2, CUDNN, EFFICIENT = CUTLASS mem-efficient).

Backward: the forward runs once per input set with requires_grad; the timed part is only
torch.autograd.grad(out, (q, k, v), dout, retain_graph=True). Forward: the forward without autograd. Step: both.
Inputs are the shared BSHD tensors seen as BHSD views (no copies), GQA through enable_gqa=True. When torch refuses
a forced backend it only says "No available kernel"; its warnings say why, so they are kept as the reason.

A deterministic case runs under torch.use_deterministic_algorithms(True), which switches torch's flash backward to
FA2's deterministic dQ; the cuDNN backward ignores that switch (it only warns) and the mem-efficient one's
handling of it is not checked here, so those two decline deterministic cases."""

from __future__ import annotations

import warnings
from contextlib import contextmanager

from frost.bench.backends.base import Backend, Prepared, autograd_step, first_rule
from frost.bench.cases import Case

RULES = (
    (lambda c: c.window is not None, "no sliding window in torch SDPA (only a dense attn_mask)"),
    (lambda c: c.head_dim != c.head_dim_v, "torch SDPA needs Dqk == Dv"),
    (lambda c: c.causal and c.seq_q != c.seq_kv, "torch SDPA causal is top-left only for Sq != Skv"),
)


class TorchSdpaBackend(Backend):
    def __init__(self, kind: str, same_class: bool):
        self.kind = kind                                   # SDPBackend member name
        self.name = "torch-" + {"FLASH_ATTENTION": "flash", "CUDNN_ATTENTION": "cudnn",
                                "EFFICIENT_ATTENTION": "efficient"}[kind]
        self.same_class = same_class

    def declines(self, c: Case, which: str = "backward") -> str | None:
        reason = self.untaken(c) or first_rule(c, RULES)
        if reason is None and c.deterministic and which != "forward" and self.kind != "FLASH_ATTENTION":
            reason = f"no deterministic backward timed for {self.name} (only torch-flash's)"
        return reason

    def prepare(self, c: Case, sets: list, scale: float, which: str = "backward") -> Prepared:
        import torch

        if which == "forward":
            def forward(i: int):
                with torch.no_grad():
                    return self._sdpa(c, sets[i].q, sets[i].k, sets[i].v, scale)
            return Prepared(forward)
        if which == "step":
            _, leaves, dout = self._forward(c, sets[0], scale)
            step = autograd_step(lambda q, k, v: self._sdpa(c, q, k, v, scale), leaves, dout)
            return Prepared(lambda i: _deterministic_if(c.deterministic, step, i))
        graphs = [self._forward(c, s, scale) for s in sets]

        def run(i: int):
            out, leaves, dout = graphs[i]
            return torch.autograd.grad(out, leaves, dout, retain_graph=True)

        return Prepared(lambda i: _deterministic_if(c.deterministic, run, i))

    def _forward(self, c: Case, s, scale: float):
        """(out BHSD, the BSHD leaves requiring grad, dout BHSD) of one input set."""
        leaves = tuple(t.detach().requires_grad_() for t in (s.q, s.k, s.v))     # same storage as the shared set
        return self._sdpa(c, *leaves, scale), leaves, s.dout.transpose(1, 2)

    def _sdpa(self, c: Case, q, k, v, scale: float):
        """torch SDPA on BSHD tensors (as BHSD views) with this backend forced; its refusal names the reason."""
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        kwargs = {"enable_gqa": True} if c.gqa else {}
        with warnings.catch_warnings(record=True) as caught, sdpa_kernel(getattr(SDPBackend, self.kind)):
            warnings.simplefilter("always")
            try:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=c.causal, scale=scale, **kwargs)
            except RuntimeError as exc:
                why = "; ".join(dict.fromkeys(str(w.message).split(" (Triggered internally")[0].strip()
                                              for w in caught))
                raise RuntimeError(f"{str(exc).splitlines()[0]} ({why})" if why else str(exc)) from None
        return out


def _deterministic_if(on: bool, run, i: int):
    """run(i), under torch.use_deterministic_algorithms(True) when ``on`` (the setting is restored after)."""
    if not on:
        return run(i)
    with _deterministic_algorithms():
        return run(i)


@contextmanager
def _deterministic_algorithms():
    """torch.use_deterministic_algorithms(True) inside, the caller's setting (and its warn_only) after."""
    import torch

    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])

"""FlashAttention-4's CuTe kernels (`flash_attn.cute`, flash-attn-4). The backward times only its backward function;
the forward and the step time `flash_attn_func` (without and with autograd).

The SM120 kernels are selected with FLASH_ATTENTION_ARCH=sm_120 (frost's same-class peer; on an H200
they compile for the device's sm_90a), and FA4 needs FLASH_ATTENTION_NUM_SMS on a cross-arch selection. Both are
set here unless the caller set them, before FA4's first call (it caches the arch). The function timed is
`flash_attn.cute.interface._flash_attn_bwd` (what FlashAttnFunc.backward calls): preprocess + main + postprocess,
on the shared BSHD tensors and the shared O / LSE."""

from __future__ import annotations

import os

from frost.bench.backends.base import Backend, Prepared, autograd_step, first_rule
from frost.bench.cases import Case

DEFAULT_ARCH = "sm_120"

RULES = (
    (lambda c: c.head_dim % 8 or c.head_dim_v % 8, "FA4 needs head dims that are multiples of 8"),
    (lambda c: max(c.head_dim, c.head_dim_v) > 256, "FA4 backward head dim <= 256"),
)
DETERMINISTIC_SM120 = "FA4's SM120 backward has no deterministic mode (it asserts)"


def selected_arch() -> str:
    return os.environ.get("FLASH_ATTENTION_ARCH", DEFAULT_ARCH)


class Fa4Backend(Backend):
    name = "fa4"
    same_class = True

    def declines(self, c: Case, which: str = "backward") -> str | None:
        sm120 = selected_arch().removeprefix("sm_").startswith("12")
        reason = self.untaken(c) or first_rule(c, RULES)
        if reason is None and sm120 and c.deterministic and which != "forward":
            reason = DETERMINISTIC_SM120
        return reason

    def prepare(self, c: Case, sets: list, scale: float, which: str = "backward") -> Prepared:
        left, _ = c.band
        det = {"deterministic": True} if c.deterministic else {}   # the keyword only where a case asks for it
        if which != "backward":
            import torch

            func = load_fa4_function(sets[0].q.device)
            forward = lambda q, k, v: func(q, k, v, softmax_scale=scale, causal=c.causal,  # noqa: E731
                                           window_size=(left, None), **det)
            if which == "forward":
                def run_forward(i: int):
                    with torch.no_grad():
                        return forward(sets[i].q, sets[i].k, sets[i].v)
                return Prepared(run_forward, detail=f"{selected_arch()} kernels")
            leaves = tuple(t.detach().requires_grad_() for t in (sets[0].q, sets[0].k, sets[0].v))
            step = autograd_step(lambda *qkv: _first(forward(*qkv)), leaves, sets[0].dout)
            return Prepared(step, detail=f"{selected_arch()} kernels")
        bwd = load_fa4_backward(sets[0].q.device)

        def run(i: int):
            s = sets[i]
            return bwd(s.q, s.k, s.v, s.out, s.dout, s.lse, softmax_scale=scale, causal=c.causal,
                       window_size_left=left, window_size_right=None, **det)

        return Prepared(run, detail=f"{selected_arch()} kernels")


def _set_environment(device) -> None:
    """FA4's arch / SM-count environment, before its first call (setdefault: the caller wins)."""
    import torch

    os.environ.setdefault("FLASH_ATTENTION_ARCH", DEFAULT_ARCH)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    os.environ.setdefault("FLASH_ATTENTION_NUM_SMS", str(sms))


def load_fa4_backward(device):
    """FA4's backward function."""
    _set_environment(device)
    from flash_attn.cute.interface import _flash_attn_bwd

    return _flash_attn_bwd


def load_fa4_function(device):
    """FA4's autograd function flash_attn_func (forward, and backward through autograd)."""
    _set_environment(device)
    from flash_attn.cute import flash_attn_func

    return flash_attn_func


def _first(out):
    """flash_attn_func returns out or (out, lse), by version."""
    return out[0] if isinstance(out, tuple) else out

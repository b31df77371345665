"""FlashAttention-4's CuTe backward (`flash_attn.cute`, flash-attn-4), timing only its backward function.

The SM120 kernels are selected with FLASH_ATTENTION_ARCH=sm_120 (the same-class peer issue 7 names; on an H200
they compile for the device's sm_90a), and FA4 needs FLASH_ATTENTION_NUM_SMS on a cross-arch selection. Both are
set here unless the caller set them, before FA4's first call (it caches the arch). The function timed is
`flash_attn.cute.interface._flash_attn_bwd` (what FlashAttnFunc.backward calls): preprocess + main + postprocess,
on the shared BSHD tensors and the shared O / LSE."""

from __future__ import annotations

import os

from frost.bench.backends.base import Backend, Prepared, first_rule
from frost.bench.cases import Case

DEFAULT_ARCH = "sm_120"

RULES_SM120 = (
    (lambda c: c.sink, "FA4's SM120 backward has no learnable sink (asserts)"),
    (lambda c: c.head_dim % 8 or c.head_dim_v % 8, "FA4 needs head dims that are multiples of 8"),
    (lambda c: max(c.head_dim, c.head_dim_v) > 256, "FA4 backward head dim <= 256"),
)


def selected_arch() -> str:
    return os.environ.get("FLASH_ATTENTION_ARCH", DEFAULT_ARCH)


class Fa4Backend(Backend):
    name = "fa4"
    same_class = True

    def declines(self, c: Case) -> str | None:
        rules = RULES_SM120 if selected_arch().removeprefix("sm_").startswith("12") else RULES_SM120[1:]
        return first_rule(c, rules)

    def prepare(self, c: Case, sets: list, scale: float) -> Prepared:
        bwd = load_fa4_backward(sets[0].q.device)
        left, _ = c.band

        def run(i: int):
            s = sets[i]
            return bwd(s.q, s.k, s.v, s.out, s.dout, s.lse, softmax_scale=scale, causal=c.causal,
                       window_size_left=left, window_size_right=None)

        return Prepared(run, detail=f"{selected_arch()} kernels")


def load_fa4_backward(device):
    """FA4's backward function, with its arch / SM-count environment set first (setdefault: the caller wins)."""
    import torch

    os.environ.setdefault("FLASH_ATTENTION_ARCH", DEFAULT_ARCH)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    os.environ.setdefault("FLASH_ATTENTION_NUM_SMS", str(sms))
    from flash_attn.cute.interface import _flash_attn_bwd

    return _flash_attn_bwd

"""The forward kernel tests' cases and their check: O and LSE under the FA rule (helpers/fa_rule.py, noise_scale
each output's own largest value) against the fp64 oracle (helpers/oracle.py), with lowp_reference frost.reference
in the io dtype (fp32 compute, P rounded like a kernel). LSE entries the oracle gives as -inf (padded rows, rows
that see no key without a sink) must be exactly -inf; padded rows of O exact zeros. Outputs are poisoned with NaN
before each call, so an element the kernel does not write fails. The engine under test is a parameter, so the check
itself runs on the CPU against the reference engine (tests/kernels/test_kernel_checks.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers import oracle
from helpers.fa_rule import fa_rule, padded_rows_zero
from kernel_oracle import DenseCase, dense_inputs


@dataclass
class FwdCase(DenseCase):
    """One forward problem."""

    tile: tuple | None = None  # a tile other than the table's (bench_forward.VARIANTS), else None

    def describe(self) -> str:
        return super().describe() + ("" if self.tile is None else f" tile={self.tile}")


def inputs(c: FwdCase, device="cuda"):
    """q, k, v and the keyword arguments of the kernel call (and of frost.reference): scale, lengths, sink, mask."""
    _, q, k, v, kw = dense_inputs(c, device)
    return q, k, v, kw


def compiled(c: FwdCase):
    from frost.kernels.arch import detect_arch
    from frost.kernels.forward import choose_forward_config, compile_forward
    from frost.kernels.forward.api import CompiledForward
    from frost.kernels.forward.compile import compile_forward_kernel
    from frost.kernels.forward.tiles import ForwardTile

    cfg = choose_forward_config(c.dtype, c.dqk, c.dv, detect_arch())
    if c.tile is None:
        return compile_forward(cfg)
    tile = ForwardTile(cfg.head_dim_pad, cfg.head_dim_v_pad, *c.tile)
    return CompiledForward(cfg, compile_forward_kernel(cfg.key, tile=tile))


def outputs(q, dv: int, layout: str):
    """NaN-poisoned O (same memory order as q) and LSE, on q's device."""
    b, h, s, _ = q.shape
    if layout == "bshd":
        o = torch.empty((b, s, h, dv), dtype=q.dtype, device=q.device).transpose(1, 2)
    else:
        o = torch.empty((b, h, s, dv), dtype=q.dtype, device=q.device)
    o.fill_(float("nan"))
    lse = torch.full((b, h, s), float("nan"), dtype=torch.float32, device=q.device)
    return o, lse


def kernel_forward(c: FwdCase, q, k, v, o, lse, **kw) -> None:
    """The engine under test on the GPU: the compiled forward kernel, writing o and lse."""
    compiled(c)(q, k, v, o, lse, **kw)
    torch.cuda.synchronize()


def check_case(c: FwdCase, run=kernel_forward, device="cuda") -> list[str]:
    """Run `run(c, q, k, v, o, lse, **kw)` (it fills the poisoned o and lse) on case c and compare with the oracle
    under the FA rule; returns a report (asserts)."""
    from frost import reference

    q, k, v, kw = inputs(c, device)
    o64, lse64 = oracle.attention_forward(q, k, v, **kw)
    o_lp, lse_lp = reference.attention_forward(q, k, v, **kw)
    o, lse = outputs(q, c.dv, c.layout)
    run(c, q, k, v, o, lse, **kw)
    failed, report = [], []
    fa_rule("o", o, o64, o_lp, failed, report)
    fa_rule("lse", lse, lse64, lse_lp, failed, report)
    padded_rows_zero("o", o, c.seq_len_q, failed)
    assert not failed, f"{failed} ({c.describe()}) {report}"
    return report

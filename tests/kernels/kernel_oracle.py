"""The dense kernel tests' problems (DenseCase, shared with forward_checks.py) and the backward kernels' cases and
check: inputs, the kernel call and the FA rule (helpers/fa_rule.py) against the fp64 oracle (helpers/oracle.py).

check_case builds a case's inputs (O and LSE from the oracle's forward, rounded to the io dtype), runs the backward
under test and compares dQ, dK, dV and dSink under the FA rule, with noise_scale the largest |oracle| gradient of the
problem (Skv = 1: P = 1, O = V, so dS = dP - delta cancels to ~1e-7 in fp32); lowp_reference is frost.reference in
the io dtype. Padded rows must be exact zeros. The kernels' outputs (and workspace) are poisoned with NaN before
each call: an element they do not write fails. The engine under test is a parameter, so the check itself runs on
the CPU against the reference engine (tests/kernels/test_kernel_checks.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from helpers import oracle
from helpers.fa_rule import fa_rule_each, padded_rows_zero
from helpers.tensors import int32, randn_bhsd, sink_tensor

GRADS = ("dq", "dk", "dv", "dsink")


def torch_dtype(name):
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def poisoned_like(t):
    out = torch.empty_like(t)
    out.fill_(float("nan"))
    return out


def make_workspace(cfg, b, hq, sq, skv, hkv=None):
    from frost.kernels import workspace_regions

    ws = {}
    for name, n in workspace_regions(cfg, b, hq, sq, skv, heads_kv=hkv):
        ws[name] = torch.empty(max(n, 16), dtype=torch.uint8, device="cuda")
        ws[name].fill_(0xFF)  # NaN pattern in fp32 (and -1 in int32): the kernels must initialise what they read
    return ws


def run_backward(bwd, cfg, q, k, v, o, do, lse, scale, **features):
    """One kernel call on fresh NaN-poisoned outputs; returns (dq, dk, dv, dsink or None)."""
    ws = make_workspace(cfg, q.shape[0], q.shape[1], q.shape[2], k.shape[2], k.shape[1])
    dq, dk, dv = poisoned_like(q), poisoned_like(k), poisoned_like(v)
    dsink = None
    if features.get("sink") is not None:
        dsink = torch.full_like(features["sink"], float("nan"))
    bwd(q, k, v, o, do, lse, dq, dk, dv, scale=scale, workspace=ws, dsink=dsink, **features)
    return dq, dk, dv, dsink


@dataclass
class DenseCase:
    """The fields of a dense kernel problem (forward or backward). Lengths are per-batch lists (None = full); sink
    is a list of Hq floats or one float for every head; layout "bshd" gives q, k, v, dO as views of BSHD memory."""

    dtype: str = "bfloat16"
    dqk: int = 64
    dv: int = 64
    b: int = 1
    hq: int = 2
    hkv: int = 2
    sq: int = 77
    skv: int = 77
    causal: bool = False
    alignment: str = "top_left"
    band_left: int | None = None
    band_right: int | None = None
    seq_len_q: list | None = None
    seq_len_kv: list | None = None
    sink: object = None
    layout: str = "bshd"
    seed: int = 0

    def describe(self) -> str:
        return (f"{self.dtype} d={self.dqk}/{self.dv} B={self.b} H={self.hq}/{self.hkv} S={self.sq}/{self.skv} "
                f"causal={self.causal} {self.alignment} band=({self.band_left},{self.band_right}) "
                f"lens=({self.seq_len_q},{self.seq_len_kv}) sink={self.sink} {self.layout} seed={self.seed}")


def dense_inputs(c: DenseCase, device="cuda"):
    """(generator, q, k, v, keyword arguments of frost.reference and the oracle: scale, mask, lengths, sink); the
    generator, seeded with c.seed, goes on to draw the case's other tensors."""
    tdt = torch_dtype(c.dtype)
    gen = torch.Generator(device=device).manual_seed(c.seed)
    q, k, v = (randn_bhsd(shape, tdt, layout=c.layout, gen=gen, device=device)
               for shape in ((c.b, c.hq, c.sq, c.dqk), (c.b, c.hkv, c.skv, c.dqk), (c.b, c.hkv, c.skv, c.dv)))
    kw = dict(scale=1.0 / math.sqrt(c.dqk), causal=c.causal, alignment=c.alignment, band_left=c.band_left,
              band_right=c.band_right, seq_len_q=int32(c.seq_len_q, device), seq_len_kv=int32(c.seq_len_kv, device),
              sink=sink_tensor(c.sink, c.hq, device))
    return gen, q, k, v, kw


@dataclass
class Case(DenseCase):
    """One backward problem."""

    dlse: bool = False   # a random gradient on the forward's LSE output (a strided (B, Hq, Sq) view)
    deterministic: bool = False
    tag: str = field(default="")

    def describe(self) -> str:
        return f"{super().describe()} dlse={self.dlse} det={self.deterministic} {self.tag}"


def build_inputs(c: Case, device="cuda"):
    """Kernel inputs plus the mask keyword arguments of frost.reference and the oracle (O and LSE from the fp64
    oracle forward, rounded to the io dtype and fp32)."""
    gen, q, k, v, kw = dense_inputs(c, device)
    do = randn_bhsd((c.b, c.hq, c.sq, c.dv), q.dtype, layout=c.layout, gen=gen, device=device)
    sink = kw.pop("sink")
    o64, lse64 = oracle.attention_forward(q, k, v, sink=sink, **kw)
    o, lse = o64.to(q.dtype), lse64.float()
    dlse = None
    if c.dlse:  # every other row of a wider buffer: the kernels take its strides
        dlse = torch.randn((c.b, c.hq, 2 * c.sq), generator=gen, device=device)[..., ::2]
    return dict(q=q, k=k, v=v, o=o, do=do, lse=lse, sink=sink, dlse=dlse, kw=kw)


def kernel_features(c: Case, inp) -> dict:
    kw = inp["kw"]
    return dict(seq_len_q=kw["seq_len_q"], seq_len_kv=kw["seq_len_kv"], band_left=c.band_left,
                band_right=c.band_right, sink=inp["sink"], dlse=inp["dlse"], deterministic=c.deterministic)


def compiled(c: Case):
    from frost.kernels import choose_config, compile_backward, detect_arch

    # (the mode and band pick the set as the engine's do: deterministic mode at d96/d128 on wide bands takes the
    # dq_gemm set, whose workspace make_workspace then sizes)
    cfg = choose_config(c.dtype, c.dqk, c.dv, c.causal, c.alignment, detect_arch(), band_left=c.band_left,
                        band_right=c.band_right, deterministic=c.deterministic)
    return cfg, compile_backward(cfg)


def kernel_backward(c: Case, inp) -> tuple:
    """The engine under test on the GPU: the compiled backward kernels."""
    cfg, bwd = compiled(c)
    got = run_backward(bwd, cfg, *(inp[n] for n in ("q", "k", "v", "o", "do", "lse")), inp["kw"]["scale"],
                       **kernel_features(c, inp))
    torch.cuda.synchronize()
    return got


def check_case(c: Case, run=kernel_backward, device="cuda") -> list[str]:
    """Run `run(c, inputs)` -> (dq, dk, dv, dsink) on case c and compare with the oracle under the FA rule;
    returns a report (asserts)."""
    from frost import reference

    inp = build_inputs(c, device)
    args = [inp[n] for n in ("q", "k", "v", "o", "do", "lse")]
    side = dict(sink=inp["sink"], dlse=inp["dlse"], **inp["kw"])
    exact = oracle.attention_backward(*args, **side)
    lowp = reference.attention_backward(*args, **side)
    got = run(c, inp)
    grad_scale = max([r.abs().max().item() for r in exact[:3] if r.numel()] + [0.0])
    failed, report = [], []
    fa_rule_each(GRADS, got, exact, lowp, failed, report, noise_scale=grad_scale)
    padded_rows_zero("dq", got[0], c.seq_len_q, failed)
    padded_rows_zero("dk", got[1], c.seq_len_kv, failed)
    padded_rows_zero("dv", got[2], c.seq_len_kv, failed)
    assert not failed, f"{failed} ({c.describe()}) {report}"
    return report

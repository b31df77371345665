"""The gpt-oss-shaped demo: GQA 8:1, a learnable sink, a 128-token sliding window, bottom-right causal, and a padded
batch with a short sequence. Probe it, run it on the best engine this machine has, check it against the fp64
oracle, and report engine (and why), shapes, errors and wall time."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class DemoShape:
    batch: int = 2
    heads_q: int = 16
    heads_kv: int = 2
    seq: int = 512
    head_dim: int = 64
    window: int = 128
    short_q: int = 100          # the last batch entry is padded: this many query rows ...
    short_kv: int = 300         # ... and this many keys (bottom-right alignment puts its diagonal at i + 200)
    dtype: str = "bfloat16"


@dataclass
class DemoResult:
    engine: str
    why: str
    shape: DemoShape
    errors: dict[str, tuple[float, float]] = field(default_factory=dict)   # output -> (max abs, max rel)
    seconds: float = 0.0

    @property
    def bound(self) -> float:
        """Max |error| / max |oracle| accepted: 8 ulps of the io dtype (bf16 2^-8, fp16 2^-11 per ulp)."""
        return 8 * (2.0 ** -8 if self.shape.dtype == "bfloat16" else 2.0 ** -11)

    @property
    def passed(self) -> bool:
        return all(rel <= self.bound for _, rel in self.errors.values())


class _Steps:
    """Numbered progress lines with the time each step took."""

    def __init__(self, total: int, say: Callable[[str], None]) -> None:
        self.total, self.n, self.say = total, 0, say

    def run(self, what: str, fn: Callable):
        self.n += 1
        start = time.perf_counter()
        self.say(f"[{self.n}/{self.total}] {what} ...")
        value = fn()
        self.say(f"      done in {time.perf_counter() - start:.2f} s")
        return value


def build_graph(s: DemoShape):
    from frost.ir import sdpa_backward_graph

    return sdpa_backward_graph(s.batch, s.heads_q, s.seq, s.head_dim, heads_kv=s.heads_kv, dtype=s.dtype,
                               layout="bshd", sink=True, padded=True, causal=True, alignment="bottom_right",
                               band_left=s.window)


def make_inputs(s: DemoShape, device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random q, k, v, dO and sink; O and LSE from the reference forward (so they are consistent with the mask)."""
    from frost.reference import attention_forward

    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, s.dtype)

    def bshd(heads: int) -> torch.Tensor:
        return torch.randn(s.batch, s.seq, heads, s.head_dim, generator=g).to(device=device, dtype=dt).transpose(1, 2)

    q, k, v, do = bshd(s.heads_q), bshd(s.heads_kv), bshd(s.heads_kv), bshd(s.heads_q)
    lens = lambda short: torch.tensor([s.seq] * (s.batch - 1) + [short], dtype=torch.int32, device=device)  # noqa
    t = {"q": q, "k": k, "v": v, "do": do, "sink": torch.randn(s.heads_q, generator=g).to(device),
         "seq_len_q": lens(s.short_q), "seq_len_kv": lens(s.short_kv)}
    o, lse = attention_forward(q, k, v, causal=True, alignment="bottom_right", band_left=s.window, sink=t["sink"],
                               seq_len_q=t["seq_len_q"], seq_len_kv=t["seq_len_kv"])
    out = torch.empty_like(q)  # BSHD memory, like q
    out.copy_(o)
    return t | {"o": out, "lse": lse.float().contiguous()}


def oracle(t: dict[str, torch.Tensor], s: DemoShape) -> dict[str, torch.Tensor]:
    """The fp64 reference backward on the same inputs."""
    from frost.reference import attention_backward

    f64 = {n: x.double() if x.is_floating_point() else x for n, x in t.items()}
    dq, dk, dv, dsink = attention_backward(f64["q"], f64["k"], f64["v"], f64["o"], f64["do"], f64["lse"],
                                           causal=True, alignment="bottom_right", band_left=s.window,
                                           seq_len_q=t["seq_len_q"], seq_len_kv=t["seq_len_kv"], sink=f64["sink"])
    return {"dq": dq, "dk": dk, "dv": dv, "dsink": dsink}


def _errors(got: dict, want: dict) -> dict[str, tuple[float, float]]:
    out = {}
    for name, ref in want.items():
        diff = (got[name].double() - ref).abs().max().item()
        out[name] = (diff, diff / max(ref.abs().max().item(), 1e-30))
    return out


def _why(report, engine: str) -> str:
    op = report.ops[0]
    reasons = [f"{eng} declines: " + "; ".join(f"[{r.code}] {r.field}={r.value!r}" for r in rs)
               for eng, rs in op.declined.items() if eng != engine]
    return f"first engine in preference order that serves it on {report.target}" + \
        ("" if not reasons else " (" + " | ".join(reasons) + ")")


def run_demo(shape: DemoShape = DemoShape(), device: str | None = None, say: Callable[[str], None] = print
             ) -> DemoResult:
    import frost.api.plans as api
    from frost.api.plans import target_of
    from frost.api.support import check_support

    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    steps = _Steps(5, say)
    start = time.perf_counter()
    graph = build_graph(shape)
    target = target_of(dev)
    report = steps.run(f"probe the graph for {target}", lambda: check_support(graph, target))
    plan = steps.run("compile the plan", lambda: api.compile(graph, target=target))
    t = steps.run("make inputs (reference forward for O and LSE)", lambda: make_inputs(shape, dev))
    names = {"dq": "attn.dq", "dk": "attn.dk", "dv": "attn.dv", "dsink": "attn.dsink"}
    outs = plan.new_outputs(dev)
    workspace = plan.new_workspace(dev)
    steps.run(f"run the backward on {plan.engine}", lambda: _run(plan, t, outs, workspace))
    want = steps.run("fp64 oracle", lambda: oracle(t, shape))
    got = {k: outs[v] for k, v in names.items()}
    result = DemoResult(plan.engine, _why(report, plan.engine), shape, _errors(got, want),
                        time.perf_counter() - start)
    say(render(result, plan))
    return result


def _run(plan, t: dict, outs: dict, workspace) -> None:
    plan.execute({n: t[n] for n in ("q", "k", "v", "o", "do", "lse", "sink", "seq_len_q", "seq_len_kv")} | outs,
                 workspace=workspace)
    if workspace.is_cuda:
        torch.cuda.synchronize()


def render(r: DemoResult, plan) -> str:
    s = r.shape
    lines = [f"engine: {r.engine} -- {r.why}",
             f"shapes: B={s.batch} Hq={s.heads_q} Hkv={s.heads_kv} (GQA {s.heads_q // s.heads_kv}:1) S={s.seq} "
             f"D={s.head_dim} {s.dtype}, sink, window {s.window}, causal bottom-right, last sequence "
             f"q={s.short_q} kv={s.short_kv}",
             f"plan: {len(plan.kernels)} kernel(s), workspace {plan.workspace_size} bytes",
             "errors vs fp64 oracle (max abs, max abs / max |ref|):"]
    lines += [f"  {name:6s} {a:.3e}  {rel:.3e}" for name, (a, rel) in r.errors.items()]
    verdict = "PASS" if r.passed else "FAIL"
    lines.append(f"check: {verdict} (every output within {r.bound:.2e} x max|oracle|)")
    lines.append(f"wall time: {r.seconds:.2f} s")
    return "\n".join(lines)

"""The FA rule: an engine's result against the fp64 oracle (helpers.oracle), per output,

    max|got - oracle| <= 2 * max|lowp - oracle| + FLOOR * max|oracle| + NOISE * noise_scale

where lowp is frost.reference in the engine's io dtype (fp32 compute, P and dS rounded like a kernel): an engine may
be at most twice as far from the exact answer as straightforward low-precision math. FLOOR = 1e-3 covers outputs the
low-precision reference gets (near) exactly; it is below one bf16 ulp (2^-8 relative) and near one fp16 ulp (2^-10),
so a real error cannot hide under it. NOISE = 2^-20 (16 fp32 ulps of noise_scale, by default the output's own largest
value; for gradients the problem's largest gradient) covers values that are exactly 0 in exact arithmetic but come
out of any fp32 accumulation as rounding noise. Non-finite oracle entries (an LSE of -inf) must be matched exactly.

Checks append to `failed` and `report` lists, so one case reports every output; run_cases runs many cases and makes
one assertion listing every failure."""

from __future__ import annotations

import torch

from helpers.oracle import as_ints

FLOOR = 1e-3
NOISE = 2.0 ** -20


def fa_rule(name: str, got, ref, lowp, failed: list, report: list, *, floor: float = FLOOR, noise_scale=None,
            atol: float = 0.0) -> None:
    """One output under the rule (all three on any devices; compared in fp64 on the CPU). `atol`: an absolute
    term added to the bound."""
    got, ref, lowp = (t.detach().cpu() for t in (got, ref, lowp))
    finite = torch.isfinite(ref)
    if not torch.equal(torch.isfinite(got), finite) or not torch.equal(got[~finite].double(), ref[~finite].double()):
        failed.append(f"{name}: non-finite entries differ from the oracle's ({int(torch.isnan(got).sum())} NaN)")
        return
    if not bool(finite.any()):
        return
    g, r, lo = got[finite].double(), ref[finite].double(), lowp[finite].double()
    top = r.abs().max().item()
    err, ref_err = (g - r).abs().max().item(), (lo - r).abs().max().item()
    bound = 2 * ref_err + floor * top + NOISE * (top if noise_scale is None else noise_scale) + atol
    report.append(f"{name} err={err:.3e} ref_err={ref_err:.3e} bound={bound:.3e}")
    if not err <= bound:
        failed.append(f"{name}: {err:.3e} > {bound:.3e} (reference error {ref_err:.3e})")


def fa_rule_each(names, got, ref, lowp, failed: list, report: list, **options) -> None:
    """fa_rule over parallel tuples of outputs; where the oracle has None (no sink) the engine must give None."""
    for name, g, r, lo in zip(names, got, ref, lowp):
        if r is None:
            if g is not None:
                failed.append(f"{name}: a value where the oracle has none")
            continue
        fa_rule(name, g, r, lo, failed, report, **options)


def assert_fa_rule(name: str, got, ref, lowp, **options) -> str:
    """fa_rule as an assertion; returns the report line."""
    failed, report = [], []
    fa_rule(name, got, ref, lowp, failed, report, **options)
    assert not failed, failed
    return report[0] if report else f"{name}: no finite entries"


def padded_rows_zero(name: str, t, lens, failed: list) -> None:
    """Rows past each batch's length (axis 2 of a logical (B, H, S, D) tensor) must be exact zeros."""
    if lens is None:
        return
    for bi, n in enumerate(as_ints(lens)):
        tail = t[bi, :, n:]
        if tail.numel() and not bool((tail == 0).all()):
            failed.append(f"{name}: batch {bi} rows >= {n} not exactly zero")


def run_cases(check, cases) -> None:
    """check(case) for every case (it raises AssertionError on failure); one assertion listing all failures."""
    failures = []
    for c in cases:
        try:
            check(c)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)}/{len(cases)} failed:\n" + "\n".join(failures)

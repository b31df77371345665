"""One `frost bench` run: every (case, backend) measured in isolation, so nothing a backend or a case raises
stops the run; each outcome is a row (ok / n/a (reason) / skipped (time budget)). The JSON file is rewritten after
every case, so a run killed by a wall-clock limit still leaves what it measured."""

from __future__ import annotations

import json
import os
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Callable

from frost.bench import inputs, timing
from frost.bench.cases import Case
from frost.bench.flops import pass_flops, tflops
from frost.bench.report import NA, OK, SKIPPED, Report, Result

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "bfloat16": "bfloat16", "float16": "float16"}


@dataclass(frozen=True)
class Options:
    dtype: str = "bfloat16"
    warmup: int = 3
    iters: int = 20
    max_seconds: float = 10.0         # per (case, backend) timing loop
    budget_s: float = 0.0             # whole run; 0 = unlimited
    device: str = "cuda"              # "cpu": a smoke run of the harness (wall clock, reference engine)
    which: str = "backward"           # the pass timed: flops.PASSES
    host_time: bool = True            # also time the host's part of a call (timing.host_us)
    peer_smem: str = "free"           # one of PEER_SMEM


# how the peers' kernels meet the GPU's shared memory: as the GPU has it; their CuTe-DSL launches padded to SM120's
# occupancy as frost's are (bench.sm120_launches: FA4); or every SM held to SM120's 100 KB (bench.sm120_hold)
PEER_SMEM = ("free", "padded", "sm120")


def short(exc: BaseException, limit: int = 160) -> str:
    """A one-line reason for the table: the exception type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def measure(c: Case, backend, sets: list, opts: Options) -> Result:
    """One row; never raises (a peer failing is a result, not a crash)."""
    base = dict(case=c.name, backend=backend.name, same_class=backend.same_class)
    reason = backend.declines(c, opts.which)
    if reason:
        return Result(**base, status=NA, note=reason)
    detail = ""
    try:
        with launches_for(backend, opts):
            prepared = backend.prepare(c, sets, inputs.softmax_scale(c), opts.which)
            detail = prepared.detail
            t = timing.median_ms(prepared.run, len(sets), warmup=opts.warmup, iters=opts.iters,
                                 max_seconds=opts.max_seconds, device=opts.device, hold=hold_for(backend, opts))
            host = host_us(prepared.run, len(sets), opts)
    except Exception as exc:  # noqa: BLE001
        return Result(**base, status=NA, detail=detail, note=short(exc, 300))
    return Result(**base, status=OK, ms=t.ms, tflops=tflops(pass_flops(c, opts.which), t.ms), detail=detail,
                  note=f"{t.calls} calls, {len(sets)} set(s), first call {t.first_s:.2f} s", host_us=host)


def host_us(run: Callable[[int], object], n_sets: int, opts: Options) -> float | None:
    """The host time per call of a row (None when not asked for); on a CPU, two calls: a smoke run's number."""
    if not opts.host_time:
        return None
    sizes = {} if opts.device == "cuda" else {"burst": 1, "bursts": 2}
    return timing.host_us(run, n_sets, device=opts.device, **sizes)


def launches_for(backend, opts: Options) -> AbstractContextManager:
    """What a backend's calls, its first (compiling) one included, run inside: padded CuTe-DSL launches for a peer
    when asked for (bench.sm120_launches), else nothing."""
    from frost.bench.sm120_launches import padded_when

    return padded_when(opts.peer_smem == "padded" and not backend.holds_itself and opts.device == "cuda")


def hold_for(backend, opts: Options):
    """The SmemHold a backend's timed calls run under (None: as the GPU is): peers only, when asked for."""
    if opts.peer_smem != "sm120" or backend.holds_itself or opts.device != "cuda":
        return None
    from frost.bench.sm120_hold import SmemHold

    return lambda: SmemHold(max_seconds=opts.max_seconds * 3 + 30)


def release_memory() -> None:
    """Drop cached blocks between rows and make a failed kernel surface here rather than in the next row."""
    import torch

    if not torch.cuda.is_available():
        return
    try:
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 -- a poisoned context is reported by the rows that follow
        pass
    torch.cuda.empty_cache()


def make_sets(c: Case, opts: Options) -> list:
    import torch

    dtype = getattr(torch, opts.dtype)
    n = 1
    if opts.device == "cuda":
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
        n = inputs.rotation_count(inputs.set_bytes(c, dtype.itemsize), l2)
    return inputs.make_sets(c, dtype, opts.device, n)


def run_case(c: Case, backends: list, opts: Options, deadline: float | None,
             log: Callable[[str], None]) -> list[Result]:
    """Every backend on one case, sharing one list of input sets."""
    if deadline is not None and time.monotonic() > deadline:
        return [Result(c.name, b.name, SKIPPED, same_class=b.same_class, note="time budget") for b in backends]
    try:
        sets = make_sets(c, opts)
    except Exception as exc:  # noqa: BLE001
        return [Result(c.name, b.name, NA, same_class=b.same_class, note=f"inputs: {short(exc)}") for b in backends]
    results = []
    for b in backends:
        if deadline is not None and time.monotonic() > deadline:
            r = Result(c.name, b.name, SKIPPED, same_class=b.same_class, note="time budget")
        else:
            r = measure(c, b, sets, opts)
            release_memory()
        log(_progress(r))
        results.append(r)
    del sets
    release_memory()
    return results


def _progress(r: Result) -> str:
    if r.ok:
        return f"  {r.case:28s} {r.backend:16s} {r.ms:9.3f} ms {r.tflops:7.1f} TFLOP/s  {r.detail}"
    return f"  {r.case:28s} {r.backend:16s} {r.status} ({r.note})"


def run(cases: list[Case], backends: list, opts: Options, report: Report, json_path: str | None,
        log: Callable[[str], None] = print) -> Report:
    """Fill `report` case by case, rewriting `json_path` after each case."""
    deadline = time.monotonic() + opts.budget_s if opts.budget_s > 0 else None
    for c in cases:
        log(f"case {c.name}: {c.header()}")
        report.cases.append({**c.as_dict(), "flops": pass_flops(c, opts.which)})
        report.results.extend(run_case(c, backends, opts, deadline, log))
        if json_path:
            write_json(report, json_path)
    return report


def write_json(report: Report, path: str) -> None:
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(report.to_dict(), fh, indent=1)
    os.replace(tmp, path)

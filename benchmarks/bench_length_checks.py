"""What checking padding lengths costs a training loop: 24 layers of frost.attention forward + backward on a padded
batch (B 4, S 1024, d64, GQA 16/4, causal, per-batch lengths), timed per step with FROST_CHECK_SEQ_LENS=0 (no check),
sync (a device-to-host read before each launch) and the default (deferred: an asynchronous copy checked later), in one
process. The lengths tensor is made afresh each step, as a data loader would. Then the host time of one call per mode
(the loop is host-bound, so its steps vary with the host): frost.sdpa_forward with those lengths, in bursts of 48
calls (a step's calls) with an untimed synchronisation before each.

With --replay the same loop (default length check) runs instead with CUDA-graph replay on and off
(FROST_GRAPH_REPLAY; the plans are rebuilt at each switch, their kernels come from the disk cache), and each step's
host time (until loss.backward() returns) is reported beside its wall time.

    python3 benchmarks/bench_length_checks.py [--steps 40] [--rounds 3] [--replay] [--json out.json]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

LAYERS, B, S, HQ, HKV, D = 24, 4, 1024, 16, 4, 64
MODES = {"off": "0", "sync": "sync", "deferred": "1"}
REPLAY = {"replay-on": "1", "replay-off": "0"}


def step_ms(steps: int, host: list[float] | None = None) -> list[float]:
    """Wall time of each step (host and GPU: the step ends with a synchronize); each step's host time (until
    loss.backward() returns) is appended to ``host`` when given."""
    import torch

    import frost

    g = torch.Generator(device="cuda").manual_seed(0)
    layers = [[torch.randn(B, S, h, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
               for h in (HQ, HKV, HKV)] for _ in range(LAYERS)]
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        lengths = torch.tensor([S, S - 100, S // 2, 17], dtype=torch.int32).to("cuda", non_blocking=True)
        loss = sum(frost.attention(q, k, v, causal=True, seq_len_q=lengths, seq_len_kv=lengths).float().mean()
                   for q, k, v in layers)
        loss.backward()
        if host is not None:
            host.append((time.perf_counter() - start) * 1e3)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def call_us(bursts: int = 40) -> float:
    """Median host time per frost.sdpa_forward call with per-batch lengths (one lengths tensor for every call), in
    bursts of a step's 48 calls (frost.bench.timing.host_us)."""
    import torch

    import frost
    from frost.bench.timing import host_us

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, S, h, D, device="cuda", dtype=torch.bfloat16, generator=g) for h in (HQ, HKV, HKV))
    lengths = torch.tensor([S, S - 100, S // 2, 17], dtype=torch.int32, device="cuda")

    def call(_set: int) -> None:
        frost.sdpa_forward(q, k, v, causal=True, seq_len_q=lengths, seq_len_kv=lengths)

    for _ in range(3 * 2 * LAYERS):   # compile and warm up
        call(0)
    return host_us(call, 1, burst=2 * LAYERS, bursts=bursts)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--replay", action="store_true", help="graph replay on / off instead of the length checks")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    results = replay_ab(args.steps, args.rounds) if args.replay else length_checks(args.steps, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)


def replay_ab(steps: int, rounds: int) -> dict[str, list[float]]:
    """The loop's step and host times with graph replay on and off, interleaved round by round."""
    from frost.lowering import clear_caches

    results: dict[str, list[float]] = {}
    for _round in range(rounds):
        for mode, value in REPLAY.items():
            os.environ["FROST_GRAPH_REPLAY"] = value
            clear_caches()
            host: list[float] = []
            results.setdefault(mode, []).extend(step_ms(steps, host)[3:])
            results.setdefault(f"{mode}-host", []).extend(host[3:])
    for mode in REPLAY:
        wall, host = results[mode], results[f"{mode}-host"]
        print(f"{mode:10s} step median {statistics.median(wall):7.2f} ms (min {min(wall):.2f}, max {max(wall):.2f}); "
              f"host median {statistics.median(host):7.2f} ms (min {min(host):.2f})")
    return results


def length_checks(steps: int, rounds: int) -> dict[str, list[float]]:
    """The loop's step times and one call's host time per length-check mode, interleaved round by round."""
    results: dict[str, list[float]] = {}
    for _round in range(rounds):   # modes interleaved round by round: drift shows as a spread, not a mode's cost
        for mode, value in MODES.items():
            os.environ["FROST_CHECK_SEQ_LENS"] = value
            times = step_ms(steps)[3:]   # the first steps compile and warm up
            results.setdefault(mode, []).extend(times)
    for mode, times in results.items():
        print(f"{mode:9s} median {statistics.median(times):7.2f} ms/step  min {min(times):7.2f}  max {max(times):7.2f}")
    off = statistics.median(results["off"])
    for mode in ("sync", "deferred"):
        print(f"{mode} / off: {statistics.median(results[mode]) / off:.3f}")
    for _round in range(rounds):
        for mode, value in MODES.items():
            os.environ["FROST_CHECK_SEQ_LENS"] = value
            results.setdefault(f"call_us_{mode}", []).append(call_us())
    for mode in MODES:
        us = results[f"call_us_{mode}"]
        print(f"host time per frost.sdpa_forward call with lengths, {mode:9s}: median {statistics.median(us):6.1f} us "
              f"(rounds: {', '.join(f'{u:.1f}' for u in us)})")
    return results


if __name__ == "__main__":
    main()

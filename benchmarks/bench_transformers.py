"""A gpt-oss-20b-shaped slice in transformers, eager attention vs attn_implementation="frost": time and peak memory.

The slice is a GptOssForCausalLM built from a config with random init: gpt-oss-20b's attention and expert widths
(hidden 2880, 64 query heads, 8 KV heads, head dim 64, expert intermediate size 2880) in 2 layers, one 128-token
sliding-window layer and one full layer, with 4 experts (2 routed per token by default; gpt-oss-20b routes 4 of 32,
--experts-per-token 4 gives that per-token expert work) and a small vocabulary (the LM head is not what is measured).
Sinks are random of both signs. Both implementations run the same weights and the same token ids.

Per sequence length S (batch 1), for "eager" and "frost":
  - the whole slice: one forward + backward of the mean token cross-entropy on random ids; the median of --iters
    timed steps (CUDA events around each step, after --warmup steps) and the peak memory of one step
    (max_memory_allocated after reset_peak_memory_stats; weights and gradients included);
  - the attention layers alone: transformers' gpt-oss eager_attention_forward (with the additive causal / sliding
    mask the model would build) vs frost's AttentionInterface function (frost.attention on the same views), on
    q/k/v of the slice's shapes, forward + backward, for the sliding and the full layer.
Eager materialises (64, S, S) scores, so it is not run above --skip-eager-above (marked "not run"), and an
out-of-memory failure is reported as "OOM".

--packed measures padding-free training instead: per S, documents of random lengths (--doc-lens, seeded) that
hold S tokens in all, one forward + backward of the slice on them right-padded into a batch (eager and frost) and
flattened into one row by transformers' DataCollatorWithFlattening (frost: position_ids restarting per document
and the cu_seq_lens_* / max_length_* kwargs; eager would attend across documents there). Reported: document
tokens per second (padding not counted) and the peak memory of one step.

    python3 benchmarks/bench_transformers.py                       # H200: S = 1024, 4096, 16384
    python3 benchmarks/bench_transformers.py --packed              # padded vs packed at the same S
    python3 benchmarks/bench_transformers.py --device cpu --tiny --out /tmp/slice.md   # a smoke run

Writes a markdown table to --out, and the raw numbers (.json) and (without --packed) a plot of time and peak
memory vs S (.png, matplotlib) beside it."""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import DataCollatorWithFlattening, GptOssConfig, GptOssForCausalLM  # noqa: E402
from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward  # noqa: E402

import frost.integrations.transformers as frost_hf  # noqa: E402

IMPLS = ("eager", "frost")
PACKED_RUNS = (("eager", "padded"), ("frost", "padded"), ("frost", "packed"))   # (impl, layout) with --packed
LAYER_TYPES = ("sliding_attention", "full_attention")
SHAPES = {
    "slice": dict(hidden_size=2880, intermediate_size=2880, num_attention_heads=64, num_key_value_heads=8,
                  head_dim=64, num_local_experts=4, vocab_size=2048, sliding_window=128),
    "tiny": dict(hidden_size=64, intermediate_size=64, num_attention_heads=8, num_key_value_heads=2,
                 head_dim=64, num_local_experts=4, vocab_size=128, sliding_window=16),
}
NOT_RUN = "not run"
OOM = "OOM"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="tiny shapes (hidden 64, 8/2 heads) for a CPU smoke run")
    p.add_argument("--seqs", default=None, help="comma-separated sequence lengths (default 1024,4096,16384; "
                                                 "tiny: 32,64)")
    p.add_argument("--iters", type=int, default=None, help="timed steps per measurement (default 10; tiny: 2)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 2; tiny: 1)")
    p.add_argument("--skip-eager-above", type=int, default=4096,
                   help="do not run eager above this S (its scores are O(S^2)); 0 runs every S")
    p.add_argument("--experts-per-token", type=int, default=2, help="experts routed per token (of 4)")
    p.add_argument("--experts-implementation", default="eager",
                   help="transformers' experts_implementation (eager, grouped_mm, batched_mm)")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default=None,
                   help="default: bfloat16 on CUDA, float32 on CPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--packed", action="store_true", help="padded vs packed (padding-free) batches of documents")
    p.add_argument("--doc-lens", default=None, help="with --packed: min,max document length (default S/16,S/2)")
    p.add_argument("--out", type=Path, default=None,
                   help="markdown table; the .json and .png are written beside it (default "
                        "docs/bench/transformers_gpt_oss_slice.md, with --packed ..._packed.md)")
    args = p.parse_args(argv)
    args.out = args.out or Path(f"docs/bench/transformers_gpt_oss_{'packed' if args.packed else 'slice'}.md")
    args.doc_lens = tuple(int(n) for n in args.doc_lens.split(",")) if args.doc_lens else None
    args.seqs = [int(s) for s in (args.seqs or ("32,64" if args.tiny else "1024,4096,16384")).split(",")]
    args.iters = args.iters or (2 if args.tiny else 10)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.tiny else 2)
    args.dtype = getattr(torch, args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32"))
    return args


def build_slice(args) -> GptOssForCausalLM:
    """The slice with random init on args.device; sinks random of both signs (alternating by head)."""
    shape = SHAPES["tiny" if args.tiny else "slice"]
    config = GptOssConfig(**shape, num_hidden_layers=len(LAYER_TYPES), layer_types=list(LAYER_TYPES),
                          num_experts_per_tok=args.experts_per_token, attention_dropout=0.0, use_cache=False)
    torch.manual_seed(args.seed)
    with torch.device(args.device):
        model = GptOssForCausalLM._from_config(config, experts_implementation=args.experts_implementation,
                                               dtype=args.dtype)
        heads = shape["num_attention_heads"]
        signs = torch.tensor([1.0, -1.0]).repeat(heads // 2)
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.sinks.copy_(signs * (0.5 + torch.rand(heads)))
    return model.train()


# ---------------------------------------------------------------------------------------------------- measuring

def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_ms(step, args) -> tuple[float, list[float]]:
    """Median time of `step()` over args.iters calls after args.warmup calls: CUDA events around each call on a
    GPU (synchronised before, so a call's host work counts), the wall clock on a CPU."""
    for _ in range(args.warmup):
        step()
    _sync(args.device)
    times = []
    for _ in range(args.iters):
        if args.device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), times


def peak_gb(step, device: str) -> tuple[float | None, float | None]:
    """(peak, before) memory allocated in GB around one call of `step()`; (None, None) off CUDA."""
    if not device.startswith("cuda"):
        step()
        return None, None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30, before / 2**30


def measure(make_step, args) -> dict:
    """Time and peak memory of the step that make_step() builds, or {"status": "OOM"} when the GPU runs out.
    The step (and its tensors) is dropped before the cache is emptied, so an OOM leaves nothing behind."""
    try:
        step = make_step()
        ms, times = median_ms(step, args)
        peak, before = peak_gb(step, args.device)
        result = {"status": "ok", "ms": ms, "times_ms": times, "peak_gb": peak, "before_gb": before}
    except torch.cuda.OutOfMemoryError:
        result = {"status": OOM}
    step = None
    gc.collect()
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return result


def slice_step(model, impl: str, seq_len: int, args):
    """One forward + backward of the mean token cross-entropy on random ids through `impl`."""
    g = torch.Generator().manual_seed(args.seed + seq_len)
    ids = torch.randint(0, model.config.vocab_size, (1, seq_len), generator=g).to(args.device)
    model.set_attn_implementation(impl)

    def step():
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
    return step


def additive_mask(seq_len: int, window: int | None, dtype, device: str) -> torch.Tensor:
    """(1, 1, S, S) additive mask as transformers gives eager attention: key j is kept for query i iff j <= i
    (and j > i - window on a sliding layer), else the dtype's most negative value."""
    i = torch.arange(seq_len, device=device)[:, None]
    j = torch.arange(seq_len, device=device)[None, :]
    keep = j <= i
    if window:
        keep &= j > i - window
    mask = torch.zeros((seq_len, seq_len), dtype=dtype, device=device)
    return mask.masked_fill_(~keep, torch.finfo(dtype).min)[None, None]


def attention_step(model, layer: int, impl: str, seq_len: int, args):
    """Forward + backward of one layer's attention function alone, on BHSD views of BSHD q/k/v as the model makes
    them: transformers' eager_attention_forward with its additive mask, or frost's AttentionInterface function
    (frost.attention; the layer's sliding_window sets the band)."""
    module = model.model.layers[layer].self_attn
    cfg = model.config
    g = torch.Generator(device=args.device).manual_seed(args.seed + seq_len + layer)

    def rand(heads, grad=True):
        t = torch.randn((1, seq_len, heads, cfg.head_dim), generator=g, device=args.device, dtype=args.dtype)
        return t.requires_grad_(grad)
    q, k, v = rand(cfg.num_attention_heads), rand(cfg.num_key_value_heads), rand(cfg.num_key_value_heads)
    d_out = rand(cfg.num_attention_heads, grad=False)
    if impl == "eager":
        fn, mask = eager_attention_forward, additive_mask(seq_len, module.sliding_window, args.dtype, args.device)
    else:
        fn, mask = frost_hf.frost_attention_forward, None

    def step():
        for t in (q, k, v, module.sinks):
            t.grad = None
        out, _ = fn(module, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask, dropout=0.0,
                    scaling=module.scaling, sliding_window=module.sliding_window, s_aux=module.sinks)
        out.backward(d_out)
    return step


def document_lengths(total: int, low: int, high: int, seed: int) -> list[int]:
    """Random lengths in [low, high] (seeded) that sum to exactly `total`; the last one is what remains (at least 1,
    at most high)."""
    if not 1 <= low <= high:
        raise ValueError(f"document lengths: need 1 <= min <= max, got {low}, {high}")
    g = torch.Generator().manual_seed(seed)
    lengths = []
    while total - sum(lengths) > high:
        lengths.append(int(torch.randint(low, high + 1, (1,), generator=g)))
    rest = total - sum(lengths)
    if rest:
        lengths.append(rest)
    return lengths


def layout_inputs(docs: list[list[int]], layout: str) -> dict:
    """The documents as model inputs: "padded" (one per row, right-padded, labels -100 on the padding) or "packed"
    (DataCollatorWithFlattening with return_flash_attn_kwargs=True: one row, position_ids restarting per
    document, labels -100 on each document's first token). Both predict the same tokens."""
    if layout == "packed":
        return DataCollatorWithFlattening(return_flash_attn_kwargs=True)([{"input_ids": d} for d in docs])
    width = max(len(d) for d in docs)
    ids = torch.zeros(len(docs), width, dtype=torch.long)
    mask = torch.zeros(len(docs), width, dtype=torch.long)
    for b, d in enumerate(docs):
        ids[b, :len(d)], mask[b, :len(d)] = torch.tensor(d), 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def documents_for(seq_len: int, args, vocab: int) -> list[list[int]]:
    low, high = args.doc_lens or (max(1, seq_len // 16), max(1, seq_len // 2))
    lengths = document_lengths(seq_len, low, high, args.seed + seq_len)
    g = torch.Generator().manual_seed(args.seed + seq_len + 1)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


def layout_step(model, impl: str, inputs: dict, args):
    """One forward + backward of the model's mean token cross-entropy on `inputs` through `impl`."""
    inputs = {k: v.to(args.device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    model.set_attn_implementation(impl)

    def step():
        model.zero_grad(set_to_none=True)
        model(**inputs).loss.backward()
    return step


def run_packed(args) -> dict:
    """Every --packed measurement: {"meta": ..., "rows": [{"seq_len", "impl", "layout", "documents",
    "batch_shape", "step", "tokens_per_s"}]}; tokens are the documents' (S per step), padding not counted."""
    frost_hf.register()
    model = build_slice(args)
    rows = []
    for seq_len in args.seqs:
        docs = documents_for(seq_len, args, model.config.vocab_size)
        for impl, layout in PACKED_RUNS:
            inputs = layout_inputs(docs, layout)
            row = {"seq_len": seq_len, "impl": impl, "layout": layout, "documents": len(docs),
                   "batch_shape": list(inputs["input_ids"].shape)}
            if impl == "eager" and args.skip_eager_above and seq_len > args.skip_eager_above:
                row["step"] = {"status": NOT_RUN, "reason": f"S > --skip-eager-above {args.skip_eager_above}"}
            else:
                row["step"] = measure(lambda: layout_step(model, impl, inputs, args), args)
            row["tokens_per_s"] = tokens_per_s(seq_len, row["step"])
            rows.append(row)
            print(f"S={seq_len:6d} {impl:>5} {layout:>6}: {_ms(row['step'])} ms, {_tok_s(row)} tok/s, "
                  f"peak {_gb(row['step'])} GB", flush=True)
    return {"meta": describe(args, model) | {"mode": "packed", "doc_lens": args.doc_lens}, "rows": rows}


def tokens_per_s(tokens: int, measured: dict) -> float | None:
    """Document tokens per second of one measured step, None when it did not run."""
    return tokens / (measured["ms"] / 1e3) if measured["status"] == "ok" else None


def run(args) -> dict:
    """Every measurement: {"meta": ..., "rows": [{"seq_len", "impl", "slice", "attention": {layer type: ...}}]}."""
    frost_hf.register()
    model = build_slice(args)
    rows = []
    for seq_len in args.seqs:
        for impl in IMPLS:
            row = {"seq_len": seq_len, "impl": impl}
            if impl == "eager" and args.skip_eager_above and seq_len > args.skip_eager_above:
                skipped = {"status": NOT_RUN, "reason": f"S > --skip-eager-above {args.skip_eager_above}"}
                row["slice"], row["attention"] = skipped, {t: skipped for t in LAYER_TYPES}
            else:
                row["slice"] = measure(lambda: slice_step(model, impl, seq_len, args), args)
                row["attention"] = {t: measure(lambda: attention_step(model, n, impl, seq_len, args), args)
                                    for n, t in enumerate(LAYER_TYPES)}
            rows.append(row)
            print(_progress(row), flush=True)
    return {"meta": describe(args, model), "rows": rows}


def _progress(row: dict) -> str:
    att = " ".join(f"{t.split('_')[0]} {_ms(row['attention'][t])}" for t in LAYER_TYPES)
    return (f"S={row['seq_len']:6d} {row['impl']:>5}: slice {_ms(row['slice'])} ms, peak {_gb(row['slice'])} GB; "
            f"attention {att} ms")


def describe(args, model) -> dict:
    """The run's header: date, device, versions and the slice's shape."""
    cuda = args.device.startswith("cuda")
    cfg = model.config
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
            "transformers": transformers.__version__, "dtype": str(args.dtype).removeprefix("torch."),
            "shape": "tiny" if args.tiny else "gpt-oss-20b slice",
            "config": {k: getattr(cfg, k) for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                                    "num_key_value_heads", "head_dim", "num_local_experts",
                                                    "num_experts_per_tok", "vocab_size", "sliding_window",
                                                    "layer_types")},
            "experts_implementation": args.experts_implementation,
            "parameters": sum(p.numel() for p in model.parameters()),
            "iters": args.iters, "warmup": args.warmup, "skip_eager_above": args.skip_eager_above}


# ---------------------------------------------------------------------------------------------------- reporting

def _ms(r: dict) -> str:
    return f"{r['ms']:.2f}" if r["status"] == "ok" else r["status"]


def _gb(r: dict) -> str:
    if r["status"] != "ok":
        return r["status"]
    return "n/a" if r["peak_gb"] is None else f"{r['peak_gb']:.2f}"


def _attention_total(row: dict) -> dict:
    """Both layers' attention: ok with the summed time when both ran, else the first failing status."""
    parts = [row["attention"][t] for t in LAYER_TYPES]
    bad = next((p for p in parts if p["status"] != "ok"), None)
    return bad or {"status": "ok", "ms": sum(p["ms"] for p in parts)}


def _speedup(eager: dict, frost: dict) -> str:
    if eager["status"] != "ok" or frost["status"] != "ok":
        return "-"
    return f"{eager['ms'] / frost['ms']:.2f}x"


def _tok_s(row: dict) -> str:
    return f"{row['tokens_per_s']:,.0f}" if row["tokens_per_s"] is not None else row["step"]["status"]


def _ratio(num: dict, den: dict) -> str:
    """How many times more tokens per second `num` runs than `den`, or "-" when either did not run."""
    if num["tokens_per_s"] is None or den["tokens_per_s"] is None:
        return "-"
    return f"{num['tokens_per_s'] / den['tokens_per_s']:.2f}x"


def packed_markdown(results: dict) -> str:
    """The --packed table: per S, document tokens/s and peak memory of eager padded, frost padded, frost packed."""
    m, rows = results["meta"], results["rows"]
    c = m["config"]
    by = {(r["seq_len"], r["impl"], r["layout"]): r for r in rows}
    lines = [f"# gpt-oss-20b-shaped slice in transformers: padded vs packed (padding-free) batches ({m['shape']})",
             "", f"{m['date']}; {m['device']}; torch {m['torch']}; transformers {m['transformers']}; {m['dtype']}.",
             "", f"Slice: {len(c['layer_types'])} layers ({', '.join(c['layer_types'])}, window "
             f"{c['sliding_window']}), hidden {c['hidden_size']}, {c['num_attention_heads']} query / "
             f"{c['num_key_value_heads']} KV heads of {c['head_dim']}, {c['num_local_experts']} experts "
             f"({c['num_experts_per_tok']} per token); random init, sinks of both signs.", "",
             "Per S: documents of random lengths (seeded; min,max = "
             f"{'S/16,S/2' if m['doc_lens'] is None else ','.join(map(str, m['doc_lens']))}) holding S tokens in all; "
             "one forward + backward of the mean token cross-entropy, right-padded into a batch (B x longest) or "
             "flattened into one row by DataCollatorWithFlattening (position_ids and cu_seq_lens_* kwargs). "
             f"tok/s counts document tokens (S per step, padding not counted): S / median of {m['iters']} steps "
             f"after {m['warmup']}; peak = max_memory_allocated over one step. Eager is not run above S = "
             f"{m['skip_eager_above']}.", "",
             "| S | documents | padded batch | eager padded tok/s | frost padded tok/s | frost packed tok/s "
             "| packed vs frost padded | packed vs eager padded | peak GB eager padded / frost padded / frost packed |",
             "|---:|---:|:---|---:|---:|---:|---:|---:|:---|"]
    for s in dict.fromkeys(r["seq_len"] for r in rows):
        e, fp, fk = (by[(s, impl, layout)] for impl, layout in PACKED_RUNS)
        lines.append(f"| {s} | {fk['documents']} | {' x '.join(map(str, fp['batch_shape']))} | {_tok_s(e)} "
                     f"| {_tok_s(fp)} | {_tok_s(fk)} | {_ratio(fk, fp)} | {_ratio(fk, e)} "
                     f"| {_gb(e['step'])} / {_gb(fp['step'])} / {_gb(fk['step'])} |")
    return "\n".join(lines) + "\n"


def markdown(results: dict) -> str:
    m, rows = results["meta"], results["rows"]
    c = m["config"]
    by = {(r["seq_len"], r["impl"]): r for r in rows}
    lines = [f"# gpt-oss-20b-shaped slice in transformers: eager vs frost ({m['shape']})", "",
             f"{m['date']}; {m['device']}; torch {m['torch']}; transformers {m['transformers']}; {m['dtype']}.", "",
             f"Slice: {len(c['layer_types'])} layers ({', '.join(c['layer_types'])}, window {c['sliding_window']}), "
             f"hidden {c['hidden_size']}, {c['num_attention_heads']} query / {c['num_key_value_heads']} KV heads of "
             f"{c['head_dim']}, {c['num_local_experts']} experts ({c['num_experts_per_tok']} per token, intermediate "
             f"{c['intermediate_size']}, experts_implementation={m['experts_implementation']}), vocab "
             f"{c['vocab_size']}, {m['parameters'] / 1e6:.0f} M parameters; random init, sinks of both signs; "
             f"batch 1.", "",
             f"Slice: one forward + backward of the mean token cross-entropy; median of {m['iters']} steps after "
             f"{m['warmup']}; peak = max_memory_allocated over one step (weights and gradients included). "
             "Attention: both layers' attention functions alone (eager_attention_forward with its additive mask vs "
             "frost's AttentionInterface function), forward + backward, summed over the two layers. Eager is "
             f"not run above S = {m['skip_eager_above']} (\"not run\"); \"OOM\": out of GPU memory.", "",
             "| S | eager ms | frost ms | speedup | eager peak GB | frost peak GB | attention eager ms "
             "| attention frost ms | attention speedup |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in dict.fromkeys(r["seq_len"] for r in rows):
        e, f = by[(s, "eager")], by[(s, "frost")]
        ea, fa = _attention_total(e), _attention_total(f)
        lines.append(f"| {s} | {_ms(e['slice'])} | {_ms(f['slice'])} | {_speedup(e['slice'], f['slice'])} "
                     f"| {_gb(e['slice'])} | {_gb(f['slice'])} | {_ms(ea)} | {_ms(fa)} | {_speedup(ea, fa)} |")
    lines += ["", "Per implementation (attention per layer, and the attention call's own peak):", "",
              "| S | impl | slice ms | slice peak GB | sliding attention ms | full attention ms "
              "| sliding attention peak GB | full attention peak GB |",
              "|---:|:---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        sl, fu = (r["attention"][t] for t in LAYER_TYPES)
        lines.append(f"| {r['seq_len']} | {r['impl']} | {_ms(r['slice'])} | {_gb(r['slice'])} | {_ms(sl)} "
                     f"| {_ms(fu)} | {_gb(sl)} | {_gb(fu)} |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> bool:
    """Time (slice and attention) and slice peak memory vs S, both implementations; False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping the PNG (pip install matplotlib)")
        return False
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = {"eager": "tab:orange", "frost": "tab:blue"}
    for impl in IMPLS:
        rows = [r for r in results["rows"] if r["impl"] == impl]
        for label, get, style in (("slice", lambda r: r["slice"], "-o"), ("attention", _attention_total, "--s")):
            pts = [(r["seq_len"], get(r)["ms"]) for r in rows if get(r)["status"] == "ok"]
            if pts:
                ax_t.plot(*zip(*pts), style, color=colors[impl], label=f"{impl} {label}")
        pts = [(r["seq_len"], r["slice"]["peak_gb"]) for r in rows
               if r["slice"]["status"] == "ok" and r["slice"]["peak_gb"] is not None]
        if pts:
            ax_m.plot(*zip(*pts), "-o", color=colors[impl], label=impl)
    seqs = sorted({r["seq_len"] for r in results["rows"]})
    ax_t.set(xscale="log", yscale="log", ylabel="forward + backward ms", title="time (lower is better)")
    ax_m.set(xscale="log", ylabel="peak GB over one step", title="whole-slice peak memory")
    for ax in (ax_t, ax_m):
        ax.set_xticks(seqs, [str(s) for s in seqs])
        ax.set_xlim(seqs[0] / 1.25, seqs[-1] * 1.25)
        ax.minorticks_off()
        ax.set_xlabel("sequence length S (not run / OOM points are absent)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no CUDA memory statistics", ha="center", transform=ax.transAxes)
    m = results["meta"]
    fig.suptitle(f"{m['shape']}, {m['dtype']}, {m['device']}: eager vs frost", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None) -> dict:
    args = parse_args(argv)
    results = run_packed(args) if args.packed else run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table = packed_markdown(results) if args.packed else markdown(results)
    args.out.write_text(table)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print(table)
    print(f"written: {args.out}, {args.out.with_suffix('.json')}")
    if not args.packed and plot(results, args.out.with_suffix(".png")):
        print(f"plot: {args.out.with_suffix('.png')}")
    return results


if __name__ == "__main__":
    main()

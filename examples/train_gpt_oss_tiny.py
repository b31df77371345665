"""Train a small gpt-oss-shaped model with attn_implementation="frost" and with "eager", and plot both loss curves.

The model is built from a transformers GptOssConfig (random init: GQA, learnable sinks, alternating sliding-window and
full layers, a mixture of experts) and trained on synthetic data made here, so nothing is fetched. Both runs
start from the same weights and see the same batches, so their curves should lie on top of each other.

With --packed the documents have random lengths, and every step trains on them twice over: right-padded into a
batch (with each of --impls) and padding-free, flattened into one row by transformers' DataCollatorWithFlattening
(position_ids restarting per document and its cu_seq_lens_* / max_length_* kwargs; frost only: eager attends
across documents there). Both layouts predict the same tokens, so the padded and packed curves lie on top of each
other, and packed spends no compute on padding.

    python examples/train_gpt_oss_tiny.py --tiny --device cpu --steps 20    # seconds on a CPU
    python examples/train_gpt_oss_tiny.py --device cuda --steps 300         # a real run on a GPU
    python examples/train_gpt_oss_tiny.py --tiny --device cpu --steps 20 --packed   # padded vs packed

Writes loss.json (per-step losses, tokens/s, peak memory) and loss.png (matplotlib, when installed) to --out-dir."""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import torch
from transformers import DataCollatorWithFlattening, GptOssConfig, GptOssForCausalLM

import frost.integrations.transformers as frost_hf

SIZES = {  # hidden, layers, query heads, kv heads, experts, vocab, sliding window
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                 num_local_experts=2, vocab_size=128, sliding_window=16),
    "small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,
                  num_local_experts=4, vocab_size=4096, sliding_window=128),
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default: 64 tiny, 2048 small); "
                                                                "with --packed the longest document")
    p.add_argument("--batch-size", type=int, default=None, help="sequences per step (default: 4 tiny, 8 small)")
    p.add_argument("--tiny", action="store_true", help="a model small enough to train in seconds on a CPU")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                   help="default: bfloat16 on CUDA, float32 on CPU")
    p.add_argument("--lr", type=float, default=None, help="default: 3e-3 tiny, 3e-4 small (bf16 diverges above)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--impls", default="frost,eager", help="attention implementations to train, comma-separated")
    p.add_argument("--packed", action="store_true", help="documents of random lengths, trained right-padded (each "
                                                         "of --impls) and padding-free (frost)")
    p.add_argument("--out-dir", type=Path, default=Path("out/train_gpt_oss_tiny"))
    args = p.parse_args(argv)
    args.seq_len = args.seq_len or (64 if args.tiny else 2048)
    args.batch_size = args.batch_size or (4 if args.tiny else 8)
    args.lr = args.lr or (3e-3 if args.tiny else 3e-4)
    args.dtype = getattr(torch, args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32"))
    return args


def build_model(args) -> GptOssForCausalLM:
    size = SIZES["tiny" if args.tiny else "small"]
    layer_types = ["sliding_attention", "full_attention"] * (size["num_hidden_layers"] // 2)
    config = GptOssConfig(**size, head_dim=64, intermediate_size=size["hidden_size"], num_experts_per_tok=2,
                          layer_types=layer_types, attention_dropout=0.0)
    torch.manual_seed(args.seed)
    return GptOssForCausalLM(config).to(device=args.device, dtype=args.dtype)


def copy_documents(args, vocab: int):
    """Per step, args.batch_size documents that repeat a block of 8-32 tokens drawn from a sparse bigram table (4
    successors per token): the table is learnt first, then, after a block's first copy, every token is predictable
    by attending back one period. args.seq_len tokens each, or (with --packed) a random length from 1 to it.
    Seeded: every run sees the same documents."""
    g = torch.Generator().manual_seed(args.seed + 1)
    successors = torch.randint(0, vocab, (vocab, 4), generator=g)
    for _ in range(args.steps):
        docs = []
        for _ in range(args.batch_size):
            period = int(torch.randint(8, 33, (1,), generator=g))
            length = int(torch.randint(1, args.seq_len + 1, (1,), generator=g)) if args.packed else args.seq_len
            block = [int(torch.randint(0, vocab, (1,), generator=g))]
            for choice in torch.randint(0, 4, (period - 1,), generator=g).tolist():
                block.append(int(successors[block[-1], choice]))
            docs.append(torch.tensor(block).repeat(length // period + 1)[:length])
        yield docs


def padded_batch(docs: list[torch.Tensor]) -> dict:
    """The documents right-padded into one batch: labels -100 on the padding, so it predicts no token."""
    width = max(len(d) for d in docs)
    ids = torch.zeros(len(docs), width, dtype=torch.long)
    mask = torch.zeros(len(docs), width, dtype=torch.long)
    for b, d in enumerate(docs):
        ids[b, :len(d)], mask[b, :len(d)] = d, 1
    if bool(mask.all()):
        return {"input_ids": ids, "labels": ids.clone()}
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def packed_batch(docs: list[torch.Tensor]) -> dict:
    """The documents flattened into one row by DataCollatorWithFlattening: position_ids restarting per document,
    labels -100 on each document's first token (so no token predicts the next document), and the
    cu_seq_lens_* / max_length_* kwargs."""
    return DataCollatorWithFlattening(return_flash_attn_kwargs=True)([{"input_ids": d.tolist()} for d in docs])


def train(model, impl: str, args, layout: str = "padded") -> dict:
    """Train `model` (modified in place) for args.steps steps on the "padded" or "packed" layout of the same
    documents; returns per-step losses and throughput in document tokens (padding not counted)."""
    model.set_attn_implementation(impl)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    losses, seconds, tokens = [], [], []
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    make_batch = packed_batch if layout == "packed" else padded_batch
    options = {"use_cache": False} if args.packed else {}
    for step, docs in enumerate(copy_documents(args, model.config.vocab_size)):
        batch = {k: v.to(args.device) if isinstance(v, torch.Tensor) else v for k, v in make_batch(docs).items()}
        start = time.perf_counter()
        loss = model(**batch, **options).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
        tokens.append(sum(len(d) for d in docs))
        losses.append(loss.item())
        if step % max(1, args.steps // 10) == 0 or step == args.steps - 1:
            print(f"{impl:>6} {layout} step {step:4d}  loss {losses[-1]:.4f}  {tokens[-1] / seconds[-1]:9.0f} tok/s")
    timed = slice(1, None) if len(seconds) > 1 else slice(None)   # the first step compiles kernels, warms caches
    return {"losses": losses, "tokens_per_s": sum(tokens[timed]) / sum(seconds[timed]),
            "peak_memory_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else None}


def runs(args) -> list[tuple[str, str, str]]:
    """(label, implementation, layout) of every training run: each of --impls, and with --packed each of them
    right-padded plus frost padding-free."""
    impls = args.impls.split(",")
    if not args.packed:
        return [(impl, impl, "padded") for impl in impls]
    return [(f"{impl} padded", impl, "padded") for impl in impls] + [("frost packed", "frost", "packed")]


def plot(results: dict, path: Path, title: str) -> bool:
    """Both loss curves in one PNG; False (and a message) when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping the PNG (pip install matplotlib)")
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, r in results.items():
        ax.plot(r["losses"], label=f"{label} ({r['tokens_per_s']:.0f} tok/s)",
                linestyle="--" if label.startswith("eager") else ":" if label.endswith("packed") else "-")
    ax.set(xlabel="step", ylabel="training loss", title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None) -> dict:
    args = parse_args(argv)
    frost_hf.register()
    initial = build_model(args)
    results = {label: train(copy.deepcopy(initial), impl, args, layout) for label, impl, layout in runs(args)}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    title = (f"gpt-oss-shaped {'tiny' if args.tiny else 'small'} model, S{'<=' if args.packed else '='}"
             f"{args.seq_len}, B={args.batch_size}, {str(args.dtype).removeprefix('torch.')}, {args.device}")
    (args.out_dir / "loss.json").write_text(json.dumps({"title": title, "results": results}, indent=1))
    for label, r in results.items():
        print(f"{label:>12}: final loss {r['losses'][-1]:.4f}, {r['tokens_per_s']:.0f} tok/s"
              + (f", peak {r['peak_memory_gb']:.2f} GB" if r["peak_memory_gb"] is not None else ""))
    if plot(results, args.out_dir / "loss.png", title):
        print(f"loss curves: {args.out_dir / 'loss.png'}")
    return results


if __name__ == "__main__":
    main()

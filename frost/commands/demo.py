"""`frost demo`: run the gpt-oss-shaped backward on the best engine here and check it against the fp64 oracle."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("demo", help="run a gpt-oss-like attention backward and check it against the fp64 oracle")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--heads-q", type=int, default=16)
    p.add_argument("--heads-kv", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.set_defaults(func=run)


def run(args) -> int:
    from frost.demo import DemoShape, run_demo

    seq = args.seq
    shape = DemoShape(batch=args.batch, heads_q=args.heads_q, heads_kv=args.heads_kv, seq=seq,
                      head_dim=args.head_dim, window=min(128, seq), short_q=max(1, seq // 5),
                      short_kv=max(1, (3 * seq) // 5), dtype=args.dtype)
    return 0 if run_demo(shape, args.device).passed else 1

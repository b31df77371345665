"""`frost demo`: run the gpt-oss-shaped backward on the best engine here and check it against the fp64 oracle.

Exit 0 when every gradient is within the bound, 1 when one is not, 2 for arguments it cannot run (a device this
machine lacks, a head count that does not divide), reported as one line on stderr."""

from __future__ import annotations

from frost.commands.arg_types import int_at_least
from frost.errors import FrostError


class DemoArgumentError(FrostError, ValueError):
    """A demo option this machine or the math cannot run."""


_positive = int_at_least(1)
MAX_ELEMENTS = 1 << 28   # elements of the demo's q (B x S x Hq x D): a demo, and its fp64 oracle, stay in memory


def register(sub) -> None:
    p = sub.add_parser("demo", help="run a gpt-oss-like attention backward and check it against the fp64 oracle "
                       "(exit 0 pass, 1 fail, 2 bad option)")
    p.add_argument("--batch", type=_positive, default=2)
    p.add_argument("--seq", type=_positive, default=512)
    p.add_argument("--heads-q", type=_positive, default=16)
    p.add_argument("--heads-kv", type=_positive, default=2, help="must divide --heads-q")
    p.add_argument("--head-dim", type=_positive, default=64)
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.set_defaults(func=run)


def device_for(name: str | None):
    """The torch device the demo runs on; one a caller names must exist on this machine."""
    import torch

    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise DemoArgumentError(f"--device: got {name!r}; accepted: cpu or cuda[:N]") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DemoArgumentError(f"--device: got {name!r}; accepted: cpu (torch sees no CUDA device here)")
    if device.type not in ("cpu", "cuda"):
        raise DemoArgumentError(f"--device: got {name!r}; accepted: cpu or cuda[:N]")
    return device


def run(args) -> int:
    from frost.demo import DemoShape, run_demo

    if args.heads_q % args.heads_kv:
        raise DemoArgumentError(f"--heads-kv: got {args.heads_kv}; accepted: a divisor of --heads-q "
                                f"{args.heads_q} (query heads per kv head must be whole)")
    elements = args.batch * args.seq * args.heads_q * args.head_dim
    if elements > MAX_ELEMENTS:
        raise DemoArgumentError(f"--batch x --seq x --heads-q x --head-dim: got {elements}; accepted: at most "
                                f"{MAX_ELEMENTS} (a demo's q; its fp64 check keeps several copies)")
    device = device_for(args.device)
    seq = args.seq
    shape = DemoShape(batch=args.batch, heads_q=args.heads_q, heads_kv=args.heads_kv, seq=seq,
                      head_dim=args.head_dim, window=min(128, seq), short_q=max(1, seq // 5),
                      short_kv=max(1, (3 * seq) // 5), dtype=args.dtype)
    return 0 if run_demo(shape, str(device)).passed else 1

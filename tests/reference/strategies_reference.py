"""Hypothesis strategies (and hand-picked corner cases) for tiny attention problems covering the matrix."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from helpers.tensors import randn_bhsd
from reference_cases import Case

HEAD_DIMS = (40, 64, 72, 128)


def _tensor(shape: tuple[int, ...], bshd: bool, gen: torch.Generator) -> torch.Tensor:
    """A random fp64 BHSD tensor; with bshd, a transposed view of BSHD memory."""
    return randn_bhsd(shape, torch.float64, layout="bshd" if bshd else "bhsd", gen=gen)


def make_case(batch: int = 1, hq: int = 1, hkv: int = 1, sq: int = 8, skv: int = 8, dqk: int = 64, dv: int = 64,
              *, seed: int = 0, bshd: bool = False, sink: list[float] | None = None, block_rows: int | None = None,
              **attrs) -> Case:
    """A Case with random fp64 q, k, v, dO; `attrs` are Case fields (scale, causal, alignment, band_*,
    seq_len_*)."""
    gen = torch.Generator().manual_seed(seed)
    return Case(q=_tensor((batch, hq, sq, dqk), bshd, gen), k=_tensor((batch, hkv, skv, dqk), bshd, gen),
                v=_tensor((batch, hkv, skv, dv), bshd, gen), do=_tensor((batch, hq, sq, dv), bshd, gen),
                sink=None if sink is None else torch.tensor(sink, dtype=torch.float64),
                extra={"block_rows": block_rows}, **attrs)


# Corner cases every run checks, whatever hypothesis draws.
CORNERS = [
    make_case(2, 4, 1, 1, 17, 40, 40, seq_len_kv=[0, 17], causal=True, alignment="bottom_right"),
    make_case(3, 8, 2, 23, 1, 72, 64, sink=[30.0, -30.0, 0.5, 1, 2, 3, 4, 5], seq_len_q=[0, 5, 23]),
    make_case(2, 8, 8, 1, 1, 128, 128, sink=[-30.0] * 8, bshd=True),
    make_case(2, 2, 2, 30, 9, 64, 64, band_left=0, band_right=0, alignment="bottom_right", block_rows=4,
              seq_len_q=[30, 12], seq_len_kv=[9, 0]),
    make_case(1, 8, 1, 33, 40, 40, 72, band_left=40, band_right=50, causal=True, block_rows=1, bshd=True),
    make_case(3, 4, 4, 40, 40, 64, 64, band_left=3, causal=True, sink=[30.0, 30.0, -30.0, 0.0], block_rows=7,
              seq_len_q=[40, 0, 17], seq_len_kv=[0, 40, 25]),
]


def _lengths(batch: int, full: int) -> st.SearchStrategy[list[int] | None]:
    lens = st.lists(st.one_of(st.just(0), st.just(full), st.integers(0, full)), min_size=batch, max_size=batch)
    return st.one_of(st.none(), lens)


def _bound() -> st.SearchStrategy[int | None]:
    return st.one_of(st.none(), st.just(0), st.integers(0, 50))


@st.composite
def cases(draw) -> Case:
    """GQA ratios 1/4/8/Hq, both alignments, causal, bands (incl. 0 and >= S), padding (incl. empty
    sequences), sink (incl. ±30), Sq != Skv, S = 1, head dims 40/64/72/128, BHSD or BSHD memory, block sizes."""
    batch, hq = draw(st.integers(1, 3)), draw(st.sampled_from((1, 2, 4, 8)))
    ratio = draw(st.sampled_from([r for r in (1, 4, 8, hq) if hq % r == 0]))
    sq, skv = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    skv = sq if draw(st.integers(0, 3)) == 0 else skv  # Sq == Skv more often than chance
    dqk = draw(st.sampled_from(HEAD_DIMS))
    sink = None
    if draw(st.booleans()):
        value = st.one_of(st.sampled_from((-30.0, 30.0)), st.floats(-30, 30))
        sink = draw(st.lists(value, min_size=hq, max_size=hq))
    return make_case(
        batch, hq, hq // ratio, sq, skv, dqk, draw(st.one_of(st.just(dqk), st.sampled_from(HEAD_DIMS))),
        seed=draw(st.integers(0, 2**31 - 1)), bshd=draw(st.booleans()), sink=sink,
        block_rows=draw(st.one_of(st.none(), st.integers(1, 8))),
        seq_len_q=draw(_lengths(batch, sq)), seq_len_kv=draw(_lengths(batch, skv)),
        scale=draw(st.one_of(st.none(), st.floats(0.01, 1.0))), causal=draw(st.booleans()),
        alignment=draw(st.sampled_from(("top_left", "bottom_right"))), band_left=draw(_bound()),
        band_right=draw(_bound()),
    )

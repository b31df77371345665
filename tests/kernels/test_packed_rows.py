"""The packed dQ accumulator's row layout (kernels/segments.acc_row_base, limits.packed_acc_rows), on plain ints:
each segment's rows, padded to SEQ_PAD (what the preprocess zeroes, the main kernel adds into and the convert
reads), are disjoint from every other segment's and lie inside the region the workspace sizes."""

from __future__ import annotations

import random

from frost.kernels.segments import acc_row_base
from frost.limits import SEQ_PAD, packed_acc_rows


def _padded(n: int) -> int:
    return -(-n // SEQ_PAD) * SEQ_PAD


def test_segments_rows_are_disjoint_and_inside_the_region():
    rng = random.Random(0)
    for trial in range(2000):
        batch = rng.randint(1, 12)
        lens = [rng.choice((0, 1, rng.randint(1, 300), rng.randint(1, 5000), SEQ_PAD, 2 * SEQ_PAD - 1))
                for _ in range(batch)]
        starts = [sum(lens[:b]) for b in range(batch)]
        tokens = sum(lens) + rng.choice((0, 0, rng.randint(1, 500)))   # sometimes tokens past cu[-1]
        spans = sorted((acc_row_base(s, b), acc_row_base(s, b) + _padded(n)) for b, (s, n) in
                       enumerate(zip(starts, lens)) if n)
        assert all(lo >= 0 and lo % SEQ_PAD == 0 for lo, _ in spans), (lens, spans)
        assert all(a_hi <= b_lo for (_, a_hi), (b_lo, _) in zip(spans, spans[1:])), (lens, spans)
        assert not spans or spans[-1][1] <= packed_acc_rows(tokens, batch), (lens, spans, tokens)

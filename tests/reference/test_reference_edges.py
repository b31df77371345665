"""frost.reference beyond the autograd matrix: empty rows, garbage in padded rows, block sizes and memory,
low precision, input validation, and the GPU path."""

from __future__ import annotations

import pytest
import torch

import frost.reference as ref
from frost.errors import TensorError
from frost.reference import mask as masks
from reference_cases import expected
from strategies_reference import make_case

NAN, INF = float("nan"), float("inf")


def run(case, block_rows=None, **overrides):
    """Reference forward then backward on a Case (dtype of its tensors, sink as given)."""
    kw = {**case.kwargs(), **overrides}
    o, lse = ref.attention_forward(case.q, case.k, case.v, **kw, block_rows=block_rows)
    return (o, lse, *ref.attention_backward(case.q, case.k, case.v, o, case.do, lse, **kw, block_rows=block_rows))


@pytest.mark.parametrize("sink", [None, [0.5, -30.0]])
@pytest.mark.parametrize("attrs, empty", [
    (dict(seq_len_kv=[0, 6]), [(0, i) for i in range(9)]),                                       # no keys at all
    (dict(band_left=0, band_right=0, alignment="bottom_right"), [(b, i) for b in (0, 1) for i in range(3)]),
    (dict(band_left=0, band_right=0, alignment="top_left"), [(b, i) for b in (0, 1) for i in range(6, 9)]),
    (dict(band_left=2, band_right=1, causal=True, alignment="bottom_right", seq_len_kv=[6, 2]),
     [(0, 0), (0, 1)] + [(1, i) for i in range(6)]),
])
def test_rows_without_keys_are_zero_never_nan(attrs, empty, sink) -> None:
    """Sq=9 > Skv=6: the listed (batch, row) pairs see no key. Without a sink their LSE is -inf; with one it is
    exactly the sink; either way O and dQ are exactly zero and nothing is NaN."""
    case = make_case(2, 2, 1, 9, 6, 40, 40, seed=3, sink=sink, **attrs)
    o, lse, dq, dk, dv, dsink = run(case, block_rows=2)
    for t in (o, dq, dk, dv) + ((dsink,) if sink else ()):
        assert torch.isfinite(t).all()
    rows = torch.zeros(2, 9, dtype=torch.bool)
    for b, i in empty:
        rows[b, i] = True
    rows = rows[:, None].expand(2, 2, 9)
    assert (o[rows] == 0).all() and (dq[rows] == 0).all()
    want_lse = torch.full_like(lse, -INF) if sink is None else case.sink.view(1, 2, 1).expand_as(lse)
    assert torch.equal(lse[rows], want_lse[rows])
    assert torch.isfinite(lse[~rows]).all(), "every other row sees a key"


@pytest.mark.parametrize("junk", [NAN, INF, -INF, 1e30])
def test_padded_rows_ignore_any_garbage(junk) -> None:
    """O, dO and LSE of padded rows may hold anything (a kernel need not write them): no output changes."""
    case = make_case(3, 4, 2, 11, 7, 64, 64, seed=5, sink=[1.0, 2.0, -1.0, 30.0], causal=True,
                     alignment="bottom_right", seq_len_q=[11, 4, 0], seq_len_kv=[7, 7, 3])
    want = expected(case)
    kw = case.kwargs()
    clean = ref.attention_backward(case.q, case.k, case.v, want["o"], case.do, want["lse"], **kw)
    pad = (torch.arange(11)[None] >= torch.tensor([11, 4, 0])[:, None])[:, None].expand(3, 4, 11)
    o, do, lse = want["o"].clone(), case.do.clone(), want["lse"].clone()
    o[pad], do[pad], lse[pad] = junk, junk, junk
    dirty = ref.attention_backward(case.q, case.k, case.v, o, do, lse, **kw)
    for a, b in zip(clean, dirty):
        assert torch.equal(a, b)


def test_block_size_does_not_change_results() -> None:
    case = make_case(2, 8, 2, 37, 29, 72, 40, seed=9, sink=[0.1 * h for h in range(8)], band_left=5,
                     band_right=3, alignment="bottom_right", seq_len_q=[37, 20], seq_len_kv=[10, 29])
    whole = run(case, block_rows=37)
    for rows in (1, 4, 16):
        for a, b in zip(run(case, block_rows=rows), whole):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_block_rows_bound_the_score_block() -> None:
    for batch, heads, seq in ((1, 1, 8192), (8, 64, 8192), (2, 16, 65536), (1, 1, 3)):
        rows = ref.block_rows_for(batch, heads, seq, seq)
        assert 1 <= rows <= min(ref.DEFAULT_BLOCK_ROWS, seq)
        assert rows == 1 or batch * heads * rows * seq <= ref.MAX_BLOCK_ELEMENTS
    assert ref.block_rows_for(1, 1, 100, 100, block_rows=7) == 7
    with pytest.raises(TensorError, match="block_rows"):
        ref.block_rows_for(1, 1, 100, 100, block_rows=0)


def test_s8192_forward_backward_stays_block_bounded(monkeypatch) -> None:
    """B=1, H=1, S=8192, D=64: every mask (and so every score block) the engine builds has at most block_rows
    rows, so no S×S matrix exists; the results still satisfy identities of the exact gradients."""
    seen = []

    def spy(spec, i0, i1, skv_total):
        seen.append((i1 - i0, skv_total))
        return real(spec, i0, i1, skv_total)

    real = masks.block_mask
    monkeypatch.setattr(masks, "block_mask", spy)
    seq, rows = 8192, ref.block_rows_for(1, 1, 8192, 8192)
    assert rows * seq * 4 <= 64 * 2**20, "an fp32 score block stays within 64 MiB"
    gen = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(1, 1, seq, 64, generator=gen) for _ in range(4))
    o, lse = ref.attention_forward(q, k, v, causal=True)
    dq, dk, dv, _ = ref.attention_backward(q, k, v, o, do, lse, causal=True)
    assert len(seen) == 2 * -(-seq // rows) and max(r for r, _ in seen) == rows < seq
    # row 0 sees only key 0; Σ_j dS_ij = 0 so Σ_j dK_j = 0; Σ_j P_ij = 1 so Σ_j dV_j = Σ_i dO_i
    torch.testing.assert_close(o[0, 0, 0], v[0, 0, 0])
    assert dk.sum(2).abs().max() <= 1e-4 * dk.abs().sum(2).max()
    torch.testing.assert_close(dv.sum(2), do.sum(2), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("batch, sq, skv", [(0, 4, 4), (2, 0, 4), (2, 4, 0)])
def test_empty_tensors(batch, sq, skv) -> None:
    """Zero-sized batch or sequence: shapes come out right; with no keys at all, LSE = sink and O = 0."""
    case = make_case(batch, 2, 1, sq, skv, 8, 8, sink=[0.25, -1.0])
    o, lse, dq, dk, dv, dsink = run(case)
    assert (o.shape, lse.shape, dq.shape, dk.shape, dv.shape) == \
        (case.do.shape, case.do.shape[:3], case.q.shape, case.k.shape, case.v.shape)
    assert torch.equal(dsink, torch.zeros(2, dtype=torch.float64))
    if skv == 0:
        assert (o == 0).all() and torch.equal(lse, case.sink.view(1, 2, 1).expand_as(lse))

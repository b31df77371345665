"""The suite's fp64 oracle (tests/helpers/oracle*.py) against DESIGN.md written out by hand: the keep mask on small
problems, the edge rows, its gradient formulas against torch.autograd through its own forward, packed = every
sequence alone, and frost.attention's options mapped to the math. (frost.reference is checked against the oracle in
test_reference_vs_autograd.py and test_reference_varlen.py.)"""

from __future__ import annotations

import math

import pytest
import torch

import frost.reference
from helpers import oracle, oracle_api, oracle_packed
from helpers.tensors import cu_seqlens, int32, randn_bhsd, randn_thd

INF = math.inf


def _rows(*rows: str) -> torch.Tensor:
    """A keep mask written as strings of 0/1, one per query row."""
    return torch.tensor([[c == "1" for c in r] for r in rows])


@pytest.mark.parametrize("options, want", [
    (dict(), ("11111", "11111", "11111")),
    (dict(causal=True), ("10000", "11000", "11100")),
    (dict(causal=True, alignment="bottom_right"), ("11100", "11110", "11111")),
    (dict(causal=True, band_right=1), ("11000", "11100", "11110")),                       # right-band widening
    (dict(causal=True, band_left=1, alignment="bottom_right"), ("01100", "00110", "00011")),  # a sliding window
    (dict(band_left=0, band_right=0), ("10000", "01000", "00100")),
    (dict(band_left=1), ("11111", "11111", "01111")),
    (dict(band_right=0, alignment="bottom_right", seq_len_q=[2], seq_len_kv=[4]), ("11100", "11110", "00000")),
])
def test_keep_mask_follows_the_design(options, want):
    """Sq = 3, Skv = 5: the diagonal at j = i (top-left) or j = i + 2 (bottom-right, with each batch's own lengths),
    the band around it, padded rows and keys."""
    assert torch.equal(oracle.keep_mask(1, 3, 5, **options)[0], _rows(*want))


def test_rows_that_see_nothing():
    """A padded row: O = 0, LSE = -inf; a valid row that sees no key: O = 0 and LSE = the sink (-inf without one);
    a sink of -inf is no sink; with a sink of +30 a row's LSE is about 30."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (randn_bhsd((2, 3, 4, 8), torch.float64, gen=gen) for _ in range(3))
    lens = dict(seq_len_q=[4, 2], seq_len_kv=[0, 4])   # batch 0: no keys; batch 1: rows 2, 3 padded
    without, _ = oracle.attention_forward(q, k, v, **lens)
    lse_without = oracle.attention_forward(q, k, v, **lens)[1]
    for sink in (None, torch.tensor([0.5, -INF, 30.0], dtype=torch.float64)):
        o, lse = oracle.attention_forward(q, k, v, sink=sink, **lens)
        assert torch.equal(o[0], torch.zeros_like(o[0])) and torch.equal(o[1, :, 2:], torch.zeros_like(o[1, :, 2:]))
        assert torch.equal(lse[1, :, 2:], torch.full_like(lse[1, :, 2:], -INF))
        no_key = torch.full((3, 4), -INF, dtype=torch.float64) if sink is None else sink.view(3, 1).expand(3, 4)
        assert torch.equal(lse[0], no_key)
        assert torch.isfinite(lse[1, :, :2]).all() and torch.isfinite(o).all()
        assert torch.equal(lse[1, 1], lse_without[1, 1]) and torch.equal(o[:, 1], without[:, 1])   # sink -inf
    _, lse = oracle.attention_forward(q, k, v, sink=torch.full((3,), 30.0))
    assert ((lse - 30).abs() < 1).all()


CASES = [
    dict(b=2, hq=4, hkv=2, sq=9, skv=12, dqk=16, dv=8, causal=True, alignment="bottom_right", band_left=4,
         seq_len_q=[9, 5], seq_len_kv=[12, 0], sink=[0.5, -1.0, 30.0, -30.0], dlse=True),
    dict(b=1, hq=3, hkv=1, sq=7, skv=7, dqk=8, dv=8, band_left=2, band_right=1, sink=[1.0, -INF, 0.0]),
    dict(b=2, hq=2, hkv=2, sq=6, skv=1, dqk=8, dv=16, causal=True, seq_len_q=[0, 6], dlse=True, scale=0.7),
]


def _problem(b, hq, hkv, sq, skv, dqk, dv, sink=None, dlse=False, seed=0, **mask):
    gen = torch.Generator().manual_seed(seed)
    q = randn_bhsd((b, hq, sq, dqk), torch.float64, layout="bshd", gen=gen)
    k, v = (randn_bhsd((b, hkv, skv, d), torch.float64, gen=gen) for d in (dqk, dv))
    do = randn_bhsd((b, hq, sq, dv), torch.float64, gen=gen)
    side = dict(sink=None if sink is None else torch.tensor(sink, dtype=torch.float64),
                dlse=randn_bhsd((b, hq, sq, 1), torch.float64, gen=gen)[..., 0] if dlse else None)
    return (q, k, v, do), side, mask


@pytest.mark.parametrize("case", CASES, ids=["gqa-window-pad-sink-dlse", "mqa-band-sinks", "skv1-scale"])
def test_gradient_formulas_equal_autograd_through_the_forward(case):
    (q, k, v, do), side, mask = _problem(**case)
    want = oracle.autograd_backward(q, k, v, do, **side, **mask)
    got = oracle.attention_backward(q, k, v, want["o"], do, want["lse"], **side, **mask)
    for name, g in zip(("dq", "dk", "dv", "dsink"), got):
        w = want[name]
        if w is None:
            assert g is None
            continue
        assert torch.isfinite(g).all(), name
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12 * max(w.abs().max().item(), 1.0),
                                   msg=lambda m, n=name: f"{n}: {m}")


def test_backward_reads_nothing_from_padded_rows():
    (q, k, v, do), side, mask = _problem(**CASES[0])
    o, lse = oracle.attention_forward(q, k, v, sink=side["sink"], **mask)
    clean = oracle.attention_backward(q, k, v, o, do, lse, **side, **mask)
    pad = torch.zeros(2, 1, 9, dtype=torch.bool)
    pad[1, :, 5:] = True
    junk = lambda t: torch.where(pad[..., None] if t.dim() == 4 else pad, float("nan"), t)  # noqa: E731
    dirty = oracle.attention_backward(q, k, v, junk(o), junk(do), junk(lse), sink=side["sink"],
                                      dlse=junk(side["dlse"]), **mask)
    for a, b in zip(clean, dirty):
        assert torch.equal(a, b)
    assert torch.equal(clean[0][1, :, 5:], torch.zeros_like(clean[0][1, :, 5:]))


def test_packed_is_every_sequence_alone():
    """The packed oracle against the dense oracle on each sequence's tokens (offsets that do not start at 0,
    seqused, tokens past the end), and frost.reference.varlen against the packed oracle."""
    gen = torch.Generator().manual_seed(3)
    lens_q, lens_kv, used_q, used_kv = [2, 5, 0, 4], [3, 6, 2, 0], [2, 3, 0, 4], [3, 6, 1, 0]
    cu_q, cu_kv = cu_seqlens(lens_q), cu_seqlens(lens_kv)
    q, do = (randn_thd(13, 4, d, torch.float64, gen=gen).transpose(0, 1) for d in (8, 8))
    k, v = (randn_thd(12, 2, 8, torch.float64, gen=gen).transpose(0, 1) for _ in range(2))
    side = dict(seqused_q=int32(used_q[1:]), seqused_kv=int32(used_kv[1:]),
                sink=torch.tensor([0.1, 2.0, -1.0, 0.0]), causal=True, alignment="bottom_right", band_left=2)
    o, lse = oracle_packed.attention_forward_varlen(q, k, v, cu_q[1:], cu_kv[1:], **side)   # sequences 1..3
    grads = oracle_packed.attention_backward_varlen(q, k, v, o, do, lse, cu_q[1:], cu_kv[1:], **side)
    assert torch.equal(o[:, :2], torch.zeros_like(o[:, :2])) and torch.equal(lse[:, -2:], torch.full((4, 2), -INF))
    for b in (1, 2, 3):
        rows, keys = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_kv[b]), int(cu_kv[b + 1]))
        mask = dict(causal=True, alignment="bottom_right", band_left=2, seq_len_q=[used_q[b]],
                    seq_len_kv=[used_kv[b]], sink=side["sink"])
        o_b, lse_b = oracle.attention_forward(q[None, :, rows], k[None, :, keys], v[None, :, keys], **mask)
        assert torch.equal(o[:, rows], o_b[0]) and torch.equal(lse[:, rows], lse_b[0])
        g_b = oracle.attention_backward(q[None, :, rows], k[None, :, keys], v[None, :, keys], o_b, do[None, :, rows],
                                        lse_b, **mask)
        assert torch.equal(grads[0][:, rows], g_b[0][0]) and torch.equal(grads[1][:, keys], g_b[1][0])
    want = frost.reference.attention_forward_varlen(q, k, v, cu_q[1:], cu_kv[1:], **side)
    torch.testing.assert_close(o, want[0], rtol=1e-12, atol=1e-12)
    got = frost.reference.attention_backward_varlen(q, k, v, o, do, lse, cu_q[1:], cu_kv[1:], **side)
    for a, b in zip(got, grads):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("options, want", [
    (dict(), dict(causal=False, alignment="top_left", band_left=None, band_right=None, scale=None)),
    (dict(causal=True, window_size=(128, None), causal_alignment="bottom_right", softmax_scale=0.5),
     dict(causal=True, alignment="bottom_right", band_left=128, band_right=None, scale=0.5)),
    (dict(window_size=(-1, 3), deterministic=True), dict(causal=False, band_left=None, band_right=3)),
])
def test_public_options_map_to_the_math(options, want):
    assert oracle_api.mask_options(**options).items() >= want.items()


def test_attention_takes_the_public_layouts():
    """oracle_api.attention (BSHD) and attention_varlen (THD) are the BHSD oracle on transposed views."""
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 6, h, 8, generator=gen, dtype=torch.float64) for h in (4, 2, 2))
    out, lse = oracle_api.attention(q, k, v, causal=True, window_size=(2, None), return_lse=True)
    o, l = oracle.attention_forward(*(t.transpose(1, 2) for t in (q, k, v)), causal=True, band_left=2)
    assert torch.equal(out, o.transpose(1, 2)) and torch.equal(lse, l)
    cu = cu_seqlens([6, 6])
    packed = oracle_api.attention_varlen(*(t.reshape(12, -1, 8) for t in (q, k, v)), cu, cu, 6, 6, causal=True,
                                         window_size=(2, None))
    assert torch.equal(packed, out.reshape(12, 4, 8))
    assert oracle_api.masked_lse_loss(torch.tensor([-INF, 2.0]), torch.tensor([5.0, 3.0])).item() == 6.0

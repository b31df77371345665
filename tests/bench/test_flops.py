"""The FLOP formula behind every TFLOP/s: causal halves, windows count only the band, GQA counts query heads."""

import pytest

from frost.bench.cases import Case, case
from frost.bench.flops import attended_pairs, backward_flops, band_pairs, forward_flops, tflops


def brute_pairs(sq, skv, left, right, bottom_right=False):
    off = skv - sq if bottom_right else 0
    return sum(1 for i in range(sq) for j in range(skv)
               if (left is None or j >= i + off - left) and (right is None or j <= i + off + right))


def test_dense_forward_is_4_b_h_s_s_d_and_backward_2_5x():
    c = case("x", 4, 16, 4096, 128)
    assert forward_flops(c) == 4 * 4 * 16 * 4096 * 4096 * 128
    assert backward_flops(c) == 2.5 * forward_flops(c)


def test_causal_halves():
    assert backward_flops(case("c", 4, 16, 4096, 64, causal=True)) == backward_flops(case("n", 4, 16, 4096, 64)) / 2


def test_gqa_counts_query_heads_not_kv_heads():
    assert forward_flops(case("g", 2, 32, 1024, 128, hkv=8)) == forward_flops(case("m", 2, 32, 1024, 128))


def test_head_dims_average_when_dqk_differs_from_dv():
    c = Case("mla", 1, 1, 1, 64, 64, 192, 128)
    assert forward_flops(c) == 4 * 64 * 64 * 160


def test_window_counts_exactly_the_band():
    s, w = 4096, 128
    c = case("swa", 2, 64, s, 64, hkv=8, causal=True, window=w)
    expected = w * (w + 1) // 2 + (s - w) * w          # rows 0..w-1 see i+1 keys, later rows see w
    assert attended_pairs(c) == expected
    assert forward_flops(c) == 4 * 2 * 64 * 64 * expected


@pytest.mark.parametrize("sq,skv,left,right,br", [
    (7, 7, None, 0, False), (7, 11, None, 0, True), (11, 7, None, 0, True), (9, 9, 3, 0, False),
    (9, 9, 2, 3, False), (5, 9, 1, None, True), (6, 6, None, None, False), (8, 3, 0, 0, False)])
def test_band_pairs_matches_brute_force(sq, skv, left, right, br):
    assert band_pairs(sq, skv, left, right, br) == brute_pairs(sq, skv, left, right, br)


def test_tflops_units():
    assert tflops(2e12, 1000.0) == pytest.approx(2.0)


def test_pass_flops_are_multiples_of_the_forward():
    from frost.bench.flops import PASSES, pass_flops

    c = case("c", 2, 8, 512, 64, causal=True)
    assert {w: pass_flops(c, w) / forward_flops(c) for w in PASSES} == {"backward": 2.5, "forward": 1.0, "step": 3.5}

"""frost.sdpa_forward_varlen / sdpa_backward_varlen / attention_varlen give, for every packed sequence, what the dense
API gives for that sequence alone (frost.attention on its (1, L, H, D) slice), forward and gradients, on CPU."""

from __future__ import annotations

import pytest
import torch

import frost
from frost.lowering import cache_stats
from varlen_cases import Case, assert_matches, dense_expected, make
from helpers.oracle_api import masked_lse_loss
from helpers.summation import assert_same_up_to_summation_order

CASES = {
    "plain": Case(),
    "mha": Case(hq=2, hkv=2),
    "mqa_dv": Case(hq=4, hkv=1, dqk=8, dv=4),
    "causal": Case(options=dict(causal=True)),
    "causal_bottom_right": Case(options=dict(causal=True, causal_alignment="bottom_right")),
    "band_top_left": Case(options=dict(window_size=(2, 1))),
    "band_bottom_right_scale": Case(options=dict(window_size=(3, 0), causal_alignment="bottom_right",
                                                 softmax_scale=0.3)),
    "sink": Case(sink=True, options=dict(causal=True)),
    "seqused": Case(used_q=(3, 0, 7, 1), used_kv=(6, 1, 4, 0), sink=True,
                    options=dict(causal=True, causal_alignment="bottom_right")),
    "seqused_q_only": Case(used_q=(2, 0, 5, 0), options=dict(window_size=(1, 2))),
    "tokens_past_the_end": Case(extra_q=3, extra_kv=2, sink=True, options=dict(causal=True)),
    "kv_empty_rows_see_sink": Case(lens_q=(2, 3), lens_kv=(0, 4), sink=True),
}


def _functional(case: Case, p, lse_layout: str = "head_major") -> dict:
    out, lse = frost.sdpa_forward_varlen(*p.args(), **p.extras(), **case.options)
    lse_in = lse if lse_layout == "head_major" else lse.t().contiguous().t()
    dq, dk, dv, dsink = frost.sdpa_backward_varlen(p.q, p.k, p.v, out, p.dout, lse_in, p.cu_q, p.cu_kv, p.max_q,
                                                   p.max_kv, **p.extras(), **case.options, dlse=p.dlse)
    return dict(out=out, lse=lse, dq=dq, dk=dk, dv=dv, dsink=dsink)


@pytest.mark.parametrize("name", CASES)
def test_functional_matches_the_dense_api_per_sequence(name):
    case = CASES[name]
    p = make(case)
    assert_matches(_functional(case, p), dense_expected(case, p))


@pytest.mark.parametrize("name", CASES)
def test_autograd_matches_the_dense_api_per_sequence(name):
    case = CASES[name]
    p = make(case)
    leaves = [t.clone().requires_grad_() for t in (p.q, p.k, p.v)]
    sink = None if p.sink is None else p.sink.clone().requires_grad_()
    out, lse = frost.attention_varlen(*leaves, p.cu_q, p.cu_kv, p.max_q, p.max_kv, seqused_q=p.seqused_q,
                                      seqused_kv=p.seqused_kv, sink=sink, return_lse=True, **case.options)
    ((out * p.dout).sum() + masked_lse_loss(lse, p.dlse)).backward()
    got = dict(out=out.detach(), lse=lse.detach(), dq=leaves[0].grad, dk=leaves[1].grad, dv=leaves[2].grad,
               dsink=None if sink is None else sink.grad)
    assert_matches(got, dense_expected(case, p))


def test_token_major_lse_gives_the_same_gradients():
    case = CASES["seqused"]
    p = make(case)
    head_major, token_major = _functional(case, p), _functional(case, p, lse_layout="token_major")
    for name in ("dq", "dk", "dv", "dsink"):
        assert_same_up_to_summation_order(head_major[name], token_major[name], name)


def test_non_contiguous_token_strides():
    """q, k, v as slices of one packed qkv buffer (token stride 3·H·D), dout transposed in memory."""
    case = Case(lens_kv=Case().lens_q, hq=2, hkv=2, sink=True, options=dict(causal=True, window_size=(2, None)))
    p = make(case)
    tq, h, d = p.q.shape
    qkv = torch.stack([p.q, p.k, p.v], dim=1)   # (T, 3, H, D): the same lengths on both sides
    q, k, v = qkv.unbind(1)
    dout = p.dout.transpose(0, 1).contiguous().transpose(0, 1)
    assert q.stride(0) == 3 * h * d and not dout.is_contiguous()
    out, lse = frost.sdpa_forward_varlen(q, k, v, p.cu_q, p.cu_kv, p.max_q, p.max_kv, **p.extras(), **case.options)
    dq, dk, dv, dsink = frost.sdpa_backward_varlen(q, k, v, out, dout, lse, p.cu_q, p.cu_kv, p.max_q, p.max_kv,
                                                   **p.extras(), **case.options, dlse=p.dlse)
    assert_matches(dict(out=out, lse=lse, dq=dq, dk=dk, dv=dv, dsink=dsink), dense_expected(case, p))


def test_tokens_past_the_end_get_zeros():
    case = CASES["tokens_past_the_end"]
    p = make(case)
    got = _functional(case, p)
    end_q, end_kv = int(p.cu_q[-1]), int(p.cu_kv[-1])
    assert got["out"][end_q:].eq(0).all() and got["lse"][:, end_q:].eq(float("-inf")).all()
    assert got["dq"][end_q:].eq(0).all() and got["dk"][end_kv:].eq(0).all() and got["dv"][end_kv:].eq(0).all()
    assert got["dq"][:end_q].abs().sum() > 0   # the rest is computed


def test_padding_inside_a_segment_gets_zeros():
    case = CASES["seqused"]
    p = make(case)
    got = _functional(case, p)
    for b, used in enumerate(case.used_q):
        pad = slice(int(p.cu_q[b]) + used, int(p.cu_q[b + 1]))
        assert got["out"][pad].eq(0).all() and got["dq"][pad].eq(0).all()
        assert got["lse"][:, pad].eq(float("-inf")).all()
    for b, used in enumerate(case.used_kv):
        pad = slice(int(p.cu_kv[b]) + used, int(p.cu_kv[b + 1]))
        assert got["dk"][pad].eq(0).all() and got["dv"][pad].eq(0).all()


def test_new_boundaries_with_the_same_metadata_reuse_the_plan():
    """The plan key is the tensors' metadata and the max_seqlen, not the cu_seqlens values."""
    p = make(Case(lens_q=(4, 4), lens_kv=(4, 4)))
    frost.sdpa_forward_varlen(*p.args())
    moved = torch.tensor([0, 3, 8], dtype=torch.int32)   # same B and T, other boundaries, the same longest (5)
    before = cache_stats()
    frost.sdpa_forward_varlen(p.q, p.k, p.v, moved, moved, 5, 5)
    out, _ = frost.sdpa_forward_varlen(p.q, p.k, p.v, moved, moved, 5, 5)
    delta = cache_stats() - before
    assert (delta.misses, delta.hits) == (1, 1)   # max_seqlen 5 is a new key (4 before); then a hit
    want = frost.attention(p.q[3:8][None], p.k[3:8][None], p.v[3:8][None])[0]
    torch.testing.assert_close(out[3:8], want)


@pytest.mark.parametrize("lens_q, lens_kv, extra_q", [((), (), 0), ((0, 0), (0, 0), 2), ((0, 0), (0, 3), 0),
                                                       ((2, 3), (0, 0), 1)])
def test_problems_with_nothing_to_compute(lens_q, lens_kv, extra_q):
    """No sequence, no query or no key at all: zero gradients but dsink (lse = the sink where a row sees no key)."""
    case = Case(lens_q=lens_q, lens_kv=lens_kv, extra_q=extra_q, sink=True)
    p = make(case)
    got = _functional(case, p)
    assert_matches(got, dense_expected(case, p))
    assert got["dq"].eq(0).all() and got["dk"].eq(0).all() and got["dv"].eq(0).all()


def test_exported():
    from frost.api.functional import sdpa_backward_varlen, sdpa_forward_varlen
    from frost.api.autograd import attention_varlen

    assert frost.sdpa_forward_varlen is sdpa_forward_varlen and frost.sdpa_backward_varlen is sdpa_backward_varlen
    assert frost.attention_varlen is attention_varlen
    assert {"sdpa_forward_varlen", "sdpa_backward_varlen", "attention_varlen"} <= set(frost.__all__)

"""frost.reference.varlen against the dense reference on a padded batch of the same sequences: O, LSE, dQ, dK, dV and
dSink agree sequence by sequence (fp64: to rounding; bf16: under the FA rule), whatever the mask, alignment, GQA,
sink, seqused or empty sequences; tokens past cu[-1] hold NaN and are never read; token-major LSE reads alike."""

from __future__ import annotations

import pytest
import torch

import frost.reference
from frost.errors import TensorError
from frost.reference import attention_backward_varlen, attention_forward_varlen
from helpers import oracle
from helpers.fa_rule import fa_rule
from helpers.summation import assert_same_up_to_summation_order
from packed_twins import Twin, make_twin

SEG_Q = [5, 0, 1, 13, 7, 2]
SEG_KV = [9, 4, 0, 13, 3, 0]
MASKS = {
    "full": dict(),
    "causal": dict(causal=True),
    "causal_bottom_right": dict(causal=True, alignment="bottom_right"),
    "band": dict(band_left=3, band_right=2),
    "band_bottom_right": dict(band_left=2, band_right=1, alignment="bottom_right"),
    "window_causal": dict(band_left=4, causal=True, alignment="bottom_right"),
}
FP64 = dict(rtol=1e-12, atol=1e-12)


def run_packed(t: Twin, mask: dict) -> dict:
    p = t.packed
    lens = dict(seqused_q=p["seqused_q"], seqused_kv=p["seqused_kv"], sink=p["sink"])
    o, lse = attention_forward_varlen(p["q"], p["k"], p["v"], p["cu_q"], p["cu_kv"], **lens, **mask)
    out = {"o": o.clone(), "lse": lse.clone()}
    end = t.off_q[-1]
    o[:, end:], lse[:, end:] = float("nan"), float("nan")   # the backward never reads past cu[-1] either
    grads = attention_backward_varlen(p["q"], p["k"], p["v"], o, p["do"], lse, p["cu_q"], p["cu_kv"],
                                      dlse=p.get("dlse"), **lens, **mask)
    return {**out, **dict(zip(("dq", "dk", "dv", "dsink"), grads))}


def run_dense(t: Twin, mask: dict, engine=frost.reference) -> dict:
    """The dense padded twin through `engine` (frost.reference, or the fp64 oracle helpers.oracle)."""
    d = t.dense
    lens = dict(seq_len_q=d["seq_len_q"], seq_len_kv=d["seq_len_kv"], sink=d["sink"])
    o, lse = engine.attention_forward(d["q"], d["k"], d["v"], **lens, **mask)
    grads = engine.attention_backward(d["q"], d["k"], d["v"], o, d["do"], lse, dlse=d.get("dlse"), **lens, **mask)
    return {"o": o, "lse": lse, **dict(zip(("dq", "dk", "dv", "dsink"), grads))}


def per_sequence(t: Twin, packed: dict, *dense: dict):
    """(name, packed slice, dense slices...) for every output of every sequence, then dsink."""
    for b in range(len(t.seg_q)):
        q0, q1, k0, k1 = t.off_q[b], t.off_q[b + 1], t.off_kv[b], t.off_kv[b + 1]
        for name, lo, hi in (("o", q0, q1), ("lse", q0, q1), ("dq", q0, q1), ("dk", k0, k1), ("dv", k0, k1)):
            yield (f"{name}[seq {b}]", packed[name][:, lo:hi], *(d[name][b, :, :hi - lo] for d in dense))
    if packed["dsink"] is not None:
        yield ("dsink", packed["dsink"], *(d["dsink"] for d in dense))


def assert_past_the_end_is_empty(t: Twin, packed: dict) -> None:
    """O = 0, LSE = -inf and zero gradients on tokens past cu[-1]; NaN nowhere."""
    q_end, kv_end = t.off_q[-1], t.off_kv[-1]
    assert torch.all(packed["o"][:, q_end:] == 0) and torch.all(packed["lse"][:, q_end:] == float("-inf"))
    for name, end in (("dq", q_end), ("dk", kv_end), ("dv", kv_end)):
        assert torch.all(packed[name][:, end:] == 0), name
    for name, x in packed.items():
        assert x is None or not torch.isnan(x).any(), name


@pytest.mark.parametrize("mask", MASKS.values(), ids=MASKS.keys())
@pytest.mark.parametrize("heads_kv, sink, dlse", [(4, False, False), (2, True, False), (1, True, True)],
                         ids=["mha", "gqa-sink", "mqa-sink-dlse"])
def test_packed_equals_the_dense_padded_batch(mask, heads_kv, sink, dlse):
    t = make_twin(SEG_Q, SEG_KV, heads_kv=heads_kv, sink=sink, dlse=dlse)
    packed, dense = run_packed(t, mask), run_dense(t, mask)
    for name, got, want in per_sequence(t, packed, dense):
        torch.testing.assert_close(got, want, **FP64, msg=lambda m: f"{name}: {m}")
    assert_past_the_end_is_empty(t, packed)


@pytest.mark.parametrize("mask", [MASKS["causal_bottom_right"], MASKS["band"], MASKS["full"]],
                         ids=["causal_bottom_right", "band", "full"])
def test_seqused_pads_inside_each_segment(mask):
    """Valid tokens at the start of each segment; the rest is padding: O = 0, LSE = -inf, exact zero gradients,
    and bottom-right alignment uses the seqused lengths."""
    used_q, used_kv = [3, 0, 1, 10, 7, 0], [9, 2, 0, 11, 1, 0]
    t = make_twin(SEG_Q, SEG_KV, used_q=used_q, used_kv=used_kv, sink=True, dlse=True, seed=1)
    packed, dense = run_packed(t, mask), run_dense(t, mask)
    for name, got, want in per_sequence(t, packed, dense):
        torch.testing.assert_close(got, want, **FP64, msg=lambda m: f"{name}: {m}")
    for b, (uq, ukv) in enumerate(zip(used_q, used_kv)):
        pad_q = slice(t.off_q[b] + uq, t.off_q[b + 1])
        pad_kv = slice(t.off_kv[b] + ukv, t.off_kv[b + 1])
        assert torch.all(packed["o"][:, pad_q] == 0) and torch.all(packed["lse"][:, pad_q] == float("-inf"))
        assert torch.all(packed["dq"][:, pad_q] == 0)
        assert torch.all(packed["dk"][:, pad_kv] == 0) and torch.all(packed["dv"][:, pad_kv] == 0)
    assert_past_the_end_is_empty(t, packed)


def test_dsink_sums_over_every_sequence():
    """The batch's dsink is the sum of each sequence's alone (offsets that need not start at 0), and a sequence that
    sees no key still adds to it (its rows put all their weight on the sink)."""
    t = make_twin([4, 3], [0, 5], sink=True, dlse=True, seed=2)
    p = t.packed
    o, lse = attention_forward_varlen(p["q"], p["k"], p["v"], p["cu_q"], p["cu_kv"], sink=p["sink"])
    args, kw = (p["q"], p["k"], p["v"], o, p["do"], lse), dict(sink=p["sink"], dlse=p["dlse"])
    whole = attention_backward_varlen(*args, p["cu_q"], p["cu_kv"], **kw)[3]
    parts = [attention_backward_varlen(*args, p["cu_q"][b:b + 2], p["cu_kv"][b:b + 2], **kw)[3] for b in range(2)]
    assert parts[0].abs().min() > 0
    torch.testing.assert_close(whole, parts[0] + parts[1], **FP64)


def test_token_major_lse_reads_like_head_major():
    t = make_twin(SEG_Q, SEG_KV, sink=True, dlse=True, seed=3)
    p = t.packed
    o, lse = attention_forward_varlen(p["q"], p["k"], p["v"], p["cu_q"], p["cu_kv"], sink=p["sink"], causal=True)
    token_major = lambda x: x.t().contiguous().t()  # noqa: E731  -- (T, H) memory, (H, T) view
    args = (p["q"], p["k"], p["v"], o, p["do"])
    kw = dict(sink=p["sink"], causal=True)
    head = attention_backward_varlen(*args, lse, p["cu_q"], p["cu_kv"], dlse=p["dlse"], **kw)
    token = attention_backward_varlen(*args, token_major(lse), p["cu_q"], p["cu_kv"], dlse=token_major(p["dlse"]),
                                      **kw)
    assert token_major(lse).stride() == (1, lse.shape[0])
    for name, a, b in zip(("dq", "dk", "dv", "dsink"), head, token):
        assert_same_up_to_summation_order(a, b, name)


def test_outputs_keep_the_inputs_memory_order():
    t = make_twin(SEG_Q, SEG_KV, seed=4)
    p = t.packed
    o, lse = attention_forward_varlen(p["q"], p["k"], p["v"], p["cu_q"], p["cu_kv"])
    assert o.stride() == (o.shape[2], o.shape[0] * o.shape[2], 1)        # packed THD like q
    assert lse.stride() == (lse.shape[1], 1) and lse.dtype == torch.float64
    head_major_q = p["q"].contiguous()
    dq, dk, *_ = attention_backward_varlen(head_major_q, p["k"], p["v"], o, p["do"], lse, p["cu_q"], p["cu_kv"])
    assert dq.stride() == head_major_q.stride() and dk.stride() == p["k"].stride()


def test_bf16_packed_meets_the_fa_rule_against_the_dense_fp64_oracle():
    """The packed bf16 reference is as accurate as the dense bf16 reference on the same sequences: its error against
    the fp64 oracle (run on the dense twin) is at most twice the dense bf16 one's plus 1e-5."""
    mask = MASKS["window_causal"]
    low = make_twin(SEG_Q, SEG_KV, dtype=torch.bfloat16, sink=True, dlse=True, seed=5)
    packed, dense_low, exact = run_packed(low, mask), run_dense(low, mask), run_dense(low, mask, oracle)
    failed, report = [], []
    for name, got, lowp, want in per_sequence(low, packed, dense_low, exact):
        fa_rule(name, got, want, lowp, failed, report, floor=0.0, noise_scale=0.0, atol=1e-5)
    assert not failed, failed


BAD = [  # (subject, how to break the arguments of attention_backward_varlen)
    ("cu_q", lambda a: a.update(cu_q=torch.tensor([0, 5, 3, 30], dtype=torch.int32))),     # decreasing
    ("cu_q", lambda a: a.update(cu_q=torch.tensor([0, 5, 9, 10_000], dtype=torch.int32))),  # past the tokens
    ("cu_kv.shape", lambda a: a.update(cu_kv=a["cu_kv"][:-1])),
    ("cu_q.dtype", lambda a: a.update(cu_q=a["cu_q"].float())),
    ("cu_q.shape", lambda a: a.update(cu_q=a["cu_q"][None])),
    ("seqused_q", lambda a: a.update(seqused_q=torch.tensor([6, 0, 1, 13, 7, 2], dtype=torch.int32))),
    ("seqused_kv.shape", lambda a: a.update(seqused_kv=torch.zeros(2, dtype=torch.int32))),
    ("q.shape", lambda a: a.update(q=a["q"][None])),
    ("k.shape[1]", lambda a: a.update(k=a["k"][:1].expand(3, -1, -1), v=a["v"][:1].expand(3, -1, -1))),
    ("lse.shape", lambda a: a.update(lse=a["lse"][:, :-1])),
    ("do.shape", lambda a: a.update(do=a["do"][:, :-1])),
    ("lse.dtype", lambda a: a.update(lse=a["lse"].half())),
    ("alignment", lambda a: a.update(alignment="bottom-right")),
]


@pytest.mark.parametrize("subject, breaks", BAD, ids=[f"{s}-{i}" for i, (s, _) in enumerate(BAD)])
def test_rejects_obviously_wrong_inputs(subject, breaks):
    t = make_twin(SEG_Q, SEG_KV, seed=6)
    p = t.packed
    o, lse = attention_forward_varlen(p["q"], p["k"], p["v"], p["cu_q"], p["cu_kv"])
    args = dict(q=p["q"], k=p["k"], v=p["v"], o=o, do=p["do"], lse=lse, cu_q=p["cu_q"], cu_kv=p["cu_kv"])
    attention_backward_varlen(**args)   # the unbroken call works
    breaks(args)
    with pytest.raises(TensorError) as info:
        attention_backward_varlen(**args)
    assert str(info.value).startswith(f"{subject}: got"), str(info.value)


def test_an_empty_batch_is_all_padding():
    t = make_twin([0, 0], [0, 3], sink=True, seed=7)
    packed = run_packed(t, {})
    assert torch.all(packed["o"] == 0) and torch.all(packed["lse"] == float("-inf"))
    assert all(torch.all(packed[n] == 0) for n in ("dq", "dk", "dv", "dsink"))

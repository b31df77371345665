"""Non-finite inputs follow the math (README, "Non-finite inputs"): a NaN or ±inf in one input makes NaN exactly the
outputs and gradients whose formula reads it, and nothing else; sink = +inf puts all weight on the sink, -inf is
no sink, NaN makes its head's rows NaN. Each case asserts the whole pattern of O, LSE, dQ, dK, dV and dSink
(nonfinite_cases.check) through frost.reference and through frost.attention's autograd path on the CPU, on a
problem whose masks matter: GQA (G = 2), a causal window, padded rows and keys, a valid row that sees no key, a
valid key that no row sees, and a sink."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import frost
import frost.reference as ref
from nonfinite_cases import INF, NAN, Geometry, check, column
from packed_twins import make_twin
from reference_cases import Case
from strategies_reference import make_case

# Batch 0: 7 rows, 9 keys, row i sees keys [i - 2, i] (keys 7, 8 are valid but seen by no row).
# Batch 1: 6 valid rows of 7, 3 valid keys of 9: row 5 sees no key, row 6 and keys 3.. are padding.
MASK = dict(causal=True, band_left=2, seq_len_q=[7, 6], seq_len_kv=[9, 3])
SINK = [0.5, -1.0, 2.0, 0.0]
ROWS = {"sees keys": (0, 1, 4), "sees no key": (1, 2, 5), "padded": (1, 3, 6)}       # (b, h, i)
KEYS = {"seen": (0, 0, 3), "seen by no row": (0, 1, 8), "padded": (1, 1, 5)}         # (b, kv, j)


def base(sink=SINK, seed: int = 11) -> Case:
    return make_case(2, 4, 2, 7, 9, 8, 6, seed=seed, sink=sink, **MASK)


def with_value(case: Case, name: str, at: tuple, value: float) -> Case:
    """The case with one element of q, k, v or dO (BHSD index `at`) or of the sink set to `value`."""
    t = getattr(case, name).clone()
    t[at] = value
    return dataclasses.replace(case, **{name: t})


def reference(case: Case) -> dict:
    """frost.reference forward then backward (three-row blocks, so rows of one case meet in different blocks)."""
    kw = case.kwargs()
    o, lse = ref.attention_forward(case.q, case.k, case.v, **kw, block_rows=3)
    grads = ref.attention_backward(case.q, case.k, case.v, o, case.do, lse, **kw, block_rows=3)
    return dict(o=o, lse=lse, **dict(zip(("dq", "dk", "dv", "dsink"), grads)))


def public(case: Case) -> dict:
    """frost.attention (BSHD, fp32 sink) and torch.autograd on the CPU, back in BHSD."""
    q, k, v = (t.transpose(1, 2).contiguous().requires_grad_() for t in (case.q, case.k, case.v))
    sink = None if case.sink is None else case.sink.float().requires_grad_()
    lens = {n: torch.tensor(x, dtype=torch.int32) for n, x in (("seq_len_q", case.seq_len_q),
                                                                  ("seq_len_kv", case.seq_len_kv)) if x is not None}
    o, lse = frost.attention(q, k, v, causal=case.causal, window_size=(case.band_left, case.band_right),
                             causal_alignment=case.alignment, sink=sink, return_lse=True, **lens)
    o.backward(case.do.transpose(1, 2))
    bhsd = lambda t: t.transpose(1, 2)  # noqa: E731
    return dict(o=bhsd(o.detach()), lse=lse.detach(), dq=bhsd(q.grad), dk=bhsd(k.grad), dv=bhsd(v.grad),
                dsink=None if sink is None else sink.grad)


ENGINES = pytest.mark.parametrize("run", [reference, public], ids=["reference", "frost.attention"])
# fp32 LSE and sink on the public path: its values agree with the clean run to fp32 rounding
CLOSE = {reference: dict(rtol=1e-12, atol=1e-12), public: dict(rtol=1e-5, atol=1e-8)}


@ENGINES
@pytest.mark.parametrize("where", ROWS.values(), ids=ROWS.keys())
def test_nan_in_q(run, where) -> None:
    """A NaN in q[b, h, i]: that row's O, LSE and dQ, the dK and dV of the keys it attends and dsink[h]; nothing
    if the row attends no key or is padding."""
    case, g = base(), Geometry.of(base())
    r = g.row(*where) & g.has_key
    got = run(with_value(case, "q", (*where, 2), NAN))
    check(got, run(case), nan=dict(o=r, lse=r, dq=r, dk=g.keys_of(r), dv=g.keys_of(r), dsink=g.heads_of(r)),
          **CLOSE[run])


@ENGINES
@pytest.mark.parametrize("where", KEYS.values(), ids=KEYS.keys())
def test_nan_in_k(run, where) -> None:
    """A NaN in k[b, kv, j]: every row that attends key j gets a NaN LSE, O and dQ; the keys those rows attend get
    NaN dK and dV; their heads a NaN dsink. A key no row attends, or a padded one, changes nothing."""
    case, g = base(), Geometry.of(base())
    r = g.rows_of(g.key(*where))
    got = run(with_value(case, "k", (*where, 5), NAN))
    check(got, run(case), nan=dict(o=r, lse=r, dq=r, dk=g.keys_of(r), dv=g.keys_of(r), dsink=g.heads_of(r)),
          **CLOSE[run])


@ENGINES
@pytest.mark.parametrize("where", KEYS.values(), ids=KEYS.keys())
def test_nan_in_v(run, where) -> None:
    """A NaN in v[b, kv, j, d]: column d of O in the rows that attend key j (LSE stays finite), their whole dQ
    (through delta), the dK of the keys they attend and their heads' dsink; dV stays finite everywhere."""
    case, g = base(), Geometry.of(base())
    r = g.rows_of(g.key(*where))
    got = run(with_value(case, "v", (*where, 3), NAN))
    check(got, run(case), nan=dict(o=column(r, got["o"], 3), dq=r, dk=g.keys_of(r), dsink=g.heads_of(r)),
          **CLOSE[run])


@ENGINES
@pytest.mark.parametrize("where", ROWS.values(), ids=ROWS.keys())
def test_nan_in_do(run, where) -> None:
    """A NaN in dO[b, h, i, d]: column d of dV for the keys the row attends, the row's dQ, those keys' dK, and
    dsink[h] (delta_i = dO_i . O_i reads it even where O_i = 0: a valid row that sees no key still makes dsink NaN);
    a padded row changes nothing."""
    case, g = base(), Geometry.of(base())
    r = g.row(*where) & g.valid
    keys = g.keys_of(r)
    got = run(with_value(case, "do", (*where, 1), NAN))
    check(got, run(case), nan=dict(dv=column(keys, got["dv"], 1), dq=r & g.has_key, dk=keys, dsink=g.heads_of(r)),
          **CLOSE[run])


def _head(h: int, hq: int = 4) -> torch.Tensor:
    out = torch.zeros(hq, dtype=torch.bool)
    out[h] = True
    return out


@ENGINES
def test_sink_pos_inf_takes_all_the_weight(run) -> None:
    """sink[h] = +inf: head h's valid rows get LSE = +inf and O = 0 (the limit), its dQ is exactly 0 and it adds
    nothing to dK, dV (what a head with dO = 0 adds); dsink[h] = 0. Other heads are untouched."""
    case, g = base(), Geometry.of(base())
    h = 2
    got = run(with_value(case, "sink", (h,), INF))
    do = case.do.clone()
    do[:, h] = 0.0
    clean = run(dataclasses.replace(with_value(case, "sink", (h,), 0.0), do=do))
    rows = g.head_rows(h)
    every_row = torch.zeros_like(rows)
    every_row[:, h] = True
    check(got, clean, posinf=dict(lse=rows), zero=dict(o=rows, dq=every_row, dsink=_head(h)), **CLOSE[run])


def test_sink_pos_inf_weight_is_one_in_dsink() -> None:
    """With a gradient on LSE, dsink[h] = sum of dlse over head h's valid rows: d LSE / d sink = exp(sink - LSE)
    is 1 at sink = LSE = +inf (the limit, not inf - inf)."""
    case = with_value(base(), "sink", (2,), INF)
    kw = case.kwargs()
    o, lse = ref.attention_forward(case.q, case.k, case.v, **kw)
    dlse = torch.randn(lse.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    dq, dk, dv, dsink = ref.attention_backward(case.q, case.k, case.v, o, case.do, lse, dlse=dlse, **kw)
    rows = Geometry.of(case).valid[:, 2]
    torch.testing.assert_close(dsink[2], dlse[:, 2][rows].sum(), rtol=1e-12, atol=1e-12)
    assert torch.isfinite(dsink).all() and (dq[:, 2] == 0).all()


@ENGINES
def test_sink_neg_inf_is_no_sink(run) -> None:
    """sink = -inf on every head: O, LSE, dQ, dK, dV are exactly those without a sink (a row that sees no key keeps
    LSE = -inf), and dsink = 0, not NaN (the weight exp(-inf - LSE) is 0 even where LSE = -inf)."""
    case = base()
    got = run(dataclasses.replace(case, sink=torch.full((4,), -INF, dtype=torch.float64)))
    want = run(dataclasses.replace(case, sink=None))
    for name in ("o", "lse", "dq", "dk", "dv"):
        assert torch.equal(got[name], want[name]), name
    assert torch.all(got["dsink"] == 0)
    assert got["lse"][1, :, 5].eq(-INF).all(), "batch 1 row 5 sees no key"


@ENGINES
def test_sink_nan_makes_its_head_nan(run) -> None:
    """sink[h] = NaN: every valid row of head h has LSE = NaN; those that attend a key get NaN O and dQ (a row that
    sees none keeps O = 0 and dQ = 0: its sums are empty); the keys head h attends get NaN dK and dV; dsink[h] is
    NaN. Other heads are untouched."""
    case, g = base(), Geometry.of(base())
    h = 2
    rows = g.head_rows(h)
    keyed = rows & g.has_key
    assert (rows & ~g.has_key).any(), "the case holds a row of head h that sees no key"
    got = run(with_value(case, "sink", (h,), NAN))
    check(got, run(with_value(case, "sink", (h,), 0.0)),
          nan=dict(lse=rows, o=keyed, dq=keyed, dk=g.keys_of(keyed), dv=g.keys_of(keyed), dsink=_head(h)),
          zero=dict(o=rows & ~g.has_key, dq=rows & ~g.has_key), **CLOSE[run])


def _inf_key_case(d: int = 4) -> tuple[Case, Case, Geometry, torch.Tensor, torch.Tensor]:
    """(the case with k[0, 0, 3, d] = +inf, the same with k finite, geometry, rows scoring +inf, rows scoring -inf):
    heads 0 and 1 read kv head 0; rows 3..5 of batch 0 attend key 3, with q[.., d] > 0 on head 0 and < 0 on head
    1."""
    case = base()
    q = case.q.clone()
    q[0, 0, 3:6, d] = q[0, 0, 3:6, d].abs() + 0.1
    q[0, 1, 3:6, d] = -(q[0, 1, 3:6, d].abs() + 0.1)
    case = dataclasses.replace(case, q=q)
    g = Geometry.of(case)
    seen_by = g.rows_of(g.key(0, 0, 3))
    up, down = seen_by.clone(), seen_by.clone()
    up[:, 1], down[:, 0] = False, False
    assert up.sum() == 3 and down.sum() == 3
    return with_value(case, "k", (0, 0, 3, d), INF), case, g, up, down


@ENGINES
def test_inf_in_k(run) -> None:
    """k[b, kv, j, d] = +inf, as in torch: a row whose score is +inf gets LSE = +inf, P_ij = exp(inf - inf) = NaN,
    so NaN O, dQ, dsink and NaN dK for every key it attends, and NaN dV for key j; a row whose score is -inf gives
    key j the weight 0 (finite O and LSE), but its dQ reads K_j: column d is 0 * inf = NaN."""
    d = 4
    case, clean, g, up, down = _inf_key_case(d)
    got = run(case)
    key = g.key(0, 0, 3)
    dq_down = column(down, got["dq"], d)
    check(got, run(clean),
          nan=dict(o=up, dq=up[..., None].expand(got["dq"].shape) | dq_down, dk=g.keys_of(up), dv=key,
                   dsink=g.heads_of(up)),
          posinf=dict(lse=up),
          free=dict(o=down, lse=down, dq=down[..., None].expand(got["dq"].shape) & ~dq_down,
                    dk=g.keys_of(down) & ~g.keys_of(up), dv=g.keys_of(down) & ~key,
                    dsink=g.heads_of(down) & ~g.heads_of(up)), **CLOSE[run])


# ---------------------------------------------------------------------------------------------- against torch SDPA
def torch_sdpa(case: Case) -> dict:
    """torch's math SDPA in fp64 with autograd (GQA by enable_gqa), no sink, no lengths."""
    q, k, v = (t.clone().requires_grad_() for t in (case.q, case.k, case.v))
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=case.causal, enable_gqa=True)
    o.backward(case.do)
    return dict(o=o.detach(), dq=q.grad, dk=k.grad, dv=v.grad)


TORCH_CASES = {"nan q": ("q", (0, 1, 4, 2), NAN), "nan k": ("k", (0, 0, 3, 5), NAN),
               "nan v": ("v", (0, 1, 2, 3), NAN), "nan dO": ("do", (1, 3, 5, 1), NAN),
               "+inf k": ("k", (0, 1, 6, 0), INF), "-inf k": ("k", (1, 0, 2, 7), -INF)}


@pytest.mark.parametrize("name, at, value", TORCH_CASES.values(), ids=TORCH_CASES.keys())
def test_matches_torch_sdpa_without_a_mask(name, at, value) -> None:
    """Where every row attends every key, torch's math backend gives the same NaN and inf entries and the same
    values elsewhere, with one difference: in a row with a +inf score torch normalises by a NaN sum, so its whole P
    row is NaN and so is dV of every key; frost's P_ij' = exp(s_ij' - inf) = 0 for the other keys, leaving NaN in dV
    only for the key that scored +inf (O, dQ and dK are NaN alike through delta)."""
    case = with_value(make_case(2, 4, 2, 7, 9, 8, 6, seed=5), name, at, value)
    got, want = reference(case), torch_sdpa(case)
    assert not torch.isfinite(got["dq"]).all(), "the case reaches dQ"
    infinite_score = name in ("k",) and value in (INF, -INF)
    for out in ("o", "dq", "dk") + (() if infinite_score else ("dv",)):
        torch.testing.assert_close(got[out], want[out], rtol=1e-12, atol=1e-12, equal_nan=True,
                                   msg=lambda m: f"{out}: {m}")
    if infinite_score:
        b, kv, j, _ = at
        nan_keys = torch.isnan(got["dv"]).any(-1)
        assert nan_keys.nonzero().tolist() == [[b, kv, j]]
        assert torch.isnan(want["dv"][b, kv]).all(), "torch: every key of the +inf rows"
        fine = ~torch.isnan(want["dv"])
        torch.testing.assert_close(got["dv"][fine], want["dv"][fine], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, at, value", TORCH_CASES.values(), ids=TORCH_CASES.keys())
def test_masked_entries_read_nothing_unlike_torch(name, at, value) -> None:
    """With a causal mask torch multiplies masked P = 0 by a NaN (or adds the mask's -inf to a +inf score), so its
    NaN spread to rows and keys the formula does not read; frost's never do. Every entry non-finite here is
    non-finite in torch too, and entries finite in both agree."""
    case = with_value(make_case(2, 4, 2, 8, 8, 8, 6, seed=6, causal=True), name, at, value)
    got, want = reference(case), torch_sdpa(case)
    spread = 0
    for out in ("o", "dq", "dk", "dv"):
        bad_here, bad_there = ~torch.isfinite(got[out]), ~torch.isfinite(want[out])
        assert not (bad_here & ~bad_there).any(), f"{out}: non-finite where torch is finite"
        both = ~bad_here & ~bad_there
        torch.testing.assert_close(got[out][both], want[out][both], rtol=1e-12, atol=1e-12)
        spread += int((bad_there & ~bad_here).sum())
    assert spread > 0, "torch reads a masked entry in this case"


# ---------------------------------------------------------------------------------------------- packed sequences
SEG_Q, SEG_KV = [5, 0, 3, 6], [6, 2, 0, 5]
VARLEN_MASK = dict(band_left=2, causal=True, alignment="bottom_right")
VARLEN_CASES = {"nan q": ("q", 0, (1, 3, 2), NAN), "nan k": ("k", 3, (0, 2, 1), NAN),
                "nan v": ("v", 0, (1, 4, 0), NAN), "nan dO": ("do", 3, (2, 5, 3), NAN),
                "+inf k": ("k", 3, (1, 4, 2), INF), "sink +inf": ("sink", None, (1,), INF),
                "sink -inf": ("sink", None, (2,), -INF), "sink nan": ("sink", None, (3,), NAN)}


def _twin(name: str, seq: int | None, at: tuple, value: float):
    """A packed twin (reference/packed_twins.py) with one value set alike in its packed and dense forms: token
    at[1] of sequence `seq` for q, k, v, dO; or sink[at[0]]."""
    t = make_twin(SEG_Q, SEG_KV, heads_q=4, heads_kv=2, dim=8, dim_v=8, sink=True, seed=7)
    if name == "sink":
        t.packed["sink"][at] = value   # (the dense form shares the tensor)
    else:
        off = (t.off_q if name in ("q", "do") else t.off_kv)[seq]
        h, tok, d = at
        t.packed[name][h, off + tok, d] = value
        t.dense[name][seq, h, tok, d] = value
    return t


def _run_packed(t, mask: dict) -> dict:
    p = t.packed
    kw = dict(sink=p["sink"], **mask)
    o, lse = ref.attention_forward_varlen(p["q"], p["k"], p["v"], p["cu_q"], p["cu_kv"], **kw)
    grads = ref.attention_backward_varlen(p["q"], p["k"], p["v"], o, p["do"], lse, p["cu_q"], p["cu_kv"], **kw)
    return dict(o=o, lse=lse, **dict(zip(("dq", "dk", "dv", "dsink"), grads)))


def _run_dense(t, mask: dict) -> dict:
    d = t.dense
    kw = dict(seq_len_q=d["seq_len_q"], seq_len_kv=d["seq_len_kv"], sink=d["sink"], **mask)
    o, lse = ref.attention_forward(d["q"], d["k"], d["v"], **kw)
    grads = ref.attention_backward(d["q"], d["k"], d["v"], o, d["do"], lse, **kw)
    return dict(o=o, lse=lse, **dict(zip(("dq", "dk", "dv", "dsink"), grads)))


def _run_public_varlen(t, mask: dict) -> dict:
    """frost.attention_varlen on the packed twin (token-major, fp64) with torch.autograd."""
    p = t.packed
    q, k, v = (p[n].transpose(0, 1).detach().clone().requires_grad_() for n in ("q", "k", "v"))
    sink = p["sink"].clone().requires_grad_()
    o, lse = frost.attention_varlen(q, k, v, p["cu_q"], p["cu_kv"], max(SEG_Q), max(SEG_KV), sink=sink,
                                    causal=mask["causal"], window_size=(mask["band_left"], None),
                                    causal_alignment=mask["alignment"], return_lse=True)
    o.backward(p["do"].transpose(0, 1))
    return dict(o=o.detach().transpose(0, 1), lse=lse.detach(), dq=q.grad.transpose(0, 1), dk=k.grad.transpose(0, 1),
                dv=v.grad.transpose(0, 1), dsink=sink.grad)


@pytest.mark.parametrize("name, seq, at, value", VARLEN_CASES.values(), ids=VARLEN_CASES.keys())
def test_packed_follow_the_dense_contract(name, seq, at, value) -> None:
    """Packed sequences (frost.reference.varlen and frost.attention_varlen) give, sequence by sequence, exactly the
    dense reference's pattern on the padded batch of the same sequences (the tests above pin that one down); tokens
    past cu[-1] (NaN in the twin) stay unread: O = 0, LSE = -inf, zero gradients."""
    t = _twin(name, seq, at, value)
    packed, dense, public = _run_packed(t, VARLEN_MASK), _run_dense(t, VARLEN_MASK), _run_public_varlen(t, VARLEN_MASK)
    assert any(not torch.isfinite(x).all() for x in packed.values()), "the value reaches some output"
    for b in range(len(SEG_Q)):
        q0, q1, k0, k1 = t.off_q[b], t.off_q[b + 1], t.off_kv[b], t.off_kv[b + 1]
        for out, lo, hi in (("o", q0, q1), ("lse", q0, q1), ("dq", q0, q1), ("dk", k0, k1), ("dv", k0, k1)):
            torch.testing.assert_close(packed[out][:, lo:hi], dense[out][b, :, :hi - lo], rtol=1e-12, atol=1e-12,
                                       equal_nan=True, msg=lambda m: f"{out}[seq {b}]: {m}")
    torch.testing.assert_close(packed["dsink"], dense["dsink"], rtol=1e-12, atol=1e-12, equal_nan=True)
    for out in ("o", "lse", "dq", "dk", "dv", "dsink"):
        torch.testing.assert_close(public[out], packed[out], rtol=1e-5, atol=1e-8, equal_nan=True,
                                   check_dtype=False, msg=lambda m: f"frost.attention_varlen {out}: {m}")
    q_end, kv_end = t.off_q[-1], t.off_kv[-1]
    if seq is not None:   # one sequence's value stays in that sequence
        others = [b for b in range(len(SEG_Q)) if b != seq]
        for b in others:
            for out, off in (("o", t.off_q), ("lse", t.off_q), ("dq", t.off_q), ("dk", t.off_kv), ("dv", t.off_kv)):
                assert torch.isfinite(packed[out][:, off[b]:off[b + 1]]).all(), f"{out}[seq {b}]"
    elif value == INF:    # every token of the head puts its weight on the sink
        h = at[0]
        assert (packed["lse"][h, :q_end] == INF).all() and (packed["o"][h, :q_end] == 0).all()
    assert (packed["o"][:, q_end:] == 0).all() and (packed["lse"][:, q_end:] == -INF).all()
    for out, end in (("dq", q_end), ("dk", kv_end), ("dv", kv_end)):
        assert (packed[out][:, end:] == 0).all(), out

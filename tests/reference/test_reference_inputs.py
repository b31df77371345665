"""frost.reference in fp32/bf16/fp16 (close to the fp64 oracle, right output dtypes), its input checks,
and the same answers on a GPU."""

from __future__ import annotations

import pytest
import torch

import frost.reference as ref
from frost.errors import TensorError
from strategies_reference import make_case

# a few units in the last place of the io dtype, relative to the largest magnitude of each output
ULPS = {torch.float32: 32, torch.bfloat16: 4, torch.float16: 4}


def _outputs(q, k, v, do, kw):
    o, lse = ref.attention_forward(q, k, v, **kw)
    return (o, lse, *ref.attention_backward(q, k, v, o, do, lse, **kw))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("seed", [0, 1])
def test_low_precision_is_close_to_fp64(dtype, seed) -> None:
    case = make_case(2, 8, 2, 40, 33, 64, 64, seed=seed, sink=[0.5 * h - 2 for h in range(8)], causal=True,
                     alignment="bottom_right", band_left=20, seq_len_q=[40, 17], seq_len_kv=[33, 30], bshd=True)
    low = [t.to(dtype) for t in (case.q, case.k, case.v, case.do)]
    kw = case.kwargs()
    got = _outputs(*low, {**kw, "sink": kw["sink"].float()})
    want = _outputs(*(t.double() for t in low), kw)  # the oracle on the same (rounded) inputs
    assert_close_to_oracle(got, want, dtype)


def assert_close_to_oracle(got, want, dtype) -> None:
    """(o, lse, dq, dk, dv, dsink) in `dtype` (lse and dsink fp32) within a few ulps of the fp64 oracle."""
    assert [t.dtype for t in got] == [dtype, torch.float32, dtype, dtype, dtype, torch.float32]
    assert torch.equal(torch.isneginf(got[1]).cpu(), torch.isneginf(want[1]).cpu())
    tol = ULPS[dtype] * torch.finfo(dtype).eps
    for name, a, b in zip(("o", "lse", "dq", "dk", "dv", "dsink"), got, want):
        a, b = a.double().cpu(), b.cpu()
        finite = torch.isfinite(b)
        err = (a[finite] - b[finite]).abs().max() / b[finite].abs().max()
        assert err <= tol, f"{dtype} {name}: relative error {err:.2e} > {tol:.2e}"


def _base():
    case = make_case(2, 4, 2, 6, 5, 40, 32, sink=[0.0] * 4)
    o, lse = ref.attention_forward(case.q, case.k, case.v, sink=case.sink)
    return dict(q=case.q, k=case.k, v=case.v, o=o, do=case.do, lse=lse, sink=case.sink)


BAD = [  # (name in the message, how to break the arguments of attention_backward)
    ("q", lambda a: a.update(q=a["q"][0])),
    ("q.dtype", lambda a: a.update(q=a["q"].to(torch.int32))),
    ("k.dtype", lambda a: a.update(k=a["k"].float())),
    ("k.shape", lambda a: a.update(k=a["k"][..., :8])),
    ("k.shape[1]", lambda a: a.update(k=a["k"][:, :1].expand(2, 3, 5, 40), v=a["v"][:, :1].expand(2, 3, 5, 32))),
    ("v.shape", lambda a: a.update(v=a["v"][:, :, :4])),
    ("o.shape", lambda a: a.update(o=a["o"][..., :16])),
    ("do.dtype", lambda a: a.update(do=a["do"].float())),
    ("lse.dtype", lambda a: a.update(lse=a["lse"].half())),
    ("lse.shape", lambda a: a.update(lse=a["lse"][:, :2])),
    ("sink.shape", lambda a: a.update(sink=a["sink"][:2])),
    ("sink.dtype", lambda a: a.update(sink=a["sink"].half())),
    ("dlse.shape", lambda a: a.update(dlse=torch.zeros(2, 4, 5))),
    ("seq_len_q.dtype", lambda a: a.update(seq_len_q=torch.tensor([1.0, 2.0]))),
    ("seq_len_kv.shape", lambda a: a.update(seq_len_kv=torch.tensor([1, 2, 3], dtype=torch.int32))),
    ("seq_len_kv", lambda a: a.update(seq_len_kv=torch.tensor([6, 2], dtype=torch.int32))),
    ("seq_len_q", lambda a: a.update(seq_len_q=torch.tensor([-1, 2], dtype=torch.int32))),
    ("band_left", lambda a: a.update(band_left=-1)),
    ("band_right", lambda a: a.update(band_right=1.5)),
    ("alignment", lambda a: a.update(alignment="bottom-right")),
    ("scale", lambda a: a.update(scale=float("nan"))),
    ("scale", lambda a: a.update(scale=0.0)),
]


@pytest.mark.parametrize("name, breaks", BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD)])
def test_rejects_obviously_wrong_inputs(name, breaks) -> None:
    args = _base()
    ref.attention_backward(**args)  # the unbroken call works
    breaks(args)
    with pytest.raises(TensorError) as info:
        ref.attention_backward(**args)
    assert str(info.value).startswith(name), str(info.value)
    fwd = {key: val for key, val in args.items() if key not in ("o", "do", "lse", "dlse")}
    if not name.startswith(("o", "do", "lse", "dlse")):
        with pytest.raises(TensorError):
            ref.attention_forward(**fwd)


def test_an_unknown_optional_input_is_a_type_error() -> None:
    from frost.reference.inputs import resolve

    a = _base()
    with pytest.raises(TypeError, match="'dsink'.*accepted optional float inputs: dlse, sink"):
        resolve(a["q"], a["k"], a["v"], scale=None, causal=False, alignment="top_left", band_left=None,
                band_right=None, seq_len_q=None, seq_len_kv=None, dsink=a["sink"])


@pytest.mark.gpu
def test_cuda_matches_cpu() -> None:
    case = make_case(2, 8, 2, 37, 29, 64, 64, seed=1, sink=[0.2 * h for h in range(8)], band_left=9, causal=True,
                     alignment="bottom_right", seq_len_q=[37, 5], seq_len_kv=[29, 0], bshd=True)
    kw = case.kwargs()
    cpu = _outputs(case.q, case.k, case.v, case.do, kw)
    gpu_kw = {**kw, "sink": case.sink.cuda()}  # seq_len tensors stay on the CPU: any device is accepted
    gpu = _outputs(case.q.cuda(), case.k.cuda(), case.v.cuda(), case.do.cuda(), gpu_kw)
    for a, b in zip(gpu, cpu):
        assert a.device.type == "cuda"
        torch.testing.assert_close(a.cpu(), b, rtol=1e-10, atol=1e-10)
    low = [t.cuda().bfloat16() for t in (case.q, case.k, case.v, case.do)]
    got = _outputs(*low, {**gpu_kw, "sink": case.sink.cuda().float()})
    assert_close_to_oracle(got, _outputs(*(t.double() for t in low), gpu_kw), torch.bfloat16)

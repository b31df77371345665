"""Attention written densely in fp64 from the README's math, autograd-able: what the examples' gradients are checked
against. It takes frost.attention's keyword arguments, so a test can pass an example's own options."""

from __future__ import annotations

import torch

BF16_BOUND = 8 * 2.0 ** -8   # the demo's rule: max |error| <= 8 bf16 ulps x max |oracle|


def _band(causal: bool, window_size) -> tuple[int | None, int | None]:
    left, right = (None if w is None or w == -1 else int(w) for w in window_size)
    if causal and right is None:
        right = 0
    return left, right


def _keep(b: int, sq: int, skv: int, left, right, alignment: str, seq_len_q, seq_len_kv) -> torch.Tensor:
    """(B, Sq, Skv) bool: key j is visible from query row i."""
    lq = torch.full((b,), sq) if seq_len_q is None else seq_len_q.long().cpu()
    lkv = torch.full((b,), skv) if seq_len_kv is None else seq_len_kv.long().cpu()
    i, j = torch.arange(sq).view(1, -1, 1), torch.arange(skv).view(1, 1, -1)
    lq, lkv = lq.view(-1, 1, 1), lkv.view(-1, 1, 1)
    diag = i if alignment == "top_left" else i + (lkv - lq)
    keep = (i < lq) & (j < lkv)
    if left is not None:
        keep &= j >= diag - left
    if right is not None:
        keep &= j <= diag + right
    return keep


def attention_fp64(q, k, v, *, sink=None, causal=False, window_size=(None, None), causal_alignment="top_left",
                   seq_len_q=None, seq_len_kv=None, softmax_scale=None):
    """BSHD in, out (B, Sq, Hq, Dv) fp64 out; padded query rows and rows that see no key give 0."""
    b, sq, hq, d = q.shape
    skv, group = k.shape[1], hq // k.shape[2]
    qh = q.double().transpose(1, 2)
    kh = k.double().repeat_interleave(group, 2).transpose(1, 2)
    vh = v.double().repeat_interleave(group, 2).transpose(1, 2)
    scale = d ** -0.5 if softmax_scale is None else softmax_scale
    left, right = _band(causal, window_size)
    keep = _keep(b, sq, skv, left, right, causal_alignment, seq_len_q, seq_len_kv).to(q.device)
    s = (qh @ kh.transpose(-1, -2) * scale).masked_fill(~keep[:, None], float("-inf"))
    if sink is not None:
        s = torch.cat([s, sink.double().view(1, hq, 1, 1).expand(b, hq, sq, 1)], dim=-1)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse).nan_to_num(0.0)[..., :skv]   # a padded row sees no key, so its output is 0
    return (p @ vh).transpose(1, 2)


def assert_close_bf16(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    err = (got.double() - want.double()).abs().max().item()
    scale = want.double().abs().max().item()
    assert err <= BF16_BOUND * scale, f"{name}: max |error| {err:.3e} > {BF16_BOUND:.3e} x max |oracle| {scale:.3e}"

"""Attention written out in plain torch (fp64, autograd-able): the independent check for frost.attention."""

import torch


def naive_attention(q, k, v, sink, seq_len_q, seq_len_kv, left=None, return_lse=False):
    """BSHD, causal bottom-right with an optional left window, sink, padded sequences; padded rows output 0
    (and, with return_lse, the natural-log LSE (B, Hq, Sq) including the sink term)."""
    b, sq, hq, d = q.shape
    skv, g = k.shape[1], hq // k.shape[2]
    qh, kh, vh = q.transpose(1, 2), k.repeat_interleave(g, 2).transpose(1, 2), v.repeat_interleave(g, 2).transpose(1, 2)
    s = qh @ kh.transpose(-1, -2) / d ** 0.5
    i, j = torch.arange(sq).view(1, -1, 1), torch.arange(skv).view(1, 1, -1)
    lq, lkv = seq_len_q.long().view(-1, 1, 1), seq_len_kv.long().view(-1, 1, 1)
    diag = i + (lkv - lq)
    keep = (i < lq) & (j < lkv) & (j <= diag)
    if left is not None:
        keep &= j >= diag - left
    s = s.masked_fill(~keep[:, None], float("-inf"))
    logits = torch.cat([s, sink.view(1, hq, 1, 1).expand(b, hq, sq, 1)], dim=-1)
    p = torch.softmax(logits, dim=-1)[..., :-1]
    out = (p @ vh).transpose(1, 2) * (i.view(1, -1, 1, 1) < lq.view(-1, 1, 1, 1))
    return (out, torch.logsumexp(logits, dim=-1)) if return_lse else out

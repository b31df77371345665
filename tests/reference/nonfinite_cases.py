"""The non-finite contract (README, "Non-finite inputs") as expected patterns: for a NaN or ±inf placed in one
input, which entries of O, LSE, dQ, dK, dV and dSink are NaN, +inf, exactly 0, changed but finite, or unchanged.

The patterns come from the mask alone (the shared oracle's keep mask, helpers.oracle.keep_mask), never from the engine
under test: a NaN at row (b, h, i) reaches the keys that row attends (in kv head h // G), a NaN at key (b, kv, j)
the rows that attend it, and so on, as the formulas read them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.oracle import keep_mask
from reference_cases import Case

NAMES = ("o", "lse", "dq", "dk", "dv", "dsink")
NAN, INF = float("nan"), float("inf")


@dataclass
class Geometry:
    """Who attends whom in a Case, as boolean tensors."""

    keep: torch.Tensor     # (B, Hq, Sq, Skv): row (b, h, i) attends key j (of kv head h // G)
    valid: torch.Tensor    # (B, Hq, Sq): a real row, not padding
    group: int

    @classmethod
    def of(cls, case: Case) -> "Geometry":
        b, hq, sq, _ = case.q.shape
        keep = _keep(case)[:, None].expand(b, hq, sq, case.k.shape[2])
        lens = case.seq_len_q if case.seq_len_q is not None else [sq] * b
        valid = (torch.arange(sq)[None] < torch.tensor(lens)[:, None])[:, None].expand(b, hq, sq)
        return cls(keep=keep, valid=valid, group=hq // case.k.shape[1])

    @property
    def has_key(self) -> torch.Tensor:
        """(B, Hq, Sq): rows that attend at least one key."""
        return self.keep.any(-1)

    def row(self, b: int, h: int, i: int) -> torch.Tensor:
        out = torch.zeros_like(self.valid)
        out[b, h, i] = True
        return out

    def key(self, b: int, kv: int, j: int) -> torch.Tensor:
        bs, hq, _, skv = self.keep.shape
        out = torch.zeros(bs, hq // self.group, skv, dtype=torch.bool)
        out[b, kv, j] = True
        return out

    def head_rows(self, h: int) -> torch.Tensor:
        """(B, Hq, Sq): the valid rows of query head h."""
        out = torch.zeros_like(self.valid)
        out[:, h] = self.valid[:, h]
        return out

    def rows_of(self, keys: torch.Tensor) -> torch.Tensor:
        """(B, Hkv, Skv) keys -> (B, Hq, Sq): the rows that attend one of them."""
        per_head = keys.repeat_interleave(self.group, dim=1)[:, :, None, :]
        return (self.keep & per_head).any(-1)

    def keys_of(self, rows: torch.Tensor) -> torch.Tensor:
        """(B, Hq, Sq) rows -> (B, Hkv, Skv): the keys one of them attends."""
        b, hq, sq, skv = self.keep.shape
        hit = self.keep & rows[..., None]
        return hit.reshape(b, hq // self.group, self.group, sq, skv).any(3).any(2)

    @staticmethod
    def heads_of(rows: torch.Tensor) -> torch.Tensor:
        """(B, Hq, Sq) rows -> (Hq,): the heads with one of them."""
        return rows.any(2).any(0)


def _full(mask: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """A row/key/head mask broadcast over the trailing (head-dim) axis of `like`; None: nowhere."""
    if mask is None:
        return torch.zeros(like.shape, dtype=torch.bool)
    while mask.dim() < like.dim():
        mask = mask[..., None]
    return mask.expand(like.shape)


def column(mask: torch.Tensor, like: torch.Tensor, d: int) -> torch.Tensor:
    """Only head-dim column d of the rows (or keys) in `mask`, shaped like `like`."""
    out = torch.zeros(like.shape, dtype=torch.bool)
    out[..., d] = mask
    return out


def check(got: dict, clean: dict, *, nan: dict | None = None, posinf: dict | None = None,
          zero: dict | None = None, free: dict | None = None, names=NAMES, **close) -> None:
    """Every output of `got` has NaN exactly at `nan`, +inf exactly at `posinf`, exact zeros at `zero`, finite
    values at `free` (changed by the input, not predicted here) and the clean run's values everywhere else (-inf
    included). Each dict maps an output name to a mask shaped like that output or like its rows/keys/heads."""
    nan, posinf, zero, free = nan or {}, posinf or {}, zero or {}, free or {}
    close = close or dict(rtol=1e-12, atol=1e-12)
    for name in names:
        g, c = got[name], clean[name]
        if g is None:
            assert c is None, name
            continue
        g, c = g.detach().double(), c.detach().double()
        n, p = _full(nan.get(name), g), _full(posinf.get(name), g)
        z, f = _full(zero.get(name), g), _full(free.get(name), g)
        assert torch.equal(torch.isnan(g), n), f"{name}: NaN at {_where(torch.isnan(g) ^ n)} (wrong entries)"
        assert torch.equal(torch.isposinf(g), p), f"{name}: +inf at {_where(torch.isposinf(g) ^ p)} (wrong entries)"
        assert torch.all(g[z] == 0), f"{name}: not exactly 0 at {_where(z & (g != 0))}"
        assert torch.isfinite(g[f]).all(), f"{name}: not finite at {_where(f & ~torch.isfinite(g))}"
        rest = ~(n | p | z | f)
        torch.testing.assert_close(g[rest], c[rest], **close, msg=lambda m: f"{name}: {m}")


def _where(mask: torch.Tensor) -> list:
    return mask.nonzero().tolist()[:8]


def _keep(case: Case) -> torch.Tensor:
    """(B, Sq, Skv) bool: which keys each query row of the case attends."""
    b, _, sq, _ = case.q.shape
    return keep_mask(b, sq, case.k.shape[2], causal=case.causal, alignment=case.alignment,
                     band_left=case.band_left, band_right=case.band_right, seq_len_q=case.seq_len_q,
                     seq_len_kv=case.seq_len_kv)

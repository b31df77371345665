"""The (batch, head, sequence) strides a launch reads off an io tensor, given in the kernels' logical order or in
the caller's sequence-major order. Reading a tensor's strides in another order costs less host time than making a
transposed view of it, so an engine passes the caller's (B, S, H, D) or packed (T, H, D) tensors as they are."""

from __future__ import annotations


def bhsd_strides(t) -> tuple:
    """(batch, head, seq) strides of a logical (B, H, S, D) tensor."""
    return t.stride()[:3]


def bshd_strides(t) -> tuple:
    """(batch, head, seq) strides of a (B, S, H, D) tensor."""
    s = t.stride()
    return s[0], s[2], s[1]


def htd_strides(t) -> tuple:
    """(batch, head, token) strides of a packed logical (H, T, D) tensor: every batch shares it."""
    s = t.stride()
    return 0, s[0], s[1]


def thd_strides(t) -> tuple:
    """(batch, head, token) strides of a packed (T, H, D) tensor."""
    s = t.stride()
    return 0, s[1], s[0]


def strides_reader(packed: bool, seq_major: bool):
    """The reader of a call's io tensors: packed or dense, in the caller's order or the logical one."""
    if packed:
        return thd_strides if seq_major else htd_strides
    return bshd_strides if seq_major else bhsd_strides

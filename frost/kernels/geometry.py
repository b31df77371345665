"""Shared-memory tile geometry that every kernel family and its host-side tables use (pure Python)."""

from __future__ import annotations


def swizzle_atom_cols(cols: int) -> int:
    """Width of the swizzle atom of a ``cols``-wide 16-bit shared-memory tile (cute_utils.smem_tile_layout)."""
    return next(c for c in (64, 32, 16) if cols % c == 0)

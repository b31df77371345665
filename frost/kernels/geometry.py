"""Numbers every kernel family and its host-side tables share (pure Python): shared-memory tile geometry, and the
log2(e) that turns natural-log scores into the base-2 ones the softmax exponentiates."""

from __future__ import annotations

import math

LOG2_E = math.log2(math.e)


def swizzle_atom_cols(cols: int) -> int:
    """Width of the swizzle atom of a ``cols``-wide 16-bit shared-memory tile (cute_utils.smem_tile_layout)."""
    return next(c for c in (64, 32, 16) if cols % c == 0)

"""The attention mask: ONE predicate object shared by every kernel.

A key j is visible to a query row i iff ``j < seqlen_kv`` and ``j <= i + right_offset`` (rows ``i >= seqlen_q``
need no test: the preprocess gives them LSE = +inf, so P = 0 there). The host folds the mask kind into the
runtime value ``right_offset``:

- no causal mask: ``NO_BOUND`` (a right bound no key reaches);
- causal, top-left: 0; causal, bottom-right: ``seqlen_kv - seqlen_q``;
- (next issue) a right band R adds R; a left band L becomes a ``left_offset`` with the symmetric test, and
  per-batch padded lengths replace the two seqlens by per-batch loads -- all runtime values of this object.

Because the mask kind is data, causal and non-causal problems run the same compiled kernel: the kernel only
spends mask work on the tiles that straddle a bound (``tile_needs_mask``)."""

from dataclasses import dataclass

import cutlass
import cutlass.cute as cute
from cutlass import Int32

NO_BOUND = 1 << 30
ALIGNMENTS = ("top_left", "bottom_right")


@dataclass(frozen=True)
class MaskSpec:
    """Host side: the mask kind of a problem; turns it into the kernel's runtime mask values."""

    causal: bool
    alignment: str = "top_left"

    def __post_init__(self):
        if self.alignment not in ALIGNMENTS:
            raise ValueError(f"alignment {self.alignment!r} not in {ALIGNMENTS}")

    def right_offset(self, seqlen_q: int, seqlen_kv: int) -> int:
        if not self.causal:
            return NO_BOUND
        return seqlen_kv - seqlen_q if self.alignment == "bottom_right" else 0


@dataclass(frozen=True)
class AttentionMask:
    """Device side, built inside a kernel from runtime values."""

    seqlen_q: Int32
    seqlen_kv: Int32
    right_offset: Int32

    @cute.jit
    def m_block_begin(self, n_block: Int32, n_block_size: cutlass.Constexpr, m_block_size: cutlass.Constexpr) -> Int32:
        """First query tile that sees any key of KV tile ``n_block``."""
        first_row = cutlass.max(n_block * n_block_size - self.right_offset, 0)
        return first_row // m_block_size

    @cute.jit
    def m_block_end(self, m_block_size: cutlass.Constexpr) -> Int32:
        return (self.seqlen_q + m_block_size - 1) // m_block_size

    @cute.jit
    def tile_needs_mask(self, m_block: Int32, n_block: Int32, m_block_size: cutlass.Constexpr,
                        n_block_size: cutlass.Constexpr) -> cutlass.Boolean:
        """True when some (row, key) of the tile is hidden (rows past seqlen_q excepted, see module doc)."""
        key_end = (n_block + 1) * n_block_size
        return (key_end > self.seqlen_kv) | (key_end - 1 > m_block * m_block_size + self.right_offset)

    @cute.jit
    def visible(self, row: Int32, key: Int32) -> cutlass.Boolean:
        return (key < self.seqlen_kv) & (key <= row + self.right_offset)

    @cute.jit
    def zero_hidden_transposed(self, p_mn: cute.Tensor, coord_mn: cute.Tensor, m_block: Int32, n_block: Int32,
                               m_block_size: cutlass.Constexpr, n_block_size: cutlass.Constexpr):
        """P^T tile in (key, row) MN view: hidden entries become exactly 0."""
        row0 = m_block * m_block_size
        key0 = n_block * n_block_size
        for r in cutlass.range_constexpr(cute.size(p_mn, mode=[0])):
            key = key0 + coord_mn[r, 0][0]
            for c in cutlass.range_constexpr(cute.size(p_mn, mode=[1])):
                vis = self.visible(row0 + coord_mn[0, c][1], key)
                p_mn[r, c] = p_mn[r, c] if vis else cutlass.Float32(0.0)

"""The attention mask: ONE predicate object shared by every kernel.

Per batch b (lengths ``sq = seq_len_q[b]``, ``skv = seq_len_kv[b]``, default the full extents) a key j is visible
to a query row i iff ``j < skv`` and ``left_offset <= j - i <= right_offset``, where the diagonal is
``diag = skv - sq`` (bottom-right) or 0 (top-left), ``right_offset = diag + R`` and ``left_offset = diag - L``
for the band (L, R); an unbounded side is the sentinel ``NO_BOUND`` (no key reaches it). Rows ``i >= sq`` need
no test: the preprocess gives them LSE = +inf and their Q/dO are zero-filled, so P = 0 there.

- no mask: (L, R) = (NO_BOUND, NO_BOUND); causal: (NO_BOUND, 0); right-band widening: (NO_BOUND, R);
  sliding window: (L, 0) or (L, R).

The host turns a frost.spec.Mask into (L, R) (``runtime_bounds``) and its alignment flag (``mask_flags``); a kernel
entry packs (L, R) into one ``MaskBounds`` that every kernel passes on untouched to ``make_mask``, so a new mask
value changes this file, the entries and the launchers, not the kernels between them.

Everything is a runtime value (lengths, bounds, alignment): one compiled kernel serves every mask kind; only
tiles that straddle a bound spend work on the predicate (``tile_needs_mask``), and the query-tile walk of a KV
tile is trimmed to the rows the band and the lengths can reach (``m_block_range``), so a window-W backward
costs O(S*W).

Runtime feature flags travel as one Int32 bit field: the mask's and the launchers' ``FLAG_*`` here, an optional
input's (its pointer is valid) ``frost.spec.kernel_flag(role)``."""

from dataclasses import dataclass

import cutlass
import cutlass.cute as cute
from cutlass import Int32

from frost.kernels import cute_utils as cutil
from frost.spec import Mask, kernel_flag

NO_BOUND = 1 << 30

FLAG_SEQ_Q = kernel_flag("seq_len_q")     # seq_len_q pointer is valid (the optional inputs' bits are frost.spec's)
FLAG_SEQ_KV = kernel_flag("seq_len_kv")   # seq_len_kv pointer is valid
FLAG_BOTTOM_RIGHT = 4       # diagonal anchored at j = i + (skv - sq)
FLAG_ORDERED_DQ = 8         # dQ added in KV-tile order (select.orders_dq). The kernel sets are compiled for one
#                             order (select.KernelKey.ordered) and the Launch sets this flag exactly on the ordered
#                             set's problems; only the atomic set's main kernel tests it (see BwdMainKernel.__init__)
FLAG_KV_SLOWEST = 32        # set by the main kernel's launcher: grid is (kv heads, batch, KV tiles) (bwd_main)
FLAG_Q_TILES_DOWN = 128     # set by the dQ GEMM's launcher: grid is (heads, batch, query tiles), last tile first


def runtime_bounds(mask: Mask) -> tuple[int, int]:
    """(L, R) as the kernels take them: an unbounded side is NO_BOUND, a wider one is clamped to it."""
    left, right = (NO_BOUND if b is None else min(b, NO_BOUND) for b in (mask.left, mask.right))
    return left, right


def mask_flags(mask: Mask) -> int:
    """The mask's bits of the kernels' runtime flags (its alignment)."""
    return FLAG_BOTTOM_RIGHT if mask.alignment == "bottom_right" else 0


@cute.jit
def batch_length(mSeq: cute.Tensor, flags: Int32, flag: cutlass.Constexpr, batch: Int32, full: Int32) -> Int32:
    """One batch's length: ``mSeq[batch]`` clamped to [0, full] when ``flag`` is set in ``flags``, else the full
    extent. The clamp keeps an out-of-range length (unchecked, e.g. under CUDA-graph capture) inside the tensors."""
    n = full
    if (flags & flag) != 0:
        n = cutlass.min(cutlass.max(mSeq[batch], Int32(0)), full)
    return n


def main_writes_dq(dq_direct: bool, ordered: bool) -> bool:
    """Whether a kernel set's main kernel writes dQ itself: the set is compiled for ordered dQ
    (select.KernelKey.ordered) on a tile with TileConfig.dq_direct (ordering.dq_order_wait). Then that set's
    preprocess zeroes no accumulator and its convert kernel converts nothing. Fixed when the set is compiled (the
    Launch refuses a problem of the other kind), so the three kernels cannot disagree about it."""
    return dq_direct and ordered


@dataclass(frozen=True)
class MaskBounds:
    """Device side: the mask's runtime bounds (L, R), the host's ``runtime_bounds``, as one value that a kernel
    entry builds from its arguments and every kernel passes on untouched to ``make_mask`` (a kernel parameter of
    this type is its two Int32 values, in order)."""

    left: Int32
    right: Int32

    def __extract_mlir_values__(self):
        return [*cutlass.extract_mlir_values(self.left), *cutlass.extract_mlir_values(self.right)]

    def __new_from_mlir_values__(self, values):
        left, right = values
        return MaskBounds(cutlass.new_from_mlir_values(self.left, [left]),
                          cutlass.new_from_mlir_values(self.right, [right]))

    def unbounded_left(self):
        return self.left >= NO_BOUND

    def bounded_right(self):
        return self.right < NO_BOUND

    def causal_like(self):
        """No left bound and a right one: the later query rows see the most keys."""
        return self.unbounded_left() & self.bounded_right()


@cute.jit
def make_mask(sq: Int32, skv: Int32, bounds: MaskBounds, flags: Int32) -> "AttentionMask":
    """The mask of one batch from its lengths, the runtime bounds and the alignment flag."""
    diag = Int32(0)
    if (flags & FLAG_BOTTOM_RIGHT) != 0:
        diag = skv - sq
    return AttentionMask(sq, skv, diag - bounds.left, diag + bounds.right)


@dataclass(frozen=True)
class AttentionMask:
    """Device side, built inside a kernel from runtime values (see ``make_mask``)."""

    seqlen_q: Int32
    seqlen_kv: Int32
    left_offset: Int32
    right_offset: Int32

    @cute.jit
    def m_block_range(self, n_block: Int32, n_block_size: cutlass.Constexpr, m_block_size: cutlass.Constexpr):
        """[begin, end) of the query tiles holding a row that sees a key of KV tile ``n_block``
        (begin >= end: none). Rows i see keys j in [i + left_offset, i + right_offset] with j < seqlen_kv."""
        key0 = n_block * n_block_size
        first_row = cutlass.max(key0 - self.right_offset, 0)
        last_key = cutlass.min(key0 + n_block_size, self.seqlen_kv) - 1
        rows_end = cutlass.min(cutlass.max(last_key - self.left_offset + 1, 0), self.seqlen_q)
        if key0 >= self.seqlen_kv:
            rows_end = Int32(0)
        return first_row // m_block_size, (rows_end + m_block_size - 1) // m_block_size

    @cute.jit
    def n_block_range(self, m_block: Int32, n_block_size: cutlass.Constexpr, m_block_size: cutlass.Constexpr):
        """[begin, end) of the KV tiles whose walk (``m_block_range``) holds query tile ``m_block`` (begin >= end:
        none): its visitors, for a kernel that walks them from the query side (dq_gemm). The tile is walked by KV
        tile n iff n * N < seqlen_kv, the tile's first row sees a key below (n + 1) * N (begin: first_n_block)
        and its last row sees key n * N (end), and it starts below seqlen_q and at most seqlen_kv - 1 - left."""
        row0 = m_block * m_block_size
        begin = cutlass.max(row0 + self.left_offset, 0) // n_block_size  # (first_n_block's)
        last_key = row0 + m_block_size - 1 + self.right_offset
        end = cutlass.min((cutlass.max(last_key + 1, 0) + n_block_size - 1) // n_block_size,
                          (self.seqlen_kv + n_block_size - 1) // n_block_size)
        if (row0 >= self.seqlen_q) | (row0 + self.left_offset >= self.seqlen_kv):
            end = begin
        return begin, end

    @cute.jit
    def first_n_block(self, m_block: Int32, n_block_size: cutlass.Constexpr,
                      m_block_size: cutlass.Constexpr) -> Int32:
        """The lowest KV tile whose ``m_block_range`` holds ``m_block`` (call only from a KV tile that does): the
        KV tiles visiting a query tile are contiguous, so a visitor's rank from the bottom is ``n_block - first``.
        The tile's first row sees keys from ``row0 + left_offset`` on."""
        return cutlass.max(m_block * m_block_size + self.left_offset, 0) // n_block_size

    @cute.jit
    def next_tile_begin(self, n_block: Int32, n_block_size: cutlass.Constexpr,
                        m_block_size: cutlass.Constexpr) -> Int32:
        """The first query tile KV tile ``n_block + 1`` visits (NO_BOUND if it visits none). Query tiles below it
        have KV tile ``n_block`` as their last visitor: the visitors of a query tile are contiguous and both ends
        of ``m_block_range`` only grow with the KV tile."""
        begin, end = self.m_block_range(n_block + 1, n_block_size, m_block_size)
        if end <= begin:
            begin = Int32(NO_BOUND)
        return begin

    @cute.jit
    def row_sees_no_key(self, row: Int32) -> cutlass.Boolean:
        """Whether query row ``row`` is padding (>= seqlen_q) or has no visible key."""
        lo = cutlass.max(row + self.left_offset, 0)
        hi = cutlass.min(row + self.right_offset, self.seqlen_kv - 1)
        return (row >= self.seqlen_q) | (lo > hi)

    @cute.jit
    def tile_needs_mask(self, m_block: Int32, n_block: Int32, m_block_size: cutlass.Constexpr,
                        n_block_size: cutlass.Constexpr) -> cutlass.Boolean:
        """True when some (row, key) of the tile is hidden (rows past seqlen_q excepted, see module doc)."""
        key0 = n_block * n_block_size
        row0 = m_block * m_block_size
        return ((key0 + n_block_size > self.seqlen_kv) | (key0 + n_block_size - 1 > row0 + self.right_offset)
                | (key0 < row0 + m_block_size - 1 + self.left_offset))

    def key_span(self, row0: Int32, rows: int, key0: Int32, keys: int):
        """(lo, hi): the keys of [key0, key0 + keys) below seqlen_kv that some row of [row0, row0 + rows) sees lie
        in [lo, hi], the band's keys of those rows being [row0 + left_offset, row0 + rows - 1 + right_offset];
        lo > hi when none does (rows past seqlen_q count as seeing: their probabilities are 0 anyway). Plain Python,
        traced inline (and evaluated on ints by the CPU tests)."""
        lo = cutlass.max(key0, row0 + self.left_offset)
        hi = cutlass.min(cutlass.min(key0 + keys, self.seqlen_kv) - 1, row0 + rows - 1 + self.right_offset)
        return lo, hi

    @cute.jit
    def block_sees(self, row0: Int32, rows: cutlass.Constexpr, key0: Int32, keys: cutlass.Constexpr) -> cutlass.Boolean:
        """Whether some row of [row0, row0 + rows) sees some key of [key0, key0 + keys) (key_span not empty)."""
        lo, hi = self.key_span(row0, rows, key0, keys)
        return lo <= hi

    @cute.jit
    def visible(self, row: Int32, key: Int32) -> cutlass.Boolean:
        return (key < self.seqlen_kv) & (key <= row + self.right_offset) & (key >= row + self.left_offset)

    @cute.jit
    def zero_hidden(self, p_mn: cute.Tensor, coord_mn: cute.Tensor, m_block: Int32, n_block: Int32,
                    m_block_size: cutlass.Constexpr, n_block_size: cutlass.Constexpr,
                    keys_on_rows: cutlass.Constexpr, by_difference: cutlass.Constexpr = False):
        """A P tile in MN view, (row, key) or, with ``keys_on_rows``, P^T in (key, row): hidden entries become
        exactly 0. ``coord_mn`` holds the tile-local coordinates of the same view. ``by_difference`` (a tile's
        TileConfig.diff_mask): the band test is one unsigned compare per entry, key - row - left_offset <=
        right_offset - left_offset (= L + R <= 2^31, read unsigned; a difference below left_offset wraps past it;
        |key - row| < 2^30; the int32 arithmetic wraps, no overflow flags), the key bound a second loop run only on a
        tile that straddles seqlen_kv; otherwise each entry runs ``visible``."""
        row0, key0 = m_block * m_block_size, n_block * n_block_size
        if cutlass.const_expr(by_difference):
            base, width = key0 - row0 - self.left_offset, self.right_offset - self.left_offset
        for r in cutlass.range_constexpr(cute.size(p_mn, mode=[0])):
            for c in cutlass.range_constexpr(cute.size(p_mn, mode=[1])):
                row, key = _row_key(coord_mn, r, c, keys_on_rows)
                if cutlass.const_expr(by_difference):
                    vis = cutil.unsigned_le(base + key - row, width)
                else:
                    vis = self.visible(row0 + row, key0 + key)
                p_mn[r, c] = p_mn[r, c] if vis else cutlass.Float32(0.0)
        if cutlass.const_expr(by_difference):
            if key0 + n_block_size > self.seqlen_kv:
                self._zero_keys_past(p_mn, coord_mn, self.seqlen_kv - key0, keys_on_rows)

    @cute.jit
    def _zero_keys_past(self, p_mn: cute.Tensor, coord_mn: cute.Tensor, limit: Int32,
                        keys_on_rows: cutlass.Constexpr):
        """Entries whose tile-local key is >= ``limit`` become 0."""
        for r in cutlass.range_constexpr(cute.size(p_mn, mode=[0])):
            for c in cutlass.range_constexpr(cute.size(p_mn, mode=[1])):
                _, key = _row_key(coord_mn, r, c, keys_on_rows)
                p_mn[r, c] = p_mn[r, c] if key < limit else cutlass.Float32(0.0)


def _row_key(coord_mn: cute.Tensor, r: int, c: int, keys_on_rows: bool):
    """Trace time: the tile-local (query row, key) of entry (r, c) of an MN view, (row, key) or, with
    ``keys_on_rows``, (key, row)."""
    if keys_on_rows:
        return coord_mn[0, c][1], coord_mn[r, 0][0]
    return coord_mn[r, 0][0], coord_mn[0, c][1]

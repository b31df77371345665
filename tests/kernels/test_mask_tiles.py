"""The main kernel's tile arithmetic (frost/kernels/mask.py), run as plain Python on CPU against a brute-force
reading of DESIGN.md's mask: key j is visible to query row i < sq iff j < skv and
diag - L <= j - i <= diag + R (diag = skv - sq bottom-right, 0 top-left).

- Every visible (row, key) pair lies in a query tile that its KV tile walks (``m_block_range``), so no
  contribution is skipped, and a KV tile walks nothing outside its band (the window costs O(S*W)): only a KV tile
  that no row sees may walk one tile, of exact zeros.
- Ordered dQ ranks the visitors of a query tile from the bottom: the KV tiles whose walk holds it must be
  contiguous and start at ``first_n_block``, or a visitor would wait for a rank that never comes (a hang) or two
  would share a rank (a race). Its last visitor writes dQ: a KV tile is the last exactly for the query tiles below
  the next KV tile's first one (what ``next_tile_begin`` returns), and every row the preprocess leaves alone
  (``row_sees_no_key`` false) lies in a query tile some KV tile walks, so its dQ row is written.
- The dQ GEMM (dq_gemm.py) walks a query tile's visitors from the query side: ``n_block_range`` must give
  exactly the KV tiles whose walk holds the tile (a tile it adds that no walk stored is garbage, one it misses is
  a lost contribution).
- The launch grid (``ordering.block_order``) deals a head's KV tiles out in ascending order in both of its orders.

The jit-decorated methods are called through ``__wrapped__``: the same source, evaluated on Python ints. They are
read from fresh copies of the modules: a real DSL compile earlier in the process rewrites the jit functions it
traced (their ``__wrapped__`` then builds MLIR and fails outside a compile), and a copy no compile has touched
keeps these tests independent of which tests ran before."""

import importlib.util
import random

import pytest

pytest.importorskip("cutlass")


def _fresh_copy(name: str):
    """A new module object executed from ``name``'s source file (not registered in sys.modules)."""
    module = importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(f"{name}__plain_copy", module.__file__)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    return copy


_MASK = _fresh_copy("frost.kernels.mask")
FLAG_BOTTOM_RIGHT, NO_BOUND, AttentionMask, make_mask = (_MASK.FLAG_BOTTOM_RIGHT, _MASK.NO_BOUND, _MASK.AttentionMask,
                                                         _MASK.make_mask)


def _bounds(left, right):
    """The kernels' MaskBounds of a band (None: unbounded)."""
    return _MASK.MaskBounds(NO_BOUND if left is None else left, NO_BOUND if right is None else right)


def _mask(sq, skv, left, right, bottom_right):
    flags = FLAG_BOTTOM_RIGHT if bottom_right else 0
    return make_mask.__wrapped__(sq, skv, _bounds(left, right), flags)


def _in_band(sq, skv, left, right, bottom_right, i, j):
    """Whether key j < skv lies in query row i's band, for any row i (rows past sq included)."""
    diag = skv - sq if bottom_right else 0
    lo = -float("inf") if left is None else diag - left
    hi = float("inf") if right is None else diag + right
    return j < skv and lo <= j - i <= hi


def _visible(sq, skv, left, right, bottom_right, i, j):
    return i < sq and _in_band(sq, skv, left, right, bottom_right, i, j)


def _near_tiles(rng, lo, hi):
    """Mostly values at a tile edge (a multiple of 16, give or take one), where off-by-one errors live."""
    if rng.random() < 0.3:
        return rng.randint(lo, hi)
    return min(max(16 * rng.randint(0, hi // 16) + rng.choice((-1, 0, 1)), lo), hi)


def _cases(n_cases=150, seed=7):
    rng = random.Random(seed)
    for _ in range(n_cases):
        sq, skv = _near_tiles(rng, 1, 400), _near_tiles(rng, 1, 400)
        kind = rng.choice(("none", "causal", "window", "band", "widened"))
        left = {"window": _near_tiles(rng, 0, 130), "band": _near_tiles(rng, 0, 130)}.get(kind)
        right = {"none": None, "window": 0, "band": _near_tiles(rng, 0, 70),
                 "widened": _near_tiles(rng, 1, 70)}.get(kind, 0)
        tiles = rng.choice(((128, 32), (128, 64), (64, 64), (64, 32), (64, 16)))
        yield sq, skv, left, right, rng.random() < 0.5, tiles


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: "sq{}_skv{}_L{}_R{}_br{}_n{}m{}".format(*c[:5], *c[5]))
def test_walks_cover_the_band_and_visitors_rank_from_first_n_block(case):
    sq, skv, left, right, br, (n_size, m_size) = case
    mask = _mask(sq, skv, left, right, br)
    walk_range = AttentionMask.m_block_range.__wrapped__
    first_n_block = AttentionMask.first_n_block.__wrapped__
    n_tiles, m_tiles = -(-skv // n_size), -(-sq // m_size)
    walked = {n: range(*(int(x) for x in walk_range(mask, n, n_size, m_size))) for n in range(n_tiles)}
    needed = {n: {i // m_size for i in range(sq) for j in range(n * n_size, min((n + 1) * n_size, skv))
                  if _visible(sq, skv, left, right, br, i, j)} for n in range(n_tiles)}
    for n in range(n_tiles):
        if needed[n]:   # exactly the query tiles between the first and the last that see a key of the tile
            assert walked[n] == range(min(needed[n]), max(needed[n]) + 1), (n, sorted(needed[n]), walked[n])
        else:           # a tile no row sees may still walk one tile of zeros (its band starts past the last row)
            assert len(walked[n]) <= 1, (n, walked[n])
    visitor_range = AttentionMask.n_block_range.__wrapped__
    for m in range(m_tiles + 2):
        visitors = [n for n in range(n_tiles) if m in walked[n]]
        begin, end = (int(x) for x in visitor_range(mask, m, n_size, m_size))
        assert list(range(begin, end)) == visitors, (m, begin, end, visitors)  # the inverse of the walks
        if visitors:
            assert visitors == list(range(visitors[0], visitors[-1] + 1)), (m, visitors)
            assert int(first_n_block(mask, m, n_size, m_size)) == visitors[0], (m, visitors)
            # next_tile_begin(n) is the next KV tile's walk start, or NO_BOUND when it walks nothing
            for n in visitors:
                nxt = walked.get(n + 1, range(0))
                next_begin = nxt.start if len(nxt) else NO_BOUND
                assert (m < next_begin) == (n == visitors[-1]), (m, n, visitors)
    sees_no_key = AttentionMask.row_sees_no_key.__wrapped__
    assert all(bool(sees_no_key(mask, i)) for i in range(sq, sq + 3))  # padding rows (past the batch's length)
    for i in range(sq):
        has_key = any(_visible(sq, skv, left, right, br, i, j) for j in range(skv))
        assert bool(sees_no_key(mask, i)) == (not has_key), i
        if has_key:
            assert any(i // m_size in walked[n] for n in range(n_tiles)), i


@pytest.mark.parametrize("left, right, ordered, kv_slowest", [
    (None, 0, False, True),       # causal: the long walks first
    (None, 0, True, True),
    (None, None, False, False),   # no mask, default mode: a head's KV tiles together (they share Q/dO in L2)
    (None, None, True, True),     # no mask, ordered: a few KV tiles of every head per wave (no release convoy)
    (128, 0, True, False),        # a window: equal short walks, a head's KV tiles together
    (128, None, False, False),
])
def test_block_order_puts_kv_tiles_slowest_for_causal_walks_and_unbounded_ordered_dq(left, right, ordered,
                                                                                     kv_slowest):
    """ordering.block_order: which grid a problem gets, and that every grid holds each (KV tile, kv head, batch)
    once with a head's KV tiles in ascending launch order (ordered dQ's deadlock freedom)."""
    from frost.kernels.mask import FLAG_KV_SLOWEST, FLAG_ORDERED_DQ

    ordering = _fresh_copy("frost.kernels.backward.ordering")
    MAX_GRID_YZ, block_order = ordering.MAX_GRID_YZ, ordering.block_order

    n_kv, heads_kv, batch = 5, 3, 2
    flags_in = FLAG_ORDERED_DQ if ordered else 0
    grid, flags = block_order.__wrapped__(n_kv, heads_kv, batch, _bounds(left, right), flags_in)
    grid, flags = tuple(int(g) for g in grid), int(flags)
    assert bool(flags & FLAG_KV_SLOWEST) == kv_slowest and flags & ~FLAG_KV_SLOWEST == flags_in
    launch = []  # (KV tile, kv head, batch) in linear block order, x fastest (kv_tile_of_block's mapping)
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                launch.append((z, x, y) if kv_slowest else (x, y, z))
    assert sorted(launch) == [(n, h, b) for n in range(n_kv) for h in range(heads_kv) for b in range(batch)]
    for h in range(heads_kv):
        for b in range(batch):
            assert [n for n, hh, bb in launch if (hh, bb) == (h, b)] == list(range(n_kv))
    # past the grid's y/z limit the KV tiles stay in x
    grid, flags = block_order.__wrapped__(MAX_GRID_YZ + 1, 1, 1, _bounds(None, 0), flags_in)
    assert int(grid[0]) == MAX_GRID_YZ + 1 and not int(flags) & FLAG_KV_SLOWEST


@pytest.mark.parametrize("left, right, bottom_right, down", [
    (None, 0, False, True),       # causal: the last query tiles have the long walks, dealt out first
    (None, 0, True, True),
    (None, 40, False, True),      # right-widened causal
    (None, None, False, False),   # no mask: equal walks, (query tiles, heads, batch) ascending
    (100, 0, False, False),       # a window: equal walks
])
def test_dq_gemm_block_order_deals_the_longest_walks_out_first(left, right, bottom_right, down):
    """ordering.dq_gemm_block_order + q_tile_of_block: every (query tile group, head, batch) once, and on causal-like
    walks in launch order (x fastest) the walk lengths of the dQ GEMM's CTAs never grow."""
    from frost.kernels.mask import FLAG_Q_TILES_DOWN

    ordering = _fresh_copy("frost.kernels.backward.ordering")
    n_groups, heads, batch, group_rows, kv_tile = 6, 3, 2, 64, 32
    sq, skv = n_groups * group_rows - 10, n_groups * group_rows - 30
    flags_in = FLAG_BOTTOM_RIGHT if bottom_right else 0
    grid, flags = ordering.dq_gemm_block_order.__wrapped__(n_groups, heads, batch, _bounds(left, right), flags_in)
    grid, flags = tuple(int(g) for g in grid), int(flags)
    assert bool(flags & FLAG_Q_TILES_DOWN) == down and flags & ~FLAG_Q_TILES_DOWN == flags_in
    launch = [tuple(int(v) for v in ordering.q_tile_of_block.__wrapped__((x, y, z), grid[2], flags))
              for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
    assert sorted(launch) == [(g, h, b) for g in range(n_groups) for h in range(heads) for b in range(batch)]
    mask = _mask(sq, skv, left, right, bottom_right)
    walk = []  # KV tiles from the group's first visitor to its last one's end (dq_gemm's chunk range)
    for g, _, _ in launch:
        ranges = [mask.n_block_range.__wrapped__(mask, g * 2 + j, kv_tile, group_rows // 2) for j in range(2)]
        ranges = [(int(b), int(e)) for b, e in ranges if int(b) < int(e)]
        walk.append(max(e for _, e in ranges) - min(b for b, _ in ranges) if ranges else 0)
    if down:
        assert walk == sorted(walk, reverse=True) and walk[0] > walk[-1]
    else:
        assert [g for g, _, _ in launch][:n_groups] == list(range(n_groups))
    # past the grid's z limit the query tiles stay in x, ascending
    grid, flags = ordering.dq_gemm_block_order.__wrapped__(ordering.MAX_GRID_YZ + 1, 1, 1, _bounds(None, 0), 0)
    assert int(grid[0]) == ordering.MAX_GRID_YZ + 1 and not int(flags) & FLAG_Q_TILES_DOWN


@pytest.mark.parametrize("case", list(_cases(60, seed=11)),
                         ids=lambda c: "sq{}_skv{}_L{}_R{}_br{}_n{}m{}".format(*c[:5], *c[5]))
def test_a_skipped_key_block_holds_no_visible_pair(case):
    """TileConfig.atom_skip / dq_skip_parts leave out the work of a block of keys (16 for a warp's MMA atom, 32 or
    64 for a part of a KV tile) when ``block_sees`` says no row of the step sees it: that must never drop a visible
    pair. Rows past sq count as seeing their band (their probabilities are 0 anyway), so the answer is exactly
    whether the band of the step's rows meets the block's keys below skv."""
    sq, skv, left, right, br, (n_size, m_size) = case
    mask = _mask(sq, skv, left, right, br)
    block_sees = AttentionMask.block_sees.__wrapped__
    for keys in (16, 32, 64):
        for key0 in range(0, -(-skv // n_size) * n_size, keys):
            for m in range(-(-sq // m_size)):
                rows = range(m * m_size, (m + 1) * m_size)
                in_band = any(_in_band(sq, skv, left, right, br, i, j) for i in rows for j in range(key0, key0 + keys))
                assert bool(block_sees(mask, m * m_size, m_size, key0, keys)) == in_band, (key0, keys, m)
                if not in_band:
                    assert not any(_visible(sq, skv, left, right, br, i, j) for i in rows
                                   for j in range(key0, key0 + keys))


_BWD_MAIN = _fresh_copy("frost.kernels.backward.bwd_main")


@pytest.mark.parametrize("case", list(_cases(60, seed=13)),
                         ids=lambda c: "sq{}_skv{}_L{}_R{}_br{}_n{}m{}".format(*c[:5], *c[5]))
def test_the_dq_gemm_takes_every_key_part_a_step_sees(case):
    """TileConfig.dq_skip_parts = P: a step's dQ GEMM runs the k-blocks of the path ``_dq_k_path`` picks among
    ``_dq_k_paths``. Every key the step's rows see must lie in them (a key left out loses its dS . K), and the
    path must be the tight one: from part 0 to the last part seen, or from the first part seen to the end."""
    from types import SimpleNamespace

    sq, skv, left, right, br, (n_size, m_size) = case
    mask = _mask(sq, skv, left, right, br)
    kernel = _BWD_MAIN.BwdMainKernel
    for parts in (2, 4):
        fake = SimpleNamespace(N=n_size, M=m_size, tile=SimpleNamespace(dq_skip_parts=parts))
        paths = kernel._dq_k_paths(fake)
        part_blocks = n_size // 16 // parts
        assert len(paths) == 2 * parts - 1 and paths[parts - 1] == range(n_size // 16)
        for n in range(-(-skv // n_size)):
            for m in range(-(-sq // m_size)):
                rows, keys = range(m * m_size, (m + 1) * m_size), range(n * n_size, (n + 1) * n_size)
                seen = [j - n * n_size for j in keys if any(_visible(sq, skv, left, right, br, i, j) for i in rows)]
                # the band's reach, rows past sq included (key_span counts them as seeing)
                reach = [j - n * n_size for j in keys if any(_in_band(sq, skv, left, right, br, i, j) for i in rows)]
                if not reach:
                    continue
                taken = paths[kernel._dq_k_path.__wrapped__(fake, mask, n, m)]
                first, last = reach[0] // 16 // part_blocks, reach[-1] // 16 // part_blocks
                assert all(j // 16 in taken for j in seen), (n, m, taken)
                if first == 0:
                    assert taken == range((last + 1) * part_blocks), (n, m, taken)
                else:
                    assert taken == range(first * part_blocks, parts * part_blocks), (n, m, taken)

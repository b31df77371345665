"""Tile configs as data (no GPU): every field reaches the compile key, head dims pad to served tiles, copies and
row splits fit their tiles."""

import dataclasses

import pytest

from frost.kernels.backward.select import tile_key
from frost.kernels.backward.catalogue import all_tiles


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(all_tiles()[0])])
def test_tile_key_reflects_every_field(field):
    """The generated code depends on every field, so the compile key (and the disk-cache entry) must too: a field
    left out would let a changed tile load kernels compiled for the old one."""
    for tile in all_tiles():
        value = getattr(tile, field)
        other = (not value) if isinstance(value, bool) else value + 1
        assert tile_key(dataclasses.replace(tile, **{field: other})) != tile_key(tile), (field, tile)


def test_narrow_v_tiles():
    """192/128 gets the grid kernel with 128-wide V tiles (its own compile key); other V widths pad to Q/K's."""
    from frost.kernels.backward.api import choose_config
    from frost.kernels.backward.catalogue import TileConfig, served_pads, tile_for

    narrow = tile_for(192, 128)
    assert narrow.warp_grid and narrow.dv_pad == 128 and narrow.head_dim_pad == 192
    assert tile_for(184, 104).dv_pad == 128           # logical dims padding to 192 / 128
    for dv in (192, 160, 32):                          # no tile of their own: V padded to 192
        assert tile_for(192, dv) == tile_for(192, 192) and tile_for(192, dv).dv_pad == 192
    assert narrow.smem_bytes() < tile_for(192, 192).smem_bytes()
    assert (192, 128) in served_pads() and len(set(served_pads())) == len(served_pads())
    keys = {choose_config("bfloat16", 192, dv, True, "top_left", "sm_120a").key.as_str() for dv in (192, 128)}
    assert len(keys) == 2
    assert choose_config("bfloat16", 64, 64, True, "top_left", "sm_120a").key.head_dim_v_pad == 0
    rows = TileConfig(128, 128, 32, 2, 1, False, 128, head_dim_v_pad=64)
    with pytest.raises(AssertionError, match="rows kernel pads V"):
        rows.check()


@pytest.mark.parametrize("head_dim, pad", [(8, 32), (32, 32), (40, 48), (48, 48), (56, 64), (72, 80), (80, 80),
                                           (88, 96), (136, 160), (200, 256), (224, 256),
                                           (256, 256)])
def test_head_dims_pad_to_the_smallest_served_pad(head_dim, pad):
    """40/48 and 72/80 have tiles of their own (48 and 80 wide); the rest pad to a multiple of 32, except 200-224,
    which pad to 256 (no 224 pad: the d256 set measured faster on them, tiles.py)."""
    from frost.kernels.backward.catalogue import pad_head_dim, tile_for

    assert pad_head_dim(head_dim) == pad and tile_for(head_dim, head_dim).head_dim_pad == pad


@pytest.mark.parametrize("head_dim", [0, 12, 264])
def test_unserved_head_dims_are_refused(head_dim):
    from frost.kernels.backward.catalogue import pad_head_dim

    with pytest.raises(ValueError, match=f"head dim {head_dim}: need a positive multiple of 8 <= 256"):
        pad_head_dim(head_dim)


def test_row_split_of_the_rowwise_kernels_covers_every_pad():
    """The preprocess and dQ conversion split a row over a power of two of threads (a butterfly sums their
    partials) whose chunk slots cover the row: 48 columns (6 chunks) take 4 threads with 2 slots each."""
    from frost.kernels.backward.rowwise import CHUNK, chunks_per_thread, threads_per_row
    from frost.kernels.backward.catalogue import HEAD_DIM_PADS

    for pad in HEAD_DIM_PADS:
        tpr, chunks = threads_per_row(pad), pad // CHUNK
        assert tpr & (tpr - 1) == 0 and tpr <= min(8, chunks) < 2 * tpr, pad
        assert tpr * chunks_per_thread(pad) >= chunks > tpr * (chunks_per_thread(pad) - 1), pad
    assert (threads_per_row(48), chunks_per_thread(48)) == (4, 2)


def test_copy_threads_never_reach_past_a_tile():
    """A 16-bit global->shared copy lays its threads (threads / chunks, chunks) over a tile, chunks being the
    16-byte chunks of a swizzle-atom row: a 64-row, 80-column tile (2 chunks) takes 128 threads, not 256."""
    from frost.kernels.cute_utils import copy_threads
    from frost.kernels.backward.catalogue import all_tiles
    from frost.kernels.geometry import swizzle_atom_cols

    assert (copy_threads(256, 64, 80), copy_threads(128, 32, 48), copy_threads(256, 32, 128)) == (128, 64, 256)
    for t in all_tiles():
        for rows, cols in ((t.m_block, t.head_dim_pad), (t.m_block, t.dv_pad), (t.n_block, t.head_dim_pad)):
            n = copy_threads(t.num_threads, rows, cols)
            assert n <= t.num_threads and n // (swizzle_atom_cols(cols) // 8) <= rows, (t, rows, cols)


def test_the_ordered_set_compiles_its_own_changes_to_a_tile():
    """KernelKey.tile applies catalogue._ORDERED_CHANGES to the ordered set only (d160 takes its whole dQ in one chunk
    there, d32 releases at the top), the compile keys of the two sets differ, and both tiles are checked."""
    from frost.kernels.backward.select import KernelKey

    atomic, ordered = (KernelKey("bfloat16", 160, "sm_120a", 0, o).tile for o in (False, True))
    assert (atomic.dq_chunk, ordered.dq_chunk, ordered.do_stages) == (32, 160, 2)
    assert tile_key(atomic) != tile_key(ordered) and {atomic, ordered} <= set(all_tiles())
    assert KernelKey("bfloat16", 64, "sm_120a", 0, True).tile == KernelKey("bfloat16", 64, "sm_120a").tile
    assert [KernelKey("bfloat16", 32, "sm_120a", 0, o).tile.release_at_top for o in (False, True)] == [False, True]
    # the lagged dQ: with its barrier (bwd_main_lag) in both sets at d80; three stages on mbarriers (bwd_main_pipe)
    # in both sets at d96 and d128, the ordered sets releasing after the trip's GEMMs and in turn over the warps
    for o in (False, True):
        t = KernelKey("bfloat16", 80, "sm_120a", 0, o).tile
        assert (t.dq_lag, t.dq_lag_mbar, t.q_stages, t.do_stages, t.release_late) == (True, False, 2, 2, False), t
    for d in (96, 128):
        pipe, opipe = (KernelKey("bfloat16", d, "sm_120a", 0, o).tile for o in (False, True))
        for t in (pipe, opipe):
            assert (t.dq_lag, t.dq_lag_mbar, t.q_stages, t.do_stages, t.k_in_regs) == (True, True, 3, 3, False), t
        assert (pipe.release_late, pipe.release_rotate, opipe.release_late, opipe.release_rotate) == (
            False, False, True, True)
        assert tile_key(pipe) != tile_key(opipe)
    # the 16-byte dQ adds spill d128's ordered pipe on sm_120a
    assert [KernelKey("bfloat16", 128, "sm_120a", 0, o).tile.dq_red_v4 for o in (False, True)] == [True, False]
    narrow = KernelKey("bfloat16", 192, "sm_120a", 128, True).tile
    assert narrow == KernelKey("bfloat16", 192, "sm_120a", 128).tile and narrow.dv_pad == 128
    for t in (atomic, ordered):
        t.check()


def test_only_the_lagged_step_places_its_release():
    """release_late / release_rotate choose where bwd_main_lag's and bwd_main_pipe's ordered releases go; bwd_main's
    step releases at its barriers, so its tiles refuse them."""
    from frost.kernels.backward.catalogue import TileConfig

    lag = TileConfig(128, 128, 32, 2, 2, False, 128, dq_lag=True)
    for field in ("release_late", "release_rotate"):
        dataclasses.replace(lag, **{field: True}).check()
        with pytest.raises(AssertionError, match="lagged step's releases"):
            dataclasses.replace(lag, dq_lag=False, **{field: True}).check()


def test_skipping_unseen_keys_is_a_rows_kernel_change_of_the_narrow_band_sets():
    """atom_skip traces a step per set of live MMA atoms: bwd_main's step with two atoms per warp (32 rows) or the
    lagged step with one (16); the grid kernel has neither, nor the dQ GEMM dq_skip_parts trims. The narrow-band
    sets take them where measured faster (d48-d128), the atomic and ordered sets never."""
    from frost.kernels.backward.catalogue import _TABLE, TileConfig, narrow_pads, tile_for_pads, tile_for_set

    replace = dataclasses.replace
    for bad in (TileConfig(96, 128, 32, 1, 1, False, 96, rows_per_warp=16),                    # 16 rows, bwd_main
                _TABLE[192],                                                                    # the grid kernel
                TileConfig(64, 128, 32, 2, 2, False, 64, rows_per_warp=32, dq_lag=True)):       # 32 rows, lagged
        bad.check()
        with pytest.raises(AssertionError, match="atom_skip"):
            replace(bad, atom_skip=True).check()
    for bad, parts in ((_TABLE[192], 2), (_TABLE[64], 3), (_TABLE[64], 8), (_TABLE[160], 8)):
        with pytest.raises(AssertionError, match="dq_skip_parts"):
            replace(bad, dq_skip_parts=parts).check()
    replace(_TABLE[160], dq_skip_parts=4).check()  # 64-key tiles: one k-block a part
    skipping = []
    for d in narrow_pads():
        tile = tile_for_set(tile_for_pads(d), True, narrow=True)
        tile.check()
        if tile.atom_skip:
            skipping.append(d)
        for plain in (tile_for_set(tile_for_pads(d), o) for o in (False, True)):
            assert not (plain.atom_skip or plain.dq_skip_parts), (d, plain)
    assert skipping == [48, 64, 80, 96, 128]
    parts = [tile_for_set(tile_for_pads(d), True, narrow=True).dq_skip_parts for d in narrow_pads()]
    assert parts == [0, 2, 2, 2, 4, 4]  # d32 none; halves at d48-d80, quarters at d96/d128 (measured faster there)
    from frost.kernels.backward.select import KernelKey  # targets where a narrow set's change spills run without

    def per_target(d, field):
        return [getattr(KernelKey(dt, d, arch, ordered=True, narrow=True).tile, field)
                for arch in ("sm_120a", "sm_90a") for dt in ("bfloat16", "float16")]
    assert per_target(128, "atom_skip") == [True, False, True, True]
    assert per_target(64, "diff_mask") == [True, True, True, False] and all(per_target(64, "atom_skip"))


def test_a_target_that_spills_a_tile_compiles_its_own_changes():
    """catalogue._TARGET_CHANGES: d128 fp16 on sm_90a pipelines two stages (three spill there); the same pad in bf16, or
    on SM120, and the ordered set are untouched, and the compile keys differ. The ordered set takes
    _ORDERED_TARGET_CHANGES (d128 fp16 on sm_120a: no cp.async zero-fill), the narrow-band set
    _NARROW_TARGET_CHANGES; d192's atomic set on sm_90a compiles with catalogue.TARGET_PTXAS, no other set does."""
    from frost.kernels.backward.select import KernelKey

    fp16_sm90 = KernelKey("float16", 128, "sm_90a").tile
    assert fp16_sm90.dq_lag_mbar and fp16_sm90.q_stages == fp16_sm90.do_stages == 2
    for dtype, arch in (("bfloat16", "sm_90a"), ("float16", "sm_120a")):
        assert KernelKey(dtype, 128, arch).tile.q_stages == 3, (dtype, arch)
    ordered_sm90 = KernelKey("float16", 128, "sm_90a", 0, True).tile
    assert ordered_sm90.async_zfill and ordered_sm90.q_stages == 3
    assert KernelKey("float16", 128, "sm_120a", 0, True).tile == dataclasses.replace(ordered_sm90, async_zfill=False)
    assert tile_key(fp16_sm90) != tile_key(KernelKey("float16", 128, "sm_120a").tile)
    narrow = {arch: KernelKey("bfloat16", 128, arch, ordered=True, narrow=True).tile for arch in ("sm_90a", "sm_120a")}
    assert narrow["sm_120a"] == dataclasses.replace(narrow["sm_90a"], async_zfill=False)
    assert KernelKey("bfloat16", 192, "sm_90a").ptxas_options == "--register-usage-level 2"
    assert KernelKey("bfloat16", 192, "sm_120a").ptxas_options is None
    assert KernelKey("bfloat16", 192, "sm_90a", ordered=True).ptxas_options is None
    fp16_sm90.check()


def test_the_dq_gemm_set_compiles_its_own_changes_to_a_tile():
    """KernelKey.tile applies catalogue._DQ_GEMM_CHANGES to the dq_gemm set only: d160's main kernel double-buffers dO
    there (84 KB, within SM120's limit), except in fp16 on sm_90a (_TARGET_CHANGES: it spills there, and with the
    cp.async zero-fill and lean refills too), and refills at lean_refill 1; the atomic and
    ordered sets keep their own tiles, the compile keys differ, and d256's dq_gemm tile is the table's."""
    from frost.kernels.backward.select import KernelKey
    from frost.kernels.arch import SMEM_LIMIT_BYTES
    from frost.kernels.backward.catalogue import tile_for_pads

    gemm = KernelKey("bfloat16", 160, "sm_120a", dq_gemm=True).tile
    atomic, ordered = (KernelKey("bfloat16", 160, "sm_120a", 0, o).tile for o in (False, True))
    assert (atomic.do_stages, gemm.do_stages, gemm.dq_chunk) == (1, 2, atomic.dq_chunk)
    assert gemm.smem_bytes() <= SMEM_LIMIT_BYTES and gemm in set(all_tiles())
    assert len({tile_key(t) for t in (atomic, ordered, gemm)}) == 3
    assert KernelKey("float16", 160, "sm_120a", dq_gemm=True).tile == gemm
    assert KernelKey("float16", 160, "sm_90a", dq_gemm=True).tile == dataclasses.replace(atomic, async_zfill=False)
    assert KernelKey("bfloat16", 256, "sm_90a", dq_gemm=True).tile == tile_for_pads(256)
    gemm.check()


def test_a_lagged_dq_tile_needs_v_in_registers_and_both_operands_double_buffered():
    """bwd_main_lag keeps V in registers (K stays in shared memory) and refills nothing mid-step, so its tile must
    not ask for K in registers, a single buffer or a second pass; its shared memory counts dO and dS^T in V's."""
    from frost.kernels.backward.catalogue import TileConfig

    lag = TileConfig(128, 128, 32, 2, 2, False, 128, dq_lag=True)
    lag.check()
    assert lag.smem_bytes() == 2 * 128 * 128 * 2 + 2 * 32 * 128 * 2 + 2 * 2 * 32 * 4  # K, V (dO, dS^T), Q; vectors
    for bad in ({"do_stages": 1}, {"k_in_regs": True}, {"two_pass": True}):
        with pytest.raises(AssertionError, match="dq_lag"):
            dataclasses.replace(lag, **bad).check()
    with pytest.raises(AssertionError, match="dq_lag_mbar"):  # the mbarriers pipeline the lagged step only
        dataclasses.replace(lag, dq_lag=False, dq_lag_mbar=True).check()
    # eight mbarriers, and two more that the ordered set allocates
    assert dataclasses.replace(lag, dq_lag_mbar=True).smem_bytes() == lag.smem_bytes() + 80
    with pytest.raises(AssertionError, match="three stages"):  # loads two steps ahead: the mbarrier pipeline only
        dataclasses.replace(lag, q_stages=3, do_stages=3).check()
    three = dataclasses.replace(lag, q_stages=3, do_stages=3, dq_lag_mbar=True)
    three.check()  # dO's three stages and dS^T's two buffers outgrow V's 32 KB: 40 KB
    assert three.smem_bytes() == 128 * 128 * 2 + 40 * 1024 + 3 * 32 * 128 * 2 + 2 * 3 * 32 * 4 + 12 * 8


def test_16_byte_dq_adds_need_16_column_warp_slices():
    """dq_red_v4 joins a warp's two 8-column dQ atoms of a tiled-MMA step (a 16-column slice) into one 16-byte add
    per lane pair: the 8-column slices of d48/d80/d96 and the grid kernel's dQ are refused; d64 serves it in both
    dQ orders, d128 in the atomic set (its ordered pipe spills with it on sm_120a)."""
    from frost.kernels.backward.catalogue import GRID_VARIANTS, tile_for_set, tile_for_pads

    for pad in (48, 80, 96):
        assert tile_for_pads(pad).dq_col_step == 8
        with pytest.raises(AssertionError, match="dq_red_v4"):
            dataclasses.replace(tile_for_pads(pad), dq_red_v4=True).check()
    with pytest.raises(AssertionError, match="dq_red_v4"):
        dataclasses.replace(next(iter(GRID_VARIANTS.values())), dq_red_v4=True).check()
    for pad, ordered in ((64, False), (64, True), (128, False)):
        tile = tile_for_set(tile_for_pads(pad), ordered)
        assert tile.dq_red_v4 and tile.dq_col_step == 16, (pad, ordered)


def test_lean_refills_and_the_async_zero_fill_are_served_where_measured():
    """TileConfig.lean_refill (0, 1 or 2) where it measured faster: level 2 on every d32 and d64 set but d64's MHA
    set (level 1: catalogue._MHA_CHANGES), level 1 on every d48 set and on the d96 and d160 dq_gemm sets, level 2
    on the d192 dq_gemm set (_DQ_GEMM_CHANGES); the other sets refill as before. The cp.async zero-fill
    (async_zfill) is on by default, off at d80 (measured slower) and on the targets where it spills."""
    from frost.kernels.backward.select import KernelKey
    from frost.kernels.backward.catalogue import _TABLE, HEAD_DIM_PADS, tile_for_pads, tile_for_set

    for level in (-1, 3):
        with pytest.raises(AssertionError, match="lean_refill"):
            dataclasses.replace(_TABLE[64], lean_refill=level).check()
    levels = {d: [KernelKey("bfloat16", d, "sm_120a", ordered=o).tile.lean_refill for o in (False, True)]
              for d in HEAD_DIM_PADS}
    assert levels == {d: [{32: 2, 48: 1, 64: 2}.get(d, 0)] * 2 for d in HEAD_DIM_PADS}
    assert {d: KernelKey("bfloat16", d, "sm_120a", ordered=True, narrow=True).tile.lean_refill
            for d in (32, 48, 64, 80, 96, 128)} == {32: 2, 48: 1, 64: 2, 80: 0, 96: 0, 128: 0}
    assert {d: KernelKey("bfloat16", d, "sm_120a", dq_gemm=True).tile.lean_refill
            for d in (96, 128, 160, 192, 256)} == {96: 1, 128: 0, 160: 1, 192: 2, 256: 0}
    mha = KernelKey("bfloat16", 64, "sm_120a", mha=True).tile
    assert mha == tile_for_set(tile_for_pads(64), False, mha=True) and (mha.lean_refill, mha.async_zfill) == (1, True)
    assert [d for d in HEAD_DIM_PADS if not KernelKey("bfloat16", d, "sm_120a").tile.async_zfill] == [80]

"""Tile configs as data (no GPU, no cutlass): every field reaches the compile key."""

import dataclasses

import pytest

from frost.kernels.compile import tile_key
from frost.kernels.tiles import all_tiles


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
    from frost.kernels.api import choose_config
    from frost.kernels.tiles import TileConfig, served_pads, tile_for

    narrow = tile_for(192, 128)
    assert narrow.warp_grid and narrow.dv_pad == 128 and narrow.head_dim_pad == 192
    assert tile_for(184, 104).dv_pad == 128           # logical dims padding to 192 / 128
    for dv in (192, 160, 32):                          # no tile of their own: V padded to 192
        assert tile_for(192, dv) == tile_for(192, 192) and tile_for(192, dv).dv_pad == 192
    assert narrow.smem_bytes() < tile_for(192, 192).smem_bytes()
    assert (192, 128) in served_pads() and len(set(served_pads())) == len(served_pads())
    keys = {choose_config("bfloat16", 192, dv, True, "top_left", "sm_120a").kernel_key.as_str() for dv in (192, 128)}
    assert len(keys) == 2
    assert choose_config("bfloat16", 64, 64, True, "top_left", "sm_120a").kernel_key.head_dim_v_pad == 0
    rows = TileConfig(128, 128, 32, 2, 1, False, 128, head_dim_v_pad=64)
    with pytest.raises(AssertionError, match="rows kernel pads V"):
        rows.check()

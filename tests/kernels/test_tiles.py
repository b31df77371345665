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

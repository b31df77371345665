import torch

from frost.lowering import ALIGN
from frost.lowering.workspace import carve, pack


def test_regions_are_256_byte_aligned_and_disjoint():
    layout = pack([("dq_accum", 1000), ("delta", 4), ("lse_log2", 513)])
    assert [r.offset % ALIGN for r in layout.regions] == [0, 0, 0]
    ends = [r.offset + r.nbytes for r in layout.regions]
    assert all(end <= nxt.offset for end, nxt in zip(ends, layout.regions[1:]))
    assert layout.size % ALIGN == 0 and layout.size >= ends[-1]


def test_carve_gives_views_not_copies():
    layout = pack([("a", 10), ("b", 300)])
    buf = torch.zeros(layout.size, dtype=torch.uint8)
    views = carve(buf, layout.regions)
    views["b"].fill_(7)
    assert views["b"].numel() == 300 and int(buf[layout.region("b").offset]) == 7
    assert views["b"].untyped_storage().data_ptr() == buf.untyped_storage().data_ptr()

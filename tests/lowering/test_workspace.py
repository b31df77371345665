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
    buf = torch.zeros(layout.size + 64, dtype=torch.uint8)[64:]    # a buffer that does not start its storage
    views = carve(buf, layout.regions)
    b = layout.region("b")
    assert views["b"].data_ptr() == buf.data_ptr() + b.offset and views["a"].data_ptr() == buf.data_ptr()
    views["b"].tensor().fill_(7)
    assert views["b"].tensor().numel() == 300 and int(buf[b.offset]) == 7 and int(buf[b.offset + 300]) == 0
    assert views["b"].tensor().untyped_storage().data_ptr() == buf.untyped_storage().data_ptr()
    views["b"].zero_()
    assert int(buf.sum()) == 0

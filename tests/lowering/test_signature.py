from frost.ir import layout_strides
from frost.lowering import make_signature


def sig(shape, layout="bshd", dtype="bfloat16"):
    return make_signature(dtype, shape, layout_strides(shape, layout))


def test_batch_and_sequence_extents_do_not_change_the_signature():
    base = sig((2, 8, 128, 64))
    for b, s in ((1, 128), (4, 77), (3, 4096), (8, 2)):
        assert sig((b, 8, s, 64)).kernel_tag == base.kernel_tag
    assert sig((4, 8, 77, 64)) == base  # any B > 1 and S > 1: identical in every field


def test_layouts_and_head_facts():
    bshd, bhsd = sig((2, 8, 128, 64)), sig((2, 8, 128, 64), "bhsd")
    assert bshd.stride_order == (0, 2, 1, 3) and bhsd.stride_order == (0, 1, 2, 3)
    assert bshd.heads == 8 and bshd.head_dim == 64 and bshd.inner_unit and bshd.strides_aligned16
    assert all(bshd.dense) and all(bhsd.dense)
    assert sig((2, 8, 128, 64)) != sig((2, 4, 128, 64))  # head counts are part of it


def test_alignment_and_gaps():
    odd = make_signature("bfloat16", (2, 4, 16, 36), (16 * 4 * 36, 36, 4 * 36, 1))   # 72-byte rows
    assert not odd.strides_aligned16
    padded = make_signature("bfloat16", (2, 4, 16, 64), (16 * 4 * 72, 72, 4 * 72, 1))  # 8 elements of gap per row
    assert padded.strides_aligned16 and padded.dense[1] is False
    transposed = make_signature("float16", (2, 4, 16, 64), (4096, 1024, 1, 16))
    assert not transposed.inner_unit

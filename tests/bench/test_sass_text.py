"""tools.sass's text helpers on a synthetic nvdisasm listing (no CUDA tools needed)."""

from tools import sass

LISTING = """\t.headerflags\t@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
//--------------------- .text.kernel_a_Preprocess --------------------------
\t.section\t.text.kernel_a_Preprocess,"ax",@progbits
.text.kernel_a_Preprocess:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 BRA 0x40 ;
        /*0020*/                   EXIT ;
//--------------------- .text.kernel_b_BwdMain --------------------------
\t.section\t.text.kernel_b_BwdMain,"ax",@progbits
.text.kernel_b_BwdMain:
        /*0000*/                   LDSM.16.M88.4 R4, [R2] ;
        /*0010*/                   HMMA.16816.F32.BF16 R8, R4, R6, RZ ;
        /*0020*/             @UP0 BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0030*/                   MEMBAR.ALL.GPU ;
        /*0040*/                   HMMA.16816.F32.BF16 R12, R4, R6, R8 ;
"""


def test_functions_split_the_listing_per_kernel():
    parts = sass.functions(LISTING)
    assert list(parts) == ["kernel_a_Preprocess", "kernel_b_BwdMain"]
    assert "HMMA" not in parts["kernel_a_Preprocess"] and "LDSM" in parts["kernel_b_BwdMain"]


def test_instruction_and_mnemonic_counts():
    main = sass.functions(LISTING)["kernel_b_BwdMain"]
    assert sass.instructions(LISTING) == 8 and sass.instructions(main) == 5   # predicated ones included
    assert sass.count(main, "HMMA") == 2 and sass.count(main, "BAR") == 1     # MEMBAR is not a BAR

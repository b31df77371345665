"""The backward family: its catalogue (which kernel set a problem runs), its kernels (preprocess, the main kernel's
variants, the dQ GEMM and dQ convert, chained behind one host entry), their compile and their launch."""

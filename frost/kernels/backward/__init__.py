"""The backward family: its tiles and catalogue (every kernel set's choices as data), select (which kernel set a
problem runs), its kernels (preprocess, the main kernel's variants, the dQ GEMM and dQ convert, chained behind one
host entry: chain.py), their compile, their launch, the public entry's checks and api."""

# A machine with an NVIDIA GPU: the default torch wheel is a CUDA build.
pip install -e .
frost demo

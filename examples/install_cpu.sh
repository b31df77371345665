# A machine without an NVIDIA GPU: CPU torch first, so that pip does not pull a multi-GB CUDA build of torch.
pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install -e .
frost demo

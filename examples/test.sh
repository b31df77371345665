pip install -e ".[test]" && python3 -m pytest -q    # what CI (.ci/run) runs; tests marked `gpu` skip without a GPU
python3 -m pytest -q -m gpu                         # on a CUDA machine: the GPU tests

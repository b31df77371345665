pip install -e ".[test]" && python3 -m pytest -q    # every CPU test and the compile gate: what CI (.ci/run) runs
python3 -m pytest -q -m "not compile_gate"          # without the compile gate: under 2 minutes on 2 cores
python3 -m pytest -q -m gpu                         # on a machine with a CUDA GPU: the GPU tests

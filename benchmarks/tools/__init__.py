"""Tools for tuning the kernels, not for users: the A/B harness's GPU-free parts (ab) and SASS reading (sass).
Scripts in benchmarks/ put benchmarks/ on sys.path and import them as ``tools``."""

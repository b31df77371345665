"""The cute_sm120 forward kernel's disk-cache payload, without a GPU: a kernel cross-compiled for sm_120a exports
to bytes and loads back as a launcher (no compilation); an entry for another config, or a damaged one, is refused
(the kernel cache then recompiles). Compiles one kernel, so it runs with the compile gate (-m compile_gate)."""

from __future__ import annotations

import pytest

from frost.lowering.engines import cute_persist

pytestmark = pytest.mark.compile_gate


def test_export_and_load_round_trip():
    from frost.kernels.forward.api import CompiledForward, choose_forward_config
    from frost.kernels.forward.compile import compile_forward_kernel

    cfg = choose_forward_config("bfloat16", 64, 64, "sm_120a")
    data = cute_persist.export_forward(CompiledForward(cfg, kernel=compile_forward_kernel(cfg.key)))
    loaded = cute_persist.load_forward(data, cfg)
    assert loaded.cfg == cfg and loaded.kernel.key == cfg.key and loaded.kernel.compiled is None
    assert type(loaded.kernel.forward).__name__ == "Function"      # a raw tvm_ffi.Function: nothing recompiled
    with pytest.raises(ValueError, match="freshly compiled"):
        cute_persist.export_forward(loaded)
    other = choose_forward_config("bfloat16", 128, 128, "sm_120a")
    with pytest.raises(ValueError, match="does not match"):
        cute_persist.load_forward(data, other)
    with pytest.raises(ValueError, match="does not match"):
        cute_persist.load_forward(data[:-10], cfg)

"""A CuTe-DSL peer's launches padded to SM120's occupancy (frost.bench.sm120_launches): the size each launch asks
for, that a compiled kernel carries it, that nothing outside the context is touched, and the refused disk cache."""

import re

import pytest

from frost.kernels.arch import SM90_SMEM_MAX_PER_CTA


def test_sizes_follow_frosts_own_padding():
    from frost.bench.sm120_launches import padded_size

    assert padded_size("sm_90a", 64 * 1024) == SM90_SMEM_MAX_PER_CTA          # one SM120 CTA: one per SM
    assert padded_size("sm_90a", 40 * 1024) == 228 * 1024 // 2 - 1024          # two SM120 CTAs: two per SM
    assert padded_size("sm_120a", 64 * 1024) == 64 * 1024                       # SM120 itself: as asked
    assert padded_size("sm_90a", None) is None and padded_size("sm_90a", True) is True


def _launch_constants(smem: int, arch: str, padded: bool) -> list[int]:
    from frost.bench.sm120_hold import compile_hold
    from frost.bench.sm120_launches import padded_launches

    if padded:
        with padded_launches(arch):
            compiled = compile_hold(smem, arch)
    else:
        compiled = compile_hold(smem, arch)
    return [int(n) for n in re.findall(r"llvm\.mlir\.constant\((\d+) : i64\)", str(compiled.ir_module))]


@pytest.mark.compile_gate
def test_a_kernel_compiled_inside_carries_the_padded_size():
    pytest.importorskip("cutlass")
    smem = 70000
    inside = _launch_constants(smem, "sm_90a", padded=True)
    assert SM90_SMEM_MAX_PER_CTA in inside and smem not in inside
    outside = _launch_constants(smem, "sm_90a", padded=False)      # the patch is gone after the block
    assert smem in outside and SM90_SMEM_MAX_PER_CTA not in outside


def test_fa4s_disk_cache_is_refused(monkeypatch):
    from frost.bench.sm120_launches import FA4_DISK_CACHE, PaddingUnavailable, padded_launches

    monkeypatch.setenv(FA4_DISK_CACHE, "1")
    with pytest.raises(PaddingUnavailable, match=FA4_DISK_CACHE):
        with padded_launches("sm_90a"):
            pass


def test_only_peers_are_padded_and_only_when_asked():
    from contextlib import nullcontext

    from frost.bench import runner

    from .fakes import FakeBackend

    peer, frost_like = FakeBackend("peer"), FakeBackend("frost")
    frost_like.holds_itself = True
    padded = runner.Options(device="cuda", peer_smem="padded")
    assert not isinstance(runner.launches_for(peer, padded), nullcontext)
    assert isinstance(runner.launches_for(frost_like, padded), nullcontext)
    assert isinstance(runner.launches_for(peer, runner.Options(device="cuda")), nullcontext)
    assert isinstance(runner.launches_for(peer, runner.Options(device="cpu", peer_smem="padded")), nullcontext)
    assert runner.hold_for(peer, padded) is None          # padding is not the hold


def test_caption_says_which_kernels_were_padded():
    from frost.bench import doc_tables

    words = doc_tables.smem_words({"capability": "sm_90", "peer_smem": "padded"})
    assert "FA4's kernels launched at SM120's occupancy" in words and "torch's not" in words

"""SM120's shared memory held for the peers (frost.bench.sm120_hold): how much a holder takes, that it builds and
sleeps (SASS), that only the timed calls of a peer run under it, and how a table says so. The `gpu` tests check the
mechanism itself: under a hold an SM takes a 99 KB CTA but not a 120 KB one, and a device-wide synchronize inside
a hold is reported as a broken hold, never timed."""

import pytest

from frost.bench import doc_tables, runner, timing
from frost.kernels.arch import SM90_SMEM_PER_SM, SM120_SMEM_PER_SM, SMEM_RESERVED_PER_CTA

from .fakes import FakeBackend


def test_hold_leaves_exactly_sm120s_shared_memory():
    from frost.bench.sm120_hold import hold_bytes

    held = hold_bytes(SM90_SMEM_PER_SM)
    assert SM90_SMEM_PER_SM - (held + SMEM_RESERVED_PER_CTA) == SM120_SMEM_PER_SM
    assert hold_bytes(SM120_SMEM_PER_SM) == 0 and hold_bytes(64 * 1024) == 0


@pytest.mark.compile_gate
@pytest.mark.parametrize("arch", ["sm_90a", "sm_120a"])
def test_holder_sleeps_and_spills_nothing(arch, tmp_path):
    pytest.importorskip("cutlass")
    from tools import sass

    from frost.bench.sm120_hold import compile_hold, hold_bytes

    for tool in ("nvdisasm", "cuobjdump"):
        if sass.find_tool(tool) is None:
            pytest.fail(f"{tool} not found: {sass.PIP_HINT}")
    text = sass.disassemble(compile_hold(hold_bytes(SM90_SMEM_PER_SM), arch, str(tmp_path)).__cubin__)
    assert sass.count(text, "NANOSLEEP") == 1
    assert sass.count(text, "STL") == 0 and sass.count(text, "LDL") == 0


class RecordingHold:
    """A stand-in hold that records which calls ran inside it."""

    def __init__(self, calls: list):
        self.calls, self.entered = calls, 0

    def __call__(self):
        return self

    def __enter__(self):
        self.entered += 1
        self.calls.append("enter")

    def __exit__(self, *exc):
        self.calls.append("exit")


def test_only_the_timed_calls_run_under_the_hold():
    calls: list = []
    hold = RecordingHold(calls)
    t = timing.median_ms(calls.append, 2, warmup=2, iters=4, device="cpu", hold=hold)
    assert hold.entered == 1 and t.calls == 4
    assert calls[:2] == [0, 1] and calls[2] == "enter" and calls[-1] == "exit"   # warm-up outside
    assert len(calls) == 2 + 1 + 1 + 4 + 1


def test_only_peers_are_held_and_only_when_asked():
    peer = FakeBackend("peer")
    frost_like = FakeBackend("frost")
    frost_like.holds_itself = True
    held = runner.Options(device="cuda", peer_smem="sm120")
    assert runner.hold_for(peer, held) is not None
    assert runner.hold_for(frost_like, held) is None
    assert runner.hold_for(peer, runner.Options(device="cuda")) is None
    assert runner.hold_for(peer, runner.Options(device="cpu", peer_smem="sm120")) is None


def test_caption_says_how_the_backends_met_shared_memory():
    h200 = {"capability": "sm_90"}
    assert "the peers' kernels not" in doc_tables.smem_words(h200)                      # runs before the option
    assert "every backend held" in doc_tables.smem_words({**h200, "peer_smem": "sm120"})
    assert doc_tables.smem_words({"capability": "sm_120", "peer_smem": "free"}) == ""   # nothing to hold there


def _probe(smem: int):
    from frost.bench.sm120_hold import Holders
    from frost.kernels.arch import detect_arch

    return Holders(smem, 1, 5.0, detect_arch())


@pytest.mark.gpu
@pytest.mark.xfail(strict=True, reason="the hold does not work yet: a held H100 SM started no other CTA "
                                       "(frost/bench/sm120_hold.py; --peer-smem padded is the working alternative)")
def test_a_held_sm_takes_sm120s_largest_cta_and_nothing_larger():
    from frost.bench.sm120_hold import SmemHold

    hold = SmemHold(max_seconds=30)
    if hold.smem == 0:
        pytest.skip("this GPU's SMs are no bigger than SM120's: nothing to hold")
    with hold:
        fits = _probe(SM120_SMEM_PER_SM - SMEM_RESERVED_PER_CTA)
        too_big = _probe(120 * 1024)
        assert fits.wait_resident(2.0)
        assert not too_big.wait_resident(0.5)
        assert not fits.release()
        too_big.let_go()                   # it ends as soon as it starts: once the hold is gone
    assert too_big.wait_resident(2.0)
    assert not too_big.release()


@pytest.mark.gpu
def test_a_device_wide_sync_inside_a_hold_is_a_broken_hold():
    import torch

    from frost.bench.sm120_hold import HoldBroken, SmemHold

    with pytest.raises(HoldBroken, match="own timeout"):
        with SmemHold(max_seconds=2):
            torch.cuda.synchronize()

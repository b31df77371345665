"""Length checks that never stall the host: a GPU call's lengths are copied asynchronously and checked on the host
by a later call once the copy has landed; a tensor is copied once per version. Here with a stand-in for the CUDA
event and the pinned copy (no GPU needed); tests/kernels/test_deferred_checks_gpu.py runs the real thing."""

from __future__ import annotations

import pytest
import torch

from frost.errors import TensorError
from frost.kernels.host_checks import check_length_values
from frost.lowering.engines import deferred_checks
from frost.lowering.engines.deferred_checks import DeferredChecks


class FakeEvent:
    landed = False   # class-wide: every copy lands when the test says so

    def record(self, stream) -> None:
        pass

    def query(self) -> bool:
        return FakeEvent.landed

    def synchronize(self) -> None:
        FakeEvent.landed = True


@pytest.fixture
def checks(monkeypatch):
    copies = []

    def pinned_copy(t):
        copies.append(t)
        return t.clone()

    FakeEvent.landed = False
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    monkeypatch.setattr(deferred_checks, "_pinned_copy", pinned_copy)
    c = DeferredChecks()
    c.copies = copies
    return c


def _check(host):
    check_length_values(host[0], None, 16, 16)


def test_a_bad_length_is_raised_by_a_later_call_once_its_copy_lands(checks):
    bad = torch.tensor([16, 40, 3], dtype=torch.int32)
    checks.submit((bad,), (16, 16), _check)            # the copy is in flight: nothing to say yet
    checks.submit((torch.tensor([1, 2, 3], dtype=torch.int32),), (16, 16), _check)
    FakeEvent.landed = True
    with pytest.raises(TensorError, match=r"^seq_len_q: got \[16, 40, 3\]; accepted: lengths in \[0, 16\] "
                                          r"\(found in a call made before this one"):
        checks.submit((torch.tensor([1], dtype=torch.int32),), (16, 16), _check)


def test_good_lengths_pass_and_the_values_copied_are_those_of_the_call(checks):
    lengths = torch.tensor([16, 0, 7], dtype=torch.int32)
    checks.submit((lengths,), (16, 16), _check)
    lengths[1] = 99                                     # a later in-place write is a new version: copied again
    checks.submit((lengths,), (16, 16), _check)
    assert len(checks.copies) == 2
    FakeEvent.landed = True
    with pytest.raises(TensorError, match="got \\[16, 99, 7\\]"):
        checks.landed()


def test_a_tensor_is_copied_once_per_version_and_limits(checks):
    lengths = torch.tensor([4, 5], dtype=torch.int32)
    for _ in range(48):                                 # 24 layers, forward and backward, one lengths tensor
        checks.submit((lengths, None), (16, 16), _check)
    checks.submit((lengths, None), (8, 16), _check)     # other limits: checked again
    assert len(checks.copies) == 2


def test_a_new_tensor_in_freed_memory_is_always_checked(checks):
    for step in range(3):
        lengths = torch.tensor([4, 5], dtype=torch.int32)   # a fresh tensor every step, often at the same address
        checks.submit((lengths,), (16, 16), _check)
        del lengths
    assert len(checks.copies) == 3


def test_only_the_last_submissions_are_remembered(checks):
    kept = [torch.tensor([i], dtype=torch.int32) for i in range(40)]   # all alive: only the memory forgets them
    for t in kept:
        checks.submit((t,), (16, 16), _check)
    checks.submit((kept[-1],), (16, 16), _check)        # among the last 32: not copied again
    assert len(checks.copies) == 40
    checks.submit((kept[0],), (16, 16), _check)         # forgotten: copied and checked again
    assert len(checks.copies) == 41


def test_waiting_checks_everything_in_flight(checks):
    checks.submit((torch.tensor([-1], dtype=torch.int32),), (16, 16), _check)
    with pytest.raises(TensorError, match=r"^seq_len_q: got \[-1\]"):
        checks.landed(wait=True)

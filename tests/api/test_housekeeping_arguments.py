"""The public functions around the calls (cache control, target detection, a plan's buffers, the one-call graph
functions' switches) refuse a bad argument with frost's error naming it, as the calls do: before, a float or a
negative plan count was taken, a truthy string reset the counters or added a graph port, and a device string that
names nothing failed inside torch."""

from __future__ import annotations

import re

import numpy as np
import pytest

import frost
from frost.errors import ArgumentTypeError, GraphError, TensorError
from frost.lowering.plan_cache import PLANS


@pytest.fixture
def plan_cache_size():
    size = PLANS.max_size
    yield
    frost.configure_cache(max_plans=size)


@pytest.mark.parametrize("value, error", [(-1, TensorError), (2.5, ArgumentTypeError), ("8", ArgumentTypeError),
                                          (True, ArgumentTypeError)])
def test_configure_cache_refuses_what_is_no_plan_count(plan_cache_size, value, error):
    with pytest.raises(error, match=rf"^max_plans: got {value!r}; accepted: None \(unchanged\) or an int >= 0"):
        frost.configure_cache(max_plans=value)


@pytest.mark.parametrize("value", [0, 3, np.int64(5)])
def test_configure_cache_takes_any_integer_from_zero(plan_cache_size, value):
    frost.configure_cache(max_plans=value)
    assert PLANS.max_size == value and type(PLANS.max_size) is int


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_clear_caches_takes_a_bool(value):
    with pytest.raises(ArgumentTypeError, match=rf"^stats: got {value!r}; accepted: True or False"):
        frost.clear_caches(stats=value)


@pytest.mark.parametrize("device, error", [("banana", TensorError), (2.5, ArgumentTypeError),
                                           (True, ArgumentTypeError), ([0], ArgumentTypeError)])
def test_detect_target_names_a_bad_device(device, error):
    with pytest.raises(error, match=rf"^device: got {re.escape(repr(device))}; accepted: None, a torch.device"):
        frost.detect_target(device)


def test_detect_target_of_the_cpu():
    assert frost.detect_target("cpu") == "cpu"


@pytest.mark.parametrize("device, error", [("banana", TensorError), (5.5, ArgumentTypeError)])
@pytest.mark.parametrize("method", ["new_outputs", "new_workspace"])
def test_a_plans_buffers_name_a_bad_device(method, device, error):
    plan = frost.compile(frost.sdpa_backward_graph(1, 2, 16, 64))
    with pytest.raises(error, match=rf"^device: got {device!r}"):
        getattr(plan, method)(device)


def test_a_plans_buffers_need_a_device_this_machine_has():
    import torch

    plan = frost.compile(frost.sdpa_backward_graph(1, 2, 16, 64))
    missing = f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(TensorError, match=rf"^device: got '{missing}'; accepted: a device of this machine"):
        plan.new_workspace(missing)


@pytest.mark.parametrize("make, flag", [
    (lambda **kw: frost.sdpa_forward_graph(1, 2, 16, 64, **kw), "sink"),
    (lambda **kw: frost.sdpa_forward_graph(1, 2, 16, 64, **kw), "padded"),
    (lambda **kw: frost.sdpa_backward_graph(1, 2, 16, 64, **kw), "dlse"),
    (lambda **kw: frost.ir.builder.sdpa_forward_varlen_graph(2, 2, 16, 8, 64, **kw), "seqused"),
    (lambda **kw: frost.ir.builder.sdpa_backward_varlen_graph(2, 2, 16, 8, 64, **kw), "sink"),
])
@pytest.mark.parametrize("value", ["yes", 1, np.bool_(True)])
def test_the_graph_functions_switches_are_bools(make, flag, value):
    with pytest.raises(GraphError, match=rf"^{flag}: got {value!r}; accepted: True or False"):
        make(**{flag: value})
    make(**{flag: True})


def test_a_device_index_this_machine_lacks_says_what_it_has():
    """An index is a device torch cannot make without CUDA: the message said an index was accepted."""
    import torch

    count = torch.cuda.device_count()
    plan = frost.compile(frost.sdpa_backward_graph(1, 2, 16, 64))
    with pytest.raises(TensorError, match=rf"^device: got {count}; accepted: a device of this machine \(it has "
                                          rf"{count} CUDA devices\)$"):
        plan.new_outputs(count)

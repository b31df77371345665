"""Two GPUs in one process (pytest -m gpu on a machine with >= 2 devices): tensors on cuda:1 while cuda:0 is the
current device -- model-parallel code calls the backward like that, with no torch.cuda.device() around it. The
result must be the same gradients as the same call made on cuda:0, bit for bit (deterministic mode), and the
current device must be left as it was."""

import pytest
import torch

from frost.api.functional import sdpa_backward
from frost.api.autograd import attention

pytestmark = pytest.mark.gpu


def _inputs(device):
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(2, 333, h, 64, generator=g).to(device, torch.bfloat16) for h in (8, 2, 2))
    out, lse = attention(q, k, v, causal=True, return_lse=True)
    dout = torch.randn(out.shape, generator=g).to(device, torch.bfloat16)
    return q, k, v, out, dout, lse


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_tensors_on_another_device_than_the_current_one():
    torch.cuda.set_device(0)
    on0 = sdpa_backward(*_inputs("cuda:0"), causal=True, deterministic=True)
    for _ in range(3):   # the first call launches directly, later ones may replay a captured graph
        on1 = sdpa_backward(*_inputs("cuda:1"), causal=True, deterministic=True)
    torch.cuda.synchronize(1)
    assert torch.cuda.current_device() == 0
    for name, a, b in zip(("dq", "dk", "dv"), on0, on1):
        assert b.device == torch.device("cuda:1"), name
        assert torch.equal(a, b.to("cuda:0")), name

import torch
import frost

device = "cuda" if torch.cuda.is_available() else "cpu"       # on a CPU, frost runs its torch reference engine
B, S, Hq, Hkv, D = 2, 256, 8, 2, 64                             # GQA: 8 query heads share 2 kv heads
q = torch.randn(B, S, Hq, D, device=device, dtype=torch.bfloat16, requires_grad=True)   # BSHD, like FlashAttention
k = torch.randn(B, S, Hkv, D, device=device, dtype=torch.bfloat16, requires_grad=True)
v = torch.randn(B, S, Hkv, D, device=device, dtype=torch.bfloat16, requires_grad=True)
sink = torch.zeros(Hq, device=device, requires_grad=True)      # a learnable attention sink per query head (fp32)

out = frost.attention(q, k, v, causal=True, window_size=(128, None), sink=sink)   # 128-token sliding window
out.float().square().mean().backward()                          # q.grad, k.grad, v.grad, sink.grad: frost's backward
print(out.shape, q.grad.shape, sink.grad.shape)

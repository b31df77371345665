import torch
import frost

device = "cuda" if torch.cuda.is_available() else "cpu"
Hq, Hkv, D = 8, 2, 64
lengths = [200, 0, 57, 311]                      # documents packed back to back; an empty one is legal
cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)
T, max_seqlen = sum(lengths), max(lengths)       # max_seqlen: a host int (no device read)
q = torch.randn(T, Hq, D, dtype=torch.bfloat16, device=device, requires_grad=True)
k = torch.randn(T, Hkv, D, dtype=torch.bfloat16, device=device, requires_grad=True)
v = torch.randn(T, Hkv, D, dtype=torch.bfloat16, device=device, requires_grad=True)
sink = torch.zeros(Hq, device=device, requires_grad=True)
mask = dict(causal=True, window_size=(128, None), sink=sink)    # per document, as per batch row in frost.attention

out = frost.attention_varlen(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, **mask)   # (T, Hq, D)
grads = torch.autograd.grad(out.float().square().sum(), (q, k, v, sink))

# The same documents one at a time through the dense API: the same output and gradients.
dense = []
for start, end in zip(cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist()):
    dense.append(frost.attention(q[None, start:end], k[None, start:end], v[None, start:end], **mask)[0])
dense_grads = torch.autograd.grad(torch.cat(dense).float().square().sum(), (q, k, v, sink))
for name, got, want in zip(("out", "dq", "dk", "dv", "dsink"), (out, *grads), (torch.cat(dense), *dense_grads)):
    error, scale = (got.float() - want.float()).abs().max(), want.float().abs().max()
    assert error <= 8 * 2.0 ** -8 * scale, f"{name}: max error {error:.3g}"   # 8 bf16 ulps of the largest value
print(f"{len(lengths)} packed documents, {T} tokens: the same as {len(lengths)} dense calls")

import torch
import frost

device = "cuda" if torch.cuda.is_available() else "cpu"
B, S, Hq, Hkv, D = 2, 256, 8, 2, 64
q = torch.randn(B, S, Hq, D, dtype=torch.bfloat16, device=device)
k = torch.randn(B, S, Hkv, D, dtype=torch.bfloat16, device=device)
v = torch.randn(B, S, Hkv, D, dtype=torch.bfloat16, device=device)
sink = torch.zeros(Hq, device=device)                           # fp32 (Hq,), natural-log units
lengths = torch.tensor([S, 200], dtype=torch.int32, device=device)   # per-batch lengths: the second is padded

# The backward must see the mask the forward used: give both the same options.
mask = dict(
    causal=True, window_size=(128, None),   # (left, right); None = unbounded; causal sets right = 0
    causal_alignment="bottom_right",        # or "top_left"
    seq_len_q=lengths, seq_len_kv=lengths,  # optional int32 (B,) lengths; None = no padding
)
out, lse = frost.attention(q, k, v, sink=sink, return_lse=True, **mask)   # out BSHD, lse (B, Hq, S) fp32
dout = torch.randn_like(out)

dq, dk, dv, dsink = frost.sdpa_backward(
    q, k, v, out, dout, lse, sink=sink, **mask,
    deterministic=None,                     # None: follow torch.use_deterministic_algorithms
    dlse=None,                              # fp32 (B, Hq, S): the gradient on lse, when the loss uses lse
)
print(dq.shape, dk.shape, dv.shape, dsink.shape)

import torch
import frost
from frost import GraphBuilder

B, Hq, Hkv, S, D = 2, 8, 2, 256, 64
b = GraphBuilder("gpt_oss_layer")
q = b.tensor("q", (B, Hq, S, D), "bfloat16", layout="bshd")     # logical (B, H, S, D), BSHD in memory
k = b.tensor("k", (B, Hkv, S, D), "bfloat16", layout="bshd")
v = b.tensor("v", (B, Hkv, S, D), "bfloat16", layout="bshd")
o = b.tensor("o", (B, Hq, S, D), "bfloat16", layout="bshd")
do = b.tensor("do", (B, Hq, S, D), "bfloat16", layout="bshd")
lse = b.tensor("lse", (B, Hq, S), "float32")
sink = b.tensor("sink", (Hq,), "float32")
grads = b.sdpa_backward(q, k, v, o, do, lse, sink=sink, causal=True, alignment="bottom_right", band_left=128)
graph = b.build()                     # an inconsistent graph raises frost.GraphError naming tensor, value, accepted

report = frost.check_support(graph, target="sm_120")   # any machine, no GPU needed; "unsupported" is an answer
print(report.to_text())               # the engine per op, and every reason each engine declined (stable codes)

device = "cuda" if torch.cuda.is_available() else "cpu"
plan = frost.compile(graph)           # for this machine; plan.engine names the engine, never silently
print(plan.engine, plan.workspace_size)

# Inputs in BSHD memory; o and lse from a forward with the same mask.
q_t = torch.randn(B, S, Hq, D, dtype=torch.bfloat16, device=device)
k_t = torch.randn(B, S, Hkv, D, dtype=torch.bfloat16, device=device)
v_t = torch.randn(B, S, Hkv, D, dtype=torch.bfloat16, device=device)
sink_t = torch.zeros(Hq, device=device)
o_t, lse_t = frost.attention(q_t, k_t, v_t, sink=sink_t, causal=True, window_size=(128, None),
                             causal_alignment="bottom_right", return_lse=True)
bshd = {"q": q_t, "k": k_t, "v": v_t, "o": o_t, "do": torch.randn_like(o_t)}
tensors = {name: t.transpose(1, 2) for name, t in bshd.items()}   # the graph's logical (B, H, S, D) views

outputs = plan.new_outputs(device)    # caller-owned outputs and workspace: allocate once, reuse every step
workspace = plan.new_workspace(device)
plan.execute({**tensors, "lse": lse_t, "sink": sink_t, **outputs}, workspace=workspace)   # no allocation, no sync
dq, dsink = outputs[grads.dq], outputs[grads.dsink]   # dq: logical (B, Hq, S, D), BSHD in memory

"""Writes attn.json and attn.bin (the graph of the Command line page) to the current folder."""

from pathlib import Path

import hipdnn_graph as hg

g = hg.Graph(
    name="attn",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q = g.tensor(name="Q", dim=[1, 2, 16, 64])
k, v, do = g.tensor_like(q, "K"), g.tensor_like(q, "V"), g.tensor_like(q, "dO")
o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=True)
assert stats is not None
dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True)
for grad in (dq, dk, dv):
    grad.set_output(True)
Path("attn.json").write_text(g.to_json())
Path("attn.bin").write_bytes(g.serialize())
print("wrote attn.json and attn.bin")

"""MoE grouped matmul nodes (docs/moe.md): an expert layer routed by SCATTER, its weight
gradient, the rules, and hipDNN's bytes and JSON."""

import json

import hipdnn_graph as hg

# --8<-- [start:build]
F, I32 = hg.DataType.FLOAT, hg.DataType.INT32
g = hg.Graph(name="experts", io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=F,
             compute_data_type=F)  # fmt: skip
token = g.tensor(name="token", dim=[1, 8, 16])  # 8 routed rows of K = 16
weight = g.tensor(name="weight", dim=[2, 16, 32])  # 2 experts, [K, N] each
offsets = g.tensor(name="offsets", dim=[2, 1, 1], data_type=I32)  # each expert's first row
index = g.tensor(name="token_index", dim=[1, 8, 1], data_type=I32)
ks = g.tensor(name="token_ks", dim=[1, 8, 1], data_type=I32)
out = g.moe_grouped_matmul(
    token, weight, offsets, index, ks, name="fc", mode=hg.MoeGroupedMatmulMode.SCATTER, top_k=2
)
dweight = g.moe_grouped_matmul_bwd(out, token, offsets, name="dfc")  # out as the gradient
out.set_output(True)
dweight.set_output(True)
g.validate()
print(out.get_name(), out.get_dim(), out.get_stride())
print(dweight.get_name(), dweight.get_dim(), dweight.get_stride())
# --8<-- [end:build]

# --8<-- [start:wire]
blob = g.serialize()
assert hg.Graph.deserialize(blob).serialize() == blob
fc = json.loads(g.to_json())["nodes"][0]
print(fc["type"], fc["mode"], fc["top_k"], sorted(fc["inputs"]))
# --8<-- [end:wire]

# --8<-- [start:rules]
bad = hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)
bad.moe_grouped_matmul(
    bad.tensor(name="t", dim=[1, 8, 16]), bad.tensor(name="w", dim=[2, 16, 32]),
    bad.tensor(name="o", dim=[3, 1, 1], data_type=I32), None, None,
)  # fmt: skip
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rules]

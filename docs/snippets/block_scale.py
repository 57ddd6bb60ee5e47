"""Block-scale nodes (docs/block-scale.md): MX block scaling around a matmul (both operands
quantized to FP8 E4M3 with E8M0 block scales, dequantized and multiplied), validated and written
as hipDNN's bytes and JSON, and run on the NumPy reference."""

import json

import numpy as np

import hipdnn_graph as hg

# --8<-- [start:build]
f32 = hg.DataType.FLOAT
g = hg.Graph(name="mx_matmul", io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
a = g.tensor(name="A", dim=[1, 8, 64])  # [batch, M, K]
b = g.tensor(name="B", dim=[1, 64, 16])  # [batch, K, N]
operands = []
for t, axis, blocks in ((a, 2, [32]), (b, 1, [32, 1])):  # blocks of 32 along K
    q, scale = g.block_scale_quantize(t, block_size=32, axis=axis, name=f"q{t.get_name()}")
    q.set_data_type(hg.DataType.FP8_E4M3)
    scale.set_data_type(hg.DataType.FP8_E8M0)
    operands.append(g.block_scale_dequantize(q, scale, block_size=blocks, name=f"dq{t.get_name()}"))
c = g.matmul(*operands, name="mm")
c.set_output(True)
g.validate()
qa = g.nodes[0].attributes
print(qa.get_y().get_dim(), qa.get_scale().get_dim(), qa.get_scale().get_data_type().name)
print([f"{n.name}:{n.get_node_type().name}" for n in g.nodes])
# --8<-- [end:build]

# --8<-- [start:run]
rng = np.random.default_rng(0)
inputs = {
    a: rng.standard_normal((1, 8, 64), np.float32),
    b: rng.standard_normal((1, 64, 16), np.float32),
}
g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
out = g.run(inputs)[c]
exact = inputs[a] @ inputs[b]
print(
    g.get_plan_name(), out.shape, f"max error {np.abs(out - exact).max() / np.abs(exact).max():.3f}"
)
# --8<-- [end:run]

# --8<-- [start:wire]
blob = g.serialize()
assert hg.Graph.deserialize(blob).serialize() == blob
nodes = {n["name"]: n for n in json.loads(g.to_json())["nodes"]}
print({k: nodes["qA"][k] for k in ("type", "block_size", "axis", "transpose")})
print({k: nodes["dqA"][k] for k in ("type", "block_size", "is_negative_scale")})
# --8<-- [end:wire]

# --8<-- [start:rules]
bad = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
bad.block_scale_quantize(bad.tensor(name="x", dim=[4, 48]), block_size=32)
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rules]

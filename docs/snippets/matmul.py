"""Matmul nodes (docs/matmul.md): a linear layer with a bias and a GELU, the matmul-epilogue
graph of several families, validated and written as hipDNN's bytes and JSON."""

import json

import hipdnn_graph as hg

# --8<-- [start:build]
g = hg.Graph(
    name="linear_gelu",
    io_data_type=hg.DataType.BFLOAT16,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
x = g.tensor(name="x", dim=[8, 128, 512])  # [batch, tokens, features]
w = g.tensor(name="w", dim=[1, 512, 2048])  # one weight, broadcast over the batch
bias = g.tensor(name="bias", dim=[1, 1, 2048])
h = g.matmul(x, w, hg.MatmulAttributes().set_name("proj"))
h = g.pointwise(h, bias, name="bias_add", mode=hg.PointwiseMode.ADD)
y = g.pointwise(h, name="gelu", mode=hg.PointwiseMode.GELU_FWD)
y.set_output(True)
g.validate()
proj = g.nodes[0].attributes.get_c()
print(proj.get_name(), proj.get_dim(), proj.get_stride())
print([f"{n.name}:{n.get_node_type().name}" for n in g.nodes])
# --8<-- [end:build]

# --8<-- [start:wire]
blob = g.serialize()
assert hg.Graph.deserialize(blob).serialize() == blob
node = json.loads(g.to_json())["nodes"][0]
print(node["type"], node["inputs"], node["outputs"])
# --8<-- [end:wire]

# --8<-- [start:rules]
bad = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
a = bad.tensor(name="a", dim=[4, 3])
bad.matmul(a, bad.tensor(name="b", dim=[4, 5]))
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rules]

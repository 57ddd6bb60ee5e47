"""Custom ops (docs/custom-op.md): a plugin operation between two families, its rules, and
hipDNN's bytes and JSON."""

import json

import hipdnn_graph as hg

# --8<-- [start:build]
F = hg.DataType.FLOAT
g = hg.Graph(name="rope", io_data_type=F, intermediate_data_type=F, compute_data_type=F)
x = g.tensor(name="x", dim=[2, 8, 8])
pos = g.tensor(name="pos", dim=[1, 8, 8])
h = g.pointwise(x, name="relu", mode=hg.PointwiseMode.RELU_FWD)
attrs = hg.CustomOpAttributes().set_custom_op_id("example.rope").set_data(b"\x01\x02")
(rotated,) = g.custom_op([h, pos], 1, attrs, name="rope")
rotated.set_dim([2, 8, 8]).set_stride([64, 8, 1])  # the caller's: nothing infers them
y = g.matmul(rotated, g.tensor(name="w", dim=[2, 8, 4]), name="proj")
y.set_output(True)
g.validate()
print([t.get_name() for t in g.nodes[1].inputs()], rotated.get_name())
# --8<-- [end:build]

# --8<-- [start:wire]
blob = g.serialize()
assert hg.Graph.deserialize(blob).serialize() == blob
node = json.loads(g.to_json())["nodes"][1]
print({k: node[k] for k in ("custom_op_id", "input_tensor_uids", "output_tensor_uids", "data")})
# --8<-- [end:wire]

# --8<-- [start:rules]
bad = hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)
(out,) = bad.custom_op([bad.tensor(name="a", dim=[4])], 1, name="op")
out.set_dim([4]).set_stride([1])
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rules]

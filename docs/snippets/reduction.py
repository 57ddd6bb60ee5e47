"""Reduction nodes (docs/reduction.md): a mean square over the feature axis (pointwise, then a
reduction whose output shape states the reduced axis), validated and written as hipDNN's bytes
and JSON."""

import json

import hipdnn_graph as hg

# --8<-- [start:build]
g = hg.Graph(
    name="mean_square",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
x = g.tensor(name="x", dim=[8, 128, 512])  # [batch, tokens, features]
sq = g.pointwise(x, x, name="square", mode=hg.PointwiseMode.MUL)
ms = g.reduction(sq, hg.ReductionAttributes().set_name("mean").set_mode(hg.ReductionMode.AVG))
ms.set_dim([8, 128, 1]).set_stride([128, 1, 1]).set_output(True)  # Y's shape says: reduce axis 2
g.validate()
print(ms.get_name(), ms.get_dim(), ms.get_data_type().name)
print([f"{n.name}:{n.get_node_type().name}" for n in g.nodes])
# --8<-- [end:build]

# --8<-- [start:wire]
blob = g.serialize()
assert hg.Graph.deserialize(blob).serialize() == blob
node = json.loads(g.to_json())["nodes"][1]
print(node)
# --8<-- [end:wire]

# --8<-- [start:rules]
bad = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
x2 = bad.tensor(name="x", dim=[4, 8])
y2 = bad.tensor(name="y", dim=[2, 8]).set_output(True)
bad.reduction(x2, y2, mode=hg.ReductionMode.ADD)
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rules]

"""Convolution nodes (docs/convolution.md): a convolution block (a channels-last 3x3
convolution, a bias add, a ReLU, then a strided convolution), validated and written as hipDNN's
bytes and JSON."""

import json

import hipdnn_graph as hg

# --8<-- [start:build]
g = hg.Graph(
    name="conv_block",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
x = g.tensor(name="x", dim=[8, 64, 56, 56], stride=[200704, 1, 3584, 64])  # NHWC in memory
w1 = g.tensor(name="w1", dim=[64, 64, 3, 3])
same = hg.ConvFpropAttributes().set_padding([1, 1]).set_stride([1, 1]).set_dilation([1, 1])
c1 = g.conv_fprop(x, w1, same.set_name("conv1"))
bias = g.tensor(name="bias", dim=[1, 64, 1, 1])
b1 = g.pointwise(c1, bias, name="bias_add", mode=hg.PointwiseMode.ADD)
r1 = g.pointwise(b1, name="relu", mode=hg.PointwiseMode.RELU_FWD)
w2 = g.tensor(name="w2", dim=[128, 64, 3, 3])
y = g.conv_fprop(r1, w2, same.copy_for_node().set_name("down").set_stride([2, 2]))
y.set_output(True)
g.validate()
print(c1.get_name(), c1.get_dim(), c1.get_stride())
print(y.get_name(), y.get_dim(), y.get_data_type().name)
print([f"{n.name}:{n.get_node_type().name}" for n in g.nodes])
# --8<-- [end:build]

# --8<-- [start:wire]
blob = g.serialize()
assert hg.Graph.deserialize(blob).serialize() == blob
node = json.loads(g.to_json())["nodes"][0]
print(node["type"], node["parameters"])
# --8<-- [end:wire]

# --8<-- [start:rules]
same = hg.ConvFpropAttributes().set_padding([1, 1]).set_stride([1, 1]).set_dilation([1, 1])
bad = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
x2 = bad.tensor(name="x", dim=[1, 6, 8, 8])
w_bad = bad.tensor(name="w", dim=[4, 4, 3, 3])  # 6 channels are not a multiple of 4
bad.conv_fprop(x2, w_bad, same).set_output(True)
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rules]

# --8<-- [start:gradients]
t = hg.Graph(
    name="conv_backward",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
x = t.tensor(name="x", dim=[8, 64, 56, 56])
w = t.tensor(name="w", dim=[128, 64, 3, 3])
members = {"pre_padding": [1, 1], "post_padding": [1, 1], "stride": [2, 2], "dilation": [1, 1]}
grad = t.tensor(name="grad", dim=[8, 128, 28, 28])
dy = t.pointwise(grad, name="grad_in", mode=hg.PointwiseMode.IDENTITY)
dx = t.conv_dgrad(dy, w, name="dgrad", **members)
dw = t.conv_wgrad(dy, x, name="wgrad", **members)  # hipDNN's order: dy, then x
dx.set_dim([8, 64, 56, 56]).set_output(True)  # a stride-2 DX could be 55 or 56 wide: say which
dw.set_output(True)  # DW left to inference: one group, the largest kernel that fits
t.validate()
print(dx.get_name(), dx.get_dim(), dx.get_stride())
print(dw.get_name(), dw.get_dim())
# --8<-- [end:gradients]

"""Resample nodes (docs/resample.md): a ReLU max-pooled with its INDEX, the pooling's backward
from that INDEX, validated and written as hipDNN's bytes and JSON; the rules and the modes
hipDNN's wire cannot carry."""

import json

import hipdnn_graph as hg

# --8<-- [start:build]
g = hg.Graph(
    name="pool",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
x = g.tensor(name="x", dim=[8, 16, 32, 32], stride=[16384, 1, 512, 16])  # channels-last
r = g.pointwise(x, name="relu", mode=hg.PointwiseMode.RELU_FWD)
pool = (
    hg.ResampleFwdAttributes()
    .set_name("maxpool")
    .set_resample_mode(hg.ResampleMode.MAXPOOL)
    .set_padding_mode(hg.PaddingMode.NEG_INF_PAD)
    .set_pre_padding([1, 1])
    .set_post_padding([1, 1])
    .set_stride([2, 2])
    .set_window([3, 3])
    .set_generate_index(True)
)
y, index = g.resample(r, pool)  # (Y, INDEX): INDEX because MAXPOOL asked for it
assert index is not None
dy = g.tensor(name="dy", dim=[8, 16, 16, 16], stride=[4096, 1, 256, 16])
back = hg.ResampleBwdAttributes().set_name("maxpool_bwd")
back.set_resample_mode(hg.ResampleMode.MAXPOOL).set_padding_mode(hg.PaddingMode.NEG_INF_PAD)
back.set_pre_padding([1, 1]).set_post_padding([1, 1]).set_stride([2, 2]).set_window([3, 3])
dx = g.resample_bwd(dy, back, index=index)
for t in (y, dx):
    t.set_output(True)
g.validate()
print(y.get_name(), y.get_dim(), y.get_stride())
print(index.get_name(), index.get_data_type().name)
print(dx.get_name(), dx.get_dim())
# --8<-- [end:build]

# --8<-- [start:wire]
blob = g.serialize()
assert hg.Graph.deserialize(blob).serialize() == blob
node = json.loads(g.to_json())["nodes"][1]
print(node)
# --8<-- [end:wire]

# --8<-- [start:rules]
bad = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
dy2 = bad.tensor(name="dy", dim=[1, 3, 4, 4])
attrs = hg.ResampleBwdAttributes().set_resample_mode(hg.ResampleMode.MAXPOOL)
bad.resample_bwd(dy2, attrs, window=[2, 2], stride=[2, 2], pre_padding=[0, 0],
                 post_padding=[0, 0]).set_output(True)  # fmt: skip
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
nearest = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
up = nearest.resample_fwd(
    nearest.tensor(name="x", dim=[1, 3, 4, 4]), resample_mode=hg.ResampleMode.NEAREST,
    padding_mode=hg.PaddingMode.ZERO_PAD, window=[1, 1], stride=[1, 1], pre_padding=[0, 0],
    post_padding=[0, 0],
)  # fmt: skip
up.set_output(True)
try:
    nearest.serialize()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rules]

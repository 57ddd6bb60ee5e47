"""Pointwise nodes (docs/pointwise.md): an attention output passed through a bias add and a GELU,
validated, written as hipDNN's bytes and JSON and read back."""

import json

import hipdnn_graph as hg

# --8<-- [start:build]
g = hg.Graph(
    name="attention_epilogue",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q = g.tensor(name="Q", dim=[1, 4, 128, 64])
k = g.tensor(name="K", dim=[1, 4, 128, 64])
v = g.tensor(name="V", dim=[1, 4, 128, 64])
o, _ = g.sdpa(q, k, v, name="attn", generate_stats=False)

bias = g.tensor(name="bias", dim=[1, 1, 1, 64])  # broadcast over batch, heads and rows
biased = g.pointwise(
    o, bias, hg.PointwiseAttributes().set_name("add").set_mode(hg.PointwiseMode.ADD)
)
y = g.pointwise(biased, name="gelu", mode=hg.PointwiseMode.GELU_APPROX_TANH_FWD)
y.set_output(True)
g.validate()
print(biased.get_name(), biased.get_dim(), biased.get_data_type().name)
print(y.get_name(), y.get_stride(), y.get_data_type().name)
# --8<-- [end:build]

# --8<-- [start:wire]
blob = g.serialize()  # hipDNN's FlatBuffers bytes
assert hg.Graph.deserialize(blob).serialize() == blob
node = json.loads(g.to_json())["nodes"][1]  # hipDNN's JSON: scalars sit among the inputs
print(node["type"], node["inputs"]["operation"], sorted(node["outputs"]))
# --8<-- [end:wire]

# --8<-- [start:engines]
import numpy as np  # noqa: E402

g.build()  # the NumPy reference runs attention and pointwise nodes alike
rng = np.random.default_rng(0)
pack = {t: rng.standard_normal(t.get_dim()).astype(np.float16) for t in (q, k, v, bias)}
pack[y] = out = np.empty(y.get_dim(), np.float16)
g.execute(pack)
print(g.get_plan_name(), out.shape, bool(np.isfinite(out).all()))
# --8<-- [end:engines]

# --8<-- [start:rules]
bad = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
x = bad.tensor(name="x", dim=[8])
bad.pointwise(x, x, mode=hg.PointwiseMode.EXP)  # EXP takes one input
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rules]

"""The torch family engines (docs/torch-families.md): a matmul + bias + GELU graph planned on
the fusion engine, a single node on the eager engine."""

import os

import numpy as np

import hipdnn_graph as hg

# --8<-- [start:fusion]
os.environ.setdefault("HIPDNN_GRAPH_TORCH_COMPILE_BACKEND", "aot_eager")  # cheap on a CPU

f32 = hg.DataType.FLOAT
g = hg.Graph(name="mlp_up", io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
a = g.tensor(name="a", dim=[64, 32])
w = g.tensor(name="w", dim=[32, 48])
b = g.tensor(name="b", dim=[1, 48])
h = g.pointwise(g.matmul(a, w, name="mm"), b, mode=hg.PointwiseMode.ADD, name="bias")
y = g.pointwise(h, mode=hg.PointwiseMode.GELU_FWD, name="gelu")
y.set_output(True)
g.build_operation_graph().create_execution_plans()
print([n for n in g.get_engine_names() if n.startswith("TORCH")])
g.build_plans()  # compiles here, for these shapes, types and device
rng = np.random.default_rng(0)
inputs = {t: rng.standard_normal(t.dim, dtype=np.float32) for t in (a, w, b)}
out = g.run(inputs)[y]  # execute never compiles
print(g.get_plan_name(), out.shape)
# --8<-- [end:fusion]

# --8<-- [start:single]
one = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
one.matmul(one.tensor(name="a", dim=[8, 4]), one.tensor(name="b", dim=[4, 2]),
           name="mm").set_output(True)  # fmt: skip
one.build_operation_graph().create_execution_plans().build_plans()
print(one.get_plan_name())
print(one.get_engine_refusals()["TORCH_FUSION_ENGINE"])
# --8<-- [end:single]

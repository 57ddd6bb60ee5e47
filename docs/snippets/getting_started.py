"""The getting-started walk-through, one section per step (the page includes each section)."""

from pathlib import Path

# --8<-- [start:declare]
import numpy as np

import hipdnn_graph as hg

g = hg.Graph(
    name="attn_bwd",
    io_data_type=hg.DataType.FLOAT,  # type of tensors you provide and receive
    intermediate_data_type=hg.DataType.FLOAT,  # type of virtual (graph-internal) tensors
    compute_data_type=hg.DataType.FLOAT,  # type nodes compute in
)
B, H, S, D = 2, 4, 64, 32
q = g.tensor(name="Q", dim=[B, H, S, D])  # strides default to packed row-major
k = g.tensor(name="K", dim=[B, H, S, D])
v = g.tensor(name="V", dim=[B, H, S, D])
o = g.tensor(name="O", dim=[B, H, S, D])  # the forward's output ...
stats = g.tensor(name="Stats", dim=[B, H, S, 1])  # ... and its log-sum-exp per row
do = g.tensor(name="dO", dim=[B, H, S, D])
dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True)
for grad in (dq, dk, dv):
    grad.set_output(True)
print(dq)  # dims, strides and data type are filled in by validate()
# --8<-- [end:declare]

# --8<-- [start:validate]
g.validate()
print(dq.get_dim(), dq.get_stride(), dq.get_data_type().name)
print([node.name for node in g.nodes])
# --8<-- [end:validate]

# --8<-- [start:errors]
bad = hg.Graph(io_data_type=hg.DataType.HALF, compute_data_type=hg.DataType.FLOAT)
x = bad.tensor(name="X", dim=[2, 4, 64])  # rank 3: SDPA wants rank-4 tensors
bad.sdpa(x, bad.tensor_like(x, "K"), bad.tensor_like(x, "V"), name="fwd")
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, "|", err)
# --8<-- [end:errors]

# --8<-- [start:run]
g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
g.build()  # build_operation_graph → create_execution_plans → check_support → build_plans
print(g.get_plan_name(), g.get_workspace_size())

rng = np.random.default_rng(0)
pack = {t: rng.standard_normal(t.get_dim()).astype(np.float32) for t in (q, k, v, o, do)}
pack[stats] = np.full(stats.get_dim(), np.log(S), np.float32)
for grad in (dq, dk, dv):
    pack[grad] = np.empty(grad.get_dim(), np.float32)  # outputs are caller-allocated
g.execute(pack)  # keys: tensors (or their uids); workspace defaults to None
print(pack[dq].shape, bool(np.isfinite(pack[dq]).all()))
# --8<-- [end:run]

# --8<-- [start:serialize]
blob = g.serialize()  # hipDNN's serialized graph (FlatBuffers)
text = g.to_json()  # the same content as hipDNN's JSON
again = hg.Graph.deserialize(blob)
print(len(blob), again.key() == g.key() == hg.Graph.from_json(text).key())
Path("attn_bwd.json").write_text(text)  # for the shell: hipdnn-graph show attn_bwd.json
# --8<-- [end:serialize]

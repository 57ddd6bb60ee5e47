import numpy as np

import hipdnn_graph as hg

g = hg.Graph(
    name="attn",
    io_data_type=hg.DataType.FLOAT,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q = g.tensor(name="Q", dim=[1, 4, 128, 64])  # [batch, heads, sequence, head dim]
k, v, do = g.tensor_like(q, "K"), g.tensor_like(q, "V"), g.tensor_like(q, "dO")
o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=True)
dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True)
for grad in (dq, dk, dv):
    grad.set_output(True)  # outputs the caller receives (O and Stats stay internal)
g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()  # validate, lower, plan

rng = np.random.default_rng(0)
pack = {t: rng.standard_normal(t.get_dim()).astype(np.float32) for t in (q, k, v, do)}
pack |= {t: np.empty(t.get_dim(), np.float32) for t in (dq, dk, dv)}
g.execute(pack)
print(g.get_plan_name(), pack[dq].shape, float(np.abs(pack[dq]).max()) > 0)

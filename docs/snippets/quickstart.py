import numpy as np

import hipdnn_graph as hg

F = hg.DataType.FLOAT
g = hg.Graph(io_data_type=F, intermediate_data_type=F, compute_data_type=F)
q = g.tensor(name="Q", dim=[1, 4, 128, 64])  # [batch, heads, seq, head dim]
k, v, do = g.tensor_like(q, "K"), g.tensor_like(q, "V"), g.tensor_like(q, "dO")
o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True)
assert stats is not None  # generate_stats defaults to True (None only without it)
dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, use_causal_mask=True)
for grad in (dq, dk, dv):
    grad.set_output(True)  # the tensors you receive; O and Stats stay inside
g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()

rng = np.random.default_rng(0)
pack = {t: rng.standard_normal(t.get_dim(), np.float32) for t in (q, k, v, do)}
pack |= {t: np.empty(t.get_dim(), np.float32) for t in (dq, dk, dv)}
g.execute(pack)
print(g.get_plan_name(), pack[dq].shape, np.isfinite(pack[dq]).all())

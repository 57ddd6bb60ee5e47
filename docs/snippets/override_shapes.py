"""Examples of the Override shapes page."""

import numpy as np

import hipdnn_graph as hg

# --8<-- [start:build]
MAX_SEQ = 64
g = hg.Graph(
    name="attn",
    io_data_type=hg.DataType.FLOAT,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
g.set_override_shape_enabled(True)  # before the plans are built
q = g.tensor(name="Q", dim=[1, 2, MAX_SEQ, 16], uid=1)  # the declared dims are the maximum
k = g.tensor(name="K", dim=[1, 2, MAX_SEQ, 16], uid=2)
v = g.tensor(name="V", dim=[1, 2, MAX_SEQ, 16], uid=3)
o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=True)
assert stats is not None  # generate_stats=True: a Stats output
o.set_output(True).set_uid(4)
stats.set_output(True).set_uid(5)
g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
# --8<-- [end:build]

# --8<-- [start:execute]
rng = np.random.default_rng(0)
for seq in (16, 40, 16):  # the second 16 reuses the plan the first one built
    shape, stats_shape = [1, 2, seq, 16], [1, 2, seq, 1]
    pack = {uid: rng.standard_normal(shape).astype(np.float32) for uid in (1, 2, 3)}
    pack[4], pack[5] = np.zeros(shape, np.float32), np.zeros(stats_shape, np.float32)
    g.execute(
        pack,
        override_uids=[1, 2, 3, 4, 5],
        override_shapes=[shape] * 4 + [stats_shape],
        override_strides=[[2 * seq * 16, seq * 16, 16, 1]] * 4 + [[2 * seq, seq, 1, 1]],
    )
    print(seq, pack[4].shape, round(float(pack[5].max()), 3) > 0)
# --8<-- [end:execute]

# --8<-- [start:errors]
x = np.zeros([1, 2, 80, 16], np.float32)
try:
    g.execute(
        {1: x, 2: x, 3: x, 4: x.copy(), 5: x[..., :1].copy()},
        override_uids=[1],
        override_shapes=[[1, 2, 80, 16]],
        override_strides=[[2560, 1280, 16, 1]],
    )
except hg.HipdnnError as err:
    print(err.code.name, err.message)
print(g.get_engine_refusals().get("TORCH_SDPA_FLEX_ENGINE", "(no torch)").split(":")[0])
# --8<-- [end:errors]

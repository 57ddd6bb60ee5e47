"""Packed (ragged) attention (docs/sdpa-forward.md, "Packed batches"): three sequences of
different lengths in one token buffer, run forward on the NumPy reference, checked against the
same attention computed on each sequence alone, then a bad offsets tensor refused."""

import numpy as np

import hipdnn_graph as hg

# --8<-- [start:run]
B, H, S_MAX, D = 3, 2, 8, 4
lengths = [5, 2, 8]  # tokens of each sequence; T = 15 in all
g = hg.Graph(
    name="packed_run",
    io_data_type=hg.DataType.FLOAT,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
strides = [S_MAX * H * D, D, H * D, 1]  # token-major: a token's H x D elements together
off = g.tensor(name="off", dim=[B + 1, 1, 1, 1], data_type=hg.DataType.INT32)
q, k, v = (g.tensor(name=n, dim=[B, H, S_MAX, D], stride=strides) for n in "QKV")
for t in (q, k, v):
    t.set_ragged_offset(off).set_ragged_offset_multiplier(H * D)  # offsets count tokens
o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=False, use_causal_mask=True)
o.set_output(True).set_stride(strides).set_ragged_offset(off).set_ragged_offset_multiplier(H * D)
g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()

rng = np.random.default_rng(0)
tokens = {t: rng.standard_normal((sum(lengths), H, D)).astype(np.float32) for t in (q, k, v)}
offsets = np.cumsum([0, *lengths]).astype(np.int32).reshape(B + 1, 1, 1, 1)
out = g.run({off: offsets, **tokens})[o]  # packed buffers in, a packed [T, H, D] out
print(out.shape)

# the same attention on the last sequence alone, as a dense graph
dense = hg.Graph(
    io_data_type=hg.DataType.FLOAT,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
dq, dk, dv = (dense.tensor(name=n, dim=[1, H, 8, D]) for n in "QKV")
do, _ = dense.sdpa(dq, dk, dv, generate_stats=False, use_causal_mask=True)
do.set_output(True)
dense.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
pairs = ((dq, q), (dk, k), (dv, v))
last = {d: np.ascontiguousarray(tokens[p][7:15].transpose(1, 0, 2)[None]) for d, p in pairs}
alone = dense.run(last)[do][0].transpose(1, 0, 2)
print(np.allclose(out[7:15], alone, atol=1e-6))
# --8<-- [end:run]

# --8<-- [start:bad]
try:
    g.run({off: np.array([0, 5, 4, 15], np.int32).reshape(B + 1, 1, 1, 1), **tokens})
except hg.HipdnnError as err:
    print(err.code.name, err)
# --8<-- [end:bad]

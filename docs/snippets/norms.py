"""Normalization nodes (docs/norms.md): an RMSNorm in training before a projection (RMSNorm ->
matmul -> pointwise), validated and written as hipDNN's bytes and JSON."""

import json

import hipdnn_graph as hg

# --8<-- [start:rmsnorm]
g = hg.Graph(
    name="prenorm_proj",
    io_data_type=hg.DataType.BFLOAT16,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
x = g.tensor(name="x", dim=[8, 128, 512])  # [batch, tokens, features]
gamma = g.tensor(name="gamma", dim=[1, 1, 512], data_type=hg.DataType.FLOAT)
eps = g.tensor(name="eps").set_value(1e-6)  # a pass-by-value scalar
attrs = (
    hg.RMSNormAttributes()
    .set_name("norm")
    .set_epsilon(eps)
    .set_forward_phase(hg.NormFwdPhase.TRAINING)
)
y, inv_rms = g.rmsnorm(x, gamma, attrs)
assert inv_rms is not None  # made in the TRAINING phase
inv_rms.set_output(True)  # saved for the backward pass
w = g.tensor(name="w", dim=[1, 512, 1024])
h = g.matmul(y, w, name="proj")
g.pointwise(h, name="silu", mode=hg.PointwiseMode.SWISH_FWD, swish_beta=1.0).set_output(True)
g.validate()
print(y.get_name(), y.get_dim(), inv_rms.get_name(), inv_rms.get_dim())
print([f"{n.name}:{n.get_node_type().name}" for n in g.nodes])
# --8<-- [end:rmsnorm]

# --8<-- [start:rmsnorm_wire]
blob = g.serialize()
assert hg.Graph.deserialize(blob).serialize() == blob
node = json.loads(g.to_json())["nodes"][0]
print(node["type"], node["forward_phase"], node["inputs"], node["outputs"])
# --8<-- [end:rmsnorm_wire]

# --8<-- [start:rmsnorm_rules]
bad = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
xb = bad.tensor(name="x", dim=[2, 64, 32, 32])
per_channel = bad.tensor(name="gamma", dim=[1, 64, 1, 1])  # no trailing dim matches x
bad.rmsnorm(xb, per_channel, epsilon=bad.tensor(name="eps").set_value(1e-5),
            forward_phase=hg.NormFwdPhase.INFERENCE)  # fmt: skip
try:
    bad.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rmsnorm_rules]

# --8<-- [start:layernorm]
ln = hg.Graph(
    name="post_attention",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
h = ln.tensor(name="h", dim=[8, 128, 512])
weight = ln.tensor(name="weight", dim=[512], data_type=hg.DataType.FLOAT)  # reduced rank
shift = ln.tensor(name="shift", dim=[512], data_type=hg.DataType.FLOAT)
out, mean, inv_variance = ln.layernorm(
    h, weight, shift, hg.LayernormAttributes()
    .set_epsilon(hg.TensorAttributes().set_value(1e-5))
    .set_forward_phase(hg.NormFwdPhase.INFERENCE)
    .set_normalized_dim_count(1),
)  # fmt: skip
out.set_output(True)
ln.validate()
print(out.get_name(), out.get_dim(), mean, inv_variance)
node = json.loads(ln.to_json())["nodes"][0]
print(node["forward_phase"], node["normalized_dim_count"], node["outputs"])
# --8<-- [end:layernorm]

# --8<-- [start:batchnorm]
bn = hg.Graph(
    name="conv_block_tail",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
act = bn.tensor(name="act", dim=[16, 64, 28, 28], stride=[50176, 1, 1792, 64])  # NHWC
f32 = hg.DataType.FLOAT
gamma, beta, running_mean, running_var = (
    bn.tensor(name=n, dim=[1, 64, 1, 1], data_type=f32)
    for n in ("gamma", "beta", "running_mean", "running_var")
)
bn_attrs = (
    hg.BatchnormAttributes()
    .set_epsilon(hg.TensorAttributes().set_value(1e-5))
    .set_previous_running_stats(running_mean, running_var, hg.TensorAttributes().set_value(0.1))
)
normed, batch_mean, batch_inv_var, next_mean, next_var = bn.batchnorm(act, gamma, beta, bn_attrs)
activated = bn.pointwise(normed, mode=hg.PointwiseMode.RELU_FWD)
for t in (activated, batch_mean, batch_inv_var, next_mean, next_var):
    assert t is not None
    t.set_output(True)
bn.validate()
assert next_mean is not None
print(normed.get_stride(), next_mean.get_name(), next_mean.get_dim(), next_mean.get_stride())
print(sorted(json.loads(bn.to_json())["nodes"][0]["inputs"].items()))
# --8<-- [end:batchnorm]

# --8<-- [start:batchnorm_inference]
deployed = hg.Graph(
    name="conv_block_tail_deployed",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
feat = deployed.tensor(name="feat", dim=[1, 64, 28, 28], stride=[50176, 1, 1792, 64])
saved = [
    deployed.tensor(name=n, dim=[1, 64, 1, 1], data_type=hg.DataType.FLOAT)
    for n in ("running_mean", "inv_std", "gamma", "beta")
]
out = deployed.batchnorm_inference(feat, *saved, name="bn_eval")
deployed.pointwise(out, mode=hg.PointwiseMode.RELU_FWD).set_output(True)
deployed.validate()
print(out.get_name(), out.get_stride())
print(json.loads(deployed.to_json())["nodes"][0]["inputs"])
# --8<-- [end:batchnorm_inference]

# --8<-- [start:layernorm_backward]
train = hg.Graph(
    name="ln_training_step",
    io_data_type=hg.DataType.FLOAT,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
tokens = train.tensor(name="tokens", dim=[8, 128, 512])
ln_gamma = train.tensor(name="gamma", dim=[1, 1, 512])
ln_beta = train.tensor(name="beta", dim=[1, 1, 512])
ln_eps = train.tensor(name="eps").set_value(1e-5)
normed, saved_mean, saved_inv_var = train.layernorm(
    tokens, ln_gamma, ln_beta, epsilon=ln_eps, forward_phase=hg.NormFwdPhase.TRAINING, name="ln"
)
normed.set_output(True)
grad = train.tensor(name="grad", dim=[8, 128, 512])  # the loss gradient w.r.t. normed
bwd_attrs = hg.LayernormBackwardAttributes().set_saved_mean_and_inv_variance(
    saved_mean, saved_inv_var
)
d_tokens, d_gamma, d_beta = train.layernorm_backward(grad, tokens, ln_gamma, bwd_attrs)
for t in (d_tokens, d_gamma, d_beta):
    t.set_output(True)
train.validate()
backward = train.nodes[1]
print(d_gamma.get_name(), d_gamma.get_dim(), backward.attributes.get_normalized_dim_count())
print(json.loads(train.to_json())["nodes"][1]["inputs"])
# --8<-- [end:layernorm_backward]

# --8<-- [start:rmsnorm_backward]
g_bwd = hg.Graph(name="rmsnorm_bwd", io_data_type=hg.DataType.FLOAT)
g_bwd.set_compute_data_type(hg.DataType.FLOAT)
xs = g_bwd.tensor(name="x", dim=[8, 128, 512])
w_rms = g_bwd.tensor(name="gamma", dim=[1, 1, 512])
saved_inv_rms = g_bwd.tensor(name="inv_rms", dim=[8, 128, 1])  # from the forward pass
dys = g_bwd.tensor(name="dy", dim=[8, 128, 512])
dxs, dgamma, dbeta = g_bwd.rmsnorm_backward(
    dys, xs, w_rms, saved_inv_rms, hg.RMSNormBackwardAttributes().set_compute_dbias(True)
)
for t in (dxs, dgamma, dbeta):
    assert t is not None
    t.set_output(True)
g_bwd.validate()
print(dxs.get_name(), dgamma.get_dim(), dbeta.get_name() if dbeta is not None else None)
bad_bwd = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
per_sample = bad_bwd.tensor(name="inv_rms", dim=[8, 1, 1])  # one value per sample: wrong here
bad_bwd.rmsnorm_backward(
    bad_bwd.tensor(name="dy", dim=[8, 128, 512]),
    bad_bwd.tensor(name="x", dim=[8, 128, 512]),
    bad_bwd.tensor(name="gamma", dim=[1, 1, 512]),
    per_sample,
)
try:
    bad_bwd.validate()
except hg.HipdnnError as err:
    print(err.code.name, err.message)
# --8<-- [end:rmsnorm_backward]

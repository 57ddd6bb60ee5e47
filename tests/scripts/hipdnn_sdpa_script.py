"""An SDPA forward + backward program written for hipDNN's Python wheel, unchanged.

Nothing here knows about hipdnn-graph: the test runs it after ``hipdnn_graph.frontend.install()``.
It prints one line per check and exits non-zero on the first failure.
"""

import json
import sys

import hipdnn_frontend as hipdnn
import numpy as np
from hipdnn_frontend.hipdnn_frontend_python import _get_data_ptr

B, H, SQ, SKV, D = 1, 2, 8, 8, 16
SCALE = 0.25


def float_graph():
    graph = hipdnn.Graph()
    graph.set_io_data_type(hipdnn.DataType.FLOAT)
    graph.set_intermediate_data_type(hipdnn.DataType.FLOAT)
    graph.set_compute_data_type(hipdnn.DataType.FLOAT)
    return graph


def build(graph, handle):
    for step in (
        graph.validate,
        lambda: graph.build_operation_graph(handle),
        lambda: graph.create_execution_plans([hipdnn.HeuristicMode.FALLBACK]),
        graph.check_support,
        lambda: graph.build_plans(hipdnn.BuildPlanPolicy.HEURISTICS_CHOICE),
    ):
        result = step()
        if not result.is_good():
            sys.exit(f"FAILED: {result.get_code().name}: {result.get_message()}")


def device(array):
    buffer = hipdnn.DeviceBuffer(array.nbytes)
    buffer.copy_from_host(array.tobytes())
    return buffer


def host(buffer, like):
    return np.frombuffer(buffer.copy_to_host(), like.dtype).reshape(like.shape)


def reference(q, k, v, d_o):
    scores = q @ k.transpose(0, 1, 3, 2) * SCALE
    scores = np.where(np.tril(np.ones((SQ, SKV), bool)), scores, -np.inf)
    lse = np.log(np.exp(scores - scores.max(-1, keepdims=True)).sum(-1, keepdims=True))
    lse += scores.max(-1, keepdims=True)
    p = np.exp(scores - lse)
    o = p @ v
    dv = p.transpose(0, 1, 3, 2) @ d_o
    dp = d_o @ v.transpose(0, 1, 3, 2)
    ds = p * (dp - (d_o * o).sum(-1, keepdims=True))
    return o, lse, SCALE * ds @ k, SCALE * ds.transpose(0, 1, 3, 2) @ q, dv


rng = np.random.default_rng(0)
q_h, k_h, v_h, do_h = (
    rng.standard_normal(shape).astype(np.float32)
    for shape in ((B, H, SQ, D), (B, H, SKV, D), (B, H, SKV, D), (B, H, SQ, D))
)
o_ref, lse_ref, dq_ref, dk_ref, dv_ref = reference(q_h, k_h, v_h, do_h)
handle = hipdnn.create_handle()

# forward
fwd = float_graph().set_name("attention_fwd")
q = hipdnn.Tensor.create([B, H, SQ, D], hipdnn.DataType.FLOAT).set_name("q")
k = hipdnn.Tensor.create([B, H, SKV, D], hipdnn.DataType.FLOAT).set_name("k")
v = hipdnn.Tensor.create([B, H, SKV, D], hipdnn.DataType.FLOAT).set_name("v")
attributes = (
    hipdnn.SdpaAttributes()
    .set_name("sdpa")
    .set_generate_stats(True)
    .set_causal_mask(True)
    .set_attn_scale(SCALE)
)
o, stats = fwd.sdpa(q, k, v, attributes)
o.set_output(True)
stats.set_output(True).set_data_type(hipdnn.DataType.FLOAT)
build(fwd, handle)
buffers = {t.get_uid(): device(a) for t, a in ((q, q_h), (k, k_h), (v, v_h))}
buffers[o.get_uid()] = device(np.zeros_like(o_ref, np.float32))
buffers[stats.get_uid()] = device(np.zeros_like(lse_ref, np.float32))
workspace = hipdnn.DeviceBuffer(max(fwd.get_workspace_size(), 1))
result = fwd.execute(handle, {uid: b.ptr() for uid, b in buffers.items()}, workspace.ptr())
assert result.is_good(), result.get_message()
o_out = host(buffers[o.get_uid()], o_ref.astype(np.float32))
lse_out = host(buffers[stats.get_uid()], lse_ref.astype(np.float32))
np.testing.assert_allclose(o_out, o_ref, rtol=1e-4, atol=1e-5)
np.testing.assert_allclose(lse_out, lse_ref, rtol=1e-4, atol=1e-5)
print("forward OK", fwd.get_plan_name())

# serialize and reload
restored = hipdnn.Graph()
assert restored.from_json(fwd.to_json()).is_good()
assert restored.to_binary() == fwd.to_binary()
assert len(json.loads(fwd.to_json())["nodes"]) == 1
print("serialization OK")

# backward, tensors keyed by Tensor, NumPy values
bwd = float_graph().set_name("attention_bwd")
tensors = {
    name: hipdnn.Graph.tensor_like(array, name)
    for name, array in (("q", q_h), ("k", k_h), ("v", v_h), ("o", o_out), ("dO", do_h))
}
for t in tensors.values():
    t.set_is_pass_by_value(False)
lse_t = hipdnn.Tensor.create([B, H, SQ, 1], hipdnn.DataType.FLOAT).set_name("stats")
battributes = hipdnn.SdpaBackwardAttributes().set_causal_mask(True).set_attn_scale(SCALE)
dq, dk, dv = bwd.sdpa_backward(
    tensors["q"], tensors["k"], tensors["v"], tensors["o"], tensors["dO"], lse_t, battributes
)
for t in (dq, dk, dv):
    t.set_output(True)
build(bwd, handle)
grads = {t: np.zeros(t.get_dim(), np.float32) for t in (dq, dk, dv)}
pack = {tensors[n]: a for n, a in (("q", q_h), ("k", k_h), ("v", v_h), ("o", o_out), ("dO", do_h))}
pack[lse_t] = _get_data_ptr(lse_out)
pack.update(grads)
result = bwd.execute(handle, pack, 0)
assert result.is_good(), result.get_message()
for t, ref in ((dq, dq_ref), (dk, dk_ref), (dv, dv_ref)):
    np.testing.assert_allclose(grads[t], ref, rtol=1e-3, atol=1e-4)
print("backward OK", bwd.get_plan_name())

# error values, not exceptions
bad = bwd.execute(handle, {dq.get_uid(): grads[dq]}, 0)
assert bad.is_bad() and bad.get_code() == hipdnn.ErrorCode.INVALID_VARIANT_PACK
print("errors OK")

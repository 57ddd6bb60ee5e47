"""Examples of the "Running hipDNN Python code on hipdnn-graph" page: the same SDPA forward
written for hipDNN's wheel (run through hipdnn_graph.frontend) and with hipdnn-graph's own API."""

import numpy as np

# --8<-- [start:install]
import hipdnn_graph.frontend

print("hipdnn_frontend is", hipdnn_graph.frontend.install())
# --8<-- [end:install]

rng = np.random.default_rng(0)
q_host, k_host, v_host = (rng.standard_normal((1, 2, 8, 16)).astype(np.float32) for _ in range(3))

# --8<-- [start:hipdnn]
import hipdnn_frontend as hipdnn  # type: ignore[import-not-found]  # noqa: E402  (after install())

graph = hipdnn.Graph()
graph.set_io_data_type(hipdnn.DataType.FLOAT)
graph.set_intermediate_data_type(hipdnn.DataType.FLOAT)
graph.set_compute_data_type(hipdnn.DataType.FLOAT)

q = hipdnn.Tensor.create([1, 2, 8, 16], hipdnn.DataType.FLOAT)
k = hipdnn.Tensor.create([1, 2, 8, 16], hipdnn.DataType.FLOAT)
v = hipdnn.Tensor.create([1, 2, 8, 16], hipdnn.DataType.FLOAT)
attributes = hipdnn.SdpaAttributes().set_causal_mask(True).set_attn_scale(0.25)
o, stats = graph.sdpa(q, k, v, attributes)  # stats is None: generate_stats not set
o.set_output(True)

handle = hipdnn.create_handle()
assert graph.validate().is_good()
assert graph.build_operation_graph(handle).is_good()
assert graph.create_execution_plans([hipdnn.HeuristicMode.FALLBACK]).is_good()
assert graph.check_support().is_good()
assert graph.build_plans().is_good()

buffers = {}
for tensor, host in ((q, q_host), (k, k_host), (v, v_host), (o, np.zeros_like(q_host))):
    buffers[tensor.get_uid()] = hipdnn.DeviceBuffer(host.nbytes)
    buffers[tensor.get_uid()].copy_from_host(host.tobytes())
variant_pack = {uid: buffer.ptr() for uid, buffer in buffers.items()}
result = graph.execute(handle, variant_pack, 0)
print("hipdnn_frontend:", result.is_good())
out = np.frombuffer(buffers[o.get_uid()].copy_to_host(), np.float32).reshape(1, 2, 8, 16)
# --8<-- [end:hipdnn]

# --8<-- [start:native]
import hipdnn_graph as hg  # noqa: E402

g = hg.Graph(
    io_data_type=hg.DataType.FLOAT,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q2 = g.tensor(name="Q", dim=[1, 2, 8, 16])
k2, v2 = g.tensor_like(q2, "K"), g.tensor_like(q2, "V")
o2, _ = g.sdpa(q2, k2, v2, use_causal_mask=True, attn_scale=0.25, generate_stats=False)
o2.set_output(True)

g.build()  # validate → lower → plans → check support → build; raises on failure
out2 = np.zeros_like(q_host)
g.execute({q2: q_host, k2: k_host, v2: v_host, o2: out2})
print("hipdnn_graph:", out2.shape)
# --8<-- [end:native]

print("same result:", np.allclose(out, out2, rtol=1e-5, atol=1e-6))

# --8<-- [start:errors]
broken = hipdnn.Graph().set_compute_data_type(hipdnn.DataType.FLOAT)
bad_q = hipdnn.Tensor.create([1, 2, 8], hipdnn.DataType.FLOAT).set_name("q")
broken.sdpa(bad_q, bad_q, bad_q, hipdnn.SdpaAttributes())
error = broken.validate()  # an Error value, as in hipDNN; nothing is raised
print(error.get_code().name, "|", error.get_message())
try:
    graph.execute(handle, {q: True}, 0)  # hipDNN raises TypeError here; so does this module
except TypeError as exc:
    print(type(exc).__name__, "| also a HipdnnError:", isinstance(exc, hg.HipdnnError))
try:
    graph.topologicallySortGraph  # noqa: B018  (the attribute lookup itself fails)
except hg.NotSupportedError as exc:
    print(exc.code.name, "|", str(exc).split(" (")[0])
# --8<-- [end:errors]

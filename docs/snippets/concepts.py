"""Examples of the Concepts page, one section each."""

import hipdnn_graph as hg
from hipdnn_graph.descriptors import AttributeName as A
from hipdnn_graph.descriptors import AttributeType as T

# --8<-- [start:uids]
g = hg.Graph(
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q = g.tensor(name="Q", dim=[1, 2, 16, 32])
k = g.tensor(hg.TensorAttributes(name="K", dim=[1, 2, 16, 32], stride=[1024, 512, 32, 1], uid=1))
v = g.tensor_like(q, "V")  # same type, dims, strides and alignment; no uid
o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True)
assert stats is not None  # typed Optional: None when generate_stats is False
g.validate()
print([t.uid for t in (q, k, v, o)])  # validate() never assigns uids
g.build_operation_graph()  # lowering gives every tensor without one the next free integer
print([(t.name, t.uid) for t in g.graph_tensors()])
# --8<-- [end:uids]

# --8<-- [start:virtual]
print(o.get_is_virtual(), o.get_data_type().name)  # virtual: the intermediate type
print(q.get_is_virtual(), q.get_data_type().name)  # non-virtual: the io type
print(stats.get_data_type().name)  # Stats are FLOAT unless you set another type
# --8<-- [end:virtual]


# --8<-- [start:lifecycle]
def t(name: str, dims: list[int]) -> hg.TensorAttributes:
    return hg.TensorAttributes(name=name, dim=dims, stride=hg.generate_strides(dims))


x = [1, 2, 8, 16]
attributes = (
    hg.SdpaBackwardAttributes()
    .set_name("bwd")
    .set_q(t("Q", x)).set_k(t("K", x)).set_v(t("V", x))
    .set_o(t("O", x)).set_do(t("dO", x)).set_stats(t("Stats", [1, 2, 8, 1]))
    .set_dq(hg.TensorAttributes()).set_dk(hg.TensorAttributes()).set_dv(hg.TensorAttributes())
)  # fmt: skip
context = hg.GraphAttributes(io_data_type=hg.DataType.HALF, compute_data_type=hg.DataType.FLOAT)
node = hg.SdpaBwdNode(attributes, context)
node.pre_validate_node()  # the rules, in hipDNN's order
node.infer_properties_node()  # types from the graph, dQ/dK/dV dims from Q/K/V
node.post_validate_node()  # compute type, then every output tensor
dq = attributes.get_dq()
assert dq is not None
print(dq.get_dim(), dq.get_data_type().name, attributes.get_compute_data_type().name)
# --8<-- [end:lifecycle]

# --8<-- [start:ordering]
g2 = hg.Graph(
    io_data_type=hg.DataType.FLOAT,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q2 = g2.tensor(name="Q", dim=[1, 1, 8, 8])
k2, v2, do2 = g2.tensor_like(q2, "K"), g2.tensor_like(q2, "V"), g2.tensor_like(q2, "dO")
o2 = g2.tensor(name="O")  # declared first, produced by the forward added later
s2 = g2.tensor(name="Stats")
grads = g2.sdpa_backward(q2, k2, v2, o2, do2, s2, name="bwd")
fwd = hg.SdpaAttributes().set_name("fwd").set_q(q2).set_k(k2).set_v(v2).set_o(o2).set_stats(s2)
g2.add_node(hg.SdpaFwdNode(fwd))  # g2.sdpa() would create new O/Stats outputs
print([n.name for n in g2.nodes])  # insertion order before validate()
g2.validate()
print([n.name for n in g2.nodes])  # producers first after validate()
print(list(g2.to_networkx().edges(data="tensors")))
# --8<-- [end:ordering]

# --8<-- [start:descriptors]
desc = g.get_operation_graph_descriptor()
ops = desc.get_attribute(A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR)
print(desc.descriptor_type.name, [op.descriptor_type.name for op in ops])
lifted = hg.Graph.from_operation_graph_descriptor(desc)
print([t.name for t in lifted.graph_tensors()])  # uid order: a descriptor keeps no other
print(lifted.key() == g.key())  # key() hashes the bytes, and they keep the tensor order
lifted.build_operation_graph()
again = hg.Graph.from_operation_graph_descriptor(lifted.get_operation_graph_descriptor())
print(again.key() == lifted.key())  # from there on, lowering and lifting change nothing
# --8<-- [end:descriptors]

# --8<-- [start:engines]
for info in hg.list_backends():
    print(info.name, info.engines, info.error)
g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
g.build()
print(g.get_plan_name(), hex(hg.backend.engine_id(g.get_plan_name())))
print(g.get_engine_names()[0], len(g.get_engine_names()) >= 1)
# --8<-- [end:engines]

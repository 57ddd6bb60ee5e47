"""Spec §3: the Graph — tensors, node naming, virtual outputs, validate() steps and messages,
ordering through the graph, inspection, and robustness (only HipdnnError escapes validate)."""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hipdnn_graph import (
    DataType,
    ErrorCode,
    Graph,
    HipdnnError,
    SdpaAttributes,
    SdpaBackwardAttributes,
    SdpaBwdNode,
    SdpaFwdNode,
    TensorAttributes,
    generate_strides,
)

INVALID = ErrorCode.INVALID_VALUE
NOT_SET = ErrorCode.ATTRIBUTE_NOT_SET
B, H, S, D = 2, 4, 16, 8


def graph(**kw: Any) -> Graph:
    args: dict[str, Any] = {
        "name": "g",
        "io_data_type": DataType.BFLOAT16,
        "intermediate_data_type": DataType.FLOAT,
        "compute_data_type": DataType.FLOAT,
    }
    args.update(kw)
    return Graph(**args)


def inputs(g: Graph, names: str = "Q K V O dO Stats") -> list[TensorAttributes]:
    out = []
    for n in names.split():
        dims = [B, H, S, 1] if n == "Stats" else [B, H, S, D]
        t = g.tensor(name=n, dim=dims)
        if n == "Stats":
            t.set_data_type(DataType.FLOAT)
        out.append(t)
    return out


def bwd_graph(**kw: Any) -> tuple[Graph, list[TensorAttributes], tuple[TensorAttributes, ...]]:
    g = graph()
    ts = inputs(g)
    grads = g.sdpa_backward(*ts, **kw)
    for t in grads:
        t.set_output(True)
    return g, ts, grads


def fwd_bwd_graph() -> tuple[Graph, dict[str, TensorAttributes]]:
    g = graph()
    q, k, v = inputs(g, "Q K V")
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True)
    assert stats is not None
    do = g.tensor_like(q, "dO")
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd")
    for t in (dq, dk, dv):
        t.set_output(True)
    return g, {"q": q, "k": k, "v": v, "o": o, "stats": stats, "do": do, "dq": dq}


def expect(fn: Any, code: ErrorCode, message: str) -> None:
    with pytest.raises(HipdnnError) as info:
        fn()
    assert (info.value.code, info.value.message, str(info.value)) == (code, message, message)


# ----- graph attributes -----
def test_constructor_keywords_and_getters() -> None:
    g = graph(name="attn")
    assert g.get_name() == "attn"
    assert g.get_io_data_type() is DataType.BFLOAT16
    assert g.get_intermediate_data_type() is DataType.FLOAT
    assert g.get_compute_data_type() is DataType.FLOAT


def test_defaults_are_not_set() -> None:
    g = Graph()
    assert g.get_name() == ""
    assert g.get_io_data_type() is DataType.NOT_SET
    assert g.get_intermediate_data_type() is DataType.NOT_SET
    assert g.get_compute_data_type() is DataType.NOT_SET


def test_chainable_setters() -> None:
    g = Graph()
    same = (
        g.set_name("n")
        .set_io_data_type(DataType.HALF)
        .set_intermediate_data_type(DataType.FLOAT)
        .set_compute_data_type(DataType.FLOAT)
    )
    assert same is g
    assert (g.get_name(), g.get_io_data_type()) == ("n", DataType.HALF)
    assert g.get_intermediate_data_type() is DataType.FLOAT
    assert g.get_compute_data_type() is DataType.FLOAT


@pytest.mark.parametrize(
    "kw",
    [{"io_data_type": 99}, {"compute_data_type": "FLOAT"}, {"name": 3}],
    ids=["io_99", "compute_str", "name_int"],
)
def test_constructor_bad_keywords_raise_invalid_value(kw: dict[str, Any]) -> None:
    with pytest.raises(HipdnnError) as info:
        Graph(**kw)
    assert info.value.code is INVALID


@pytest.mark.parametrize(
    "setter", ["set_io_data_type", "set_intermediate_data_type", "set_compute_data_type"]
)
def test_setter_bad_data_type_raises_invalid_value(setter: str) -> None:
    with pytest.raises(HipdnnError) as info:
        getattr(Graph(), setter)(99)
    assert info.value.code is INVALID


# ----- tensors -----
def test_tensor_keywords_default_packed_strides() -> None:
    t = Graph().tensor(name="Q", dim=[2, 8, 16, 64])
    assert t.get_stride() == [8192, 1024, 64, 1]
    assert t.get_name() == "Q" and t.get_is_virtual() is False


def test_tensor_keywords_explicit_strides_kept() -> None:
    t = Graph().tensor(name="Q", dim=[2, 3], stride=[1, 2])
    assert t.get_stride() == [1, 2]


def test_tensor_attributes_object_is_the_handle() -> None:
    given_t = TensorAttributes().set_name("Q").set_dim([1, 2, 3, 4]).set_uid(1)
    t = Graph().tensor(given_t)
    assert t is given_t
    assert t.get_uid() == 1
    assert t.get_stride() == generate_strides([1, 2, 3, 4])


def test_tensor_unknown_keyword() -> None:
    with pytest.raises(HipdnnError) as info:
        Graph().tensor(name="Q", shape=[1])
    assert info.value.code is INVALID


@pytest.mark.parametrize(
    "call",
    [
        lambda g: g.tensor("Q"),
        lambda g: g.tensor(TensorAttributes(), name="Q"),
        lambda g: g.tensor(dim="abc"),
        lambda g: g.tensor_like("Q"),
    ],
    ids=["positional_str", "both_forms", "bad_dim", "tensor_like_str"],
)
def test_tensor_bad_arguments(call: Any) -> None:
    with pytest.raises(HipdnnError) as info:
        call(Graph())
    assert info.value.code is INVALID


def test_tensor_like_copies_content_not_identity() -> None:
    g = Graph()
    q = g.tensor(name="Q", dim=[1, 2, 3, 4], stride=[24, 1, 8, 2], data_type=DataType.HALF)
    q.set_uid(5).set_alignment(64)
    k = g.tensor_like(q, "K")
    assert k is not q and k.get_name() == "K"
    assert (k.get_dim(), k.get_stride(), k.get_data_type()) == (
        [1, 2, 3, 4],
        [24, 1, 8, 2],
        DataType.HALF,
    )
    assert k.get_alignment() == 64
    assert not k.has_uid()


# ----- node naming and outputs -----
def test_unnamed_backward_node_name_and_output_names() -> None:
    g, _, (dq, dk, dv) = bwd_graph()
    assert [n.name for n in g.nodes] == ["SdpaBwd_0"]
    assert (dq.get_name(), dk.get_name(), dv.get_name()) == (
        "SdpaBwd_0::dQ",
        "SdpaBwd_0::dK",
        "SdpaBwd_0::dV",
    )


def test_default_names_use_node_index() -> None:
    g = graph()
    q, k, v = inputs(g, "Q K V")
    o, stats = g.sdpa(q, k, v, generate_stats=True)
    assert stats is not None
    do = g.tensor_like(q, "dO")
    g.sdpa_backward(q, k, v, o, do, stats)
    names = [n.name for n in g.nodes]
    assert names == ["SdpaFwd_0", "SdpaBwd_1"]
    assert (o.get_name(), stats.get_name()) == ("SdpaFwd_0::O", "SdpaFwd_0::Stats")


def test_backward_then_forward_indexes() -> None:
    g = graph()
    ts = inputs(g)
    g.sdpa_backward(*ts)
    g.sdpa(*inputs(g, "Q K V"))
    assert [n.name for n in g.nodes] == ["SdpaBwd_0", "SdpaFwd_1"]


def test_named_node_outputs() -> None:
    _, _, (dq, dk, dv) = bwd_graph(name="bwd")
    assert [t.get_name() for t in (dq, dk, dv)] == ["bwd::dQ", "bwd::dK", "bwd::dV"]


def test_outputs_are_virtual_until_set_output() -> None:
    g = graph()
    grads = g.sdpa_backward(*inputs(g))
    assert all(t.get_is_virtual() for t in grads)
    grads[0].set_output(True)
    assert grads[0].get_is_virtual() is False
    o, stats = g.sdpa(*inputs(g, "Q K V"), generate_stats=True)
    assert o.get_is_virtual() and stats is not None and stats.get_is_virtual()


def test_unnamed_inputs_renamed_but_not_o_and_stats() -> None:
    g = graph()
    ts = [g.tensor(dim=[B, H, S, D]) for _ in range(5)]
    stats = g.tensor(dim=[B, H, S, 1])
    q, k, v, o, do = ts
    g.sdpa_backward(q, k, v, o, do, stats, name="bwd")
    assert [t.get_name() for t in (q, k, v, do)] == ["bwd::Q", "bwd::K", "bwd::V", "bwd::dO"]
    assert o.get_name() == "" and stats.get_name() == ""


def test_named_inputs_keep_names() -> None:
    g = graph()
    ts = inputs(g)
    g.sdpa_backward(*ts, name="bwd")
    assert [t.get_name() for t in ts] == ["Q", "K", "V", "O", "dO", "Stats"]


def test_returned_tensors_are_the_stored_handles() -> None:
    g, ts, (dq, dk, dv) = bwd_graph()
    node = g.nodes[0]
    assert isinstance(node, SdpaBwdNode)
    a = node.attributes
    assert a.get_dq() is dq and a.get_dk() is dk and a.get_dv() is dv
    assert a.get_q() is ts[0] and a.get_stats() is ts[5]
    g.validate()
    assert dq.get_dim() == [B, H, S, D]  # inference wrote into the returned handle


def test_dbias_not_created_automatically() -> None:
    g = graph()
    ts = inputs(g)
    bias = g.tensor(name="bias", dim=[1, H, S, S])
    out = g.sdpa_backward(*ts, bias=bias)
    assert len(out) == 3
    assert g.nodes[0].attributes.get_dbias() is None
    for t in out:
        t.set_output(True)
    g.validate()
    assert g.nodes[0].attributes.get_dbias() is None


def test_dbias_given_is_used_and_inferred() -> None:
    g = graph()
    ts = inputs(g)
    bias = g.tensor(name="bias", dim=[1, H, S, S])
    db = g.tensor(name="dBias")
    for t in g.sdpa_backward(*ts, bias=bias, dBias=db):
        t.set_output(True)
    assert g.nodes[0].attributes.get_dbias() is db
    g.validate()
    assert db.get_dim() == [1, H, S, S]


def test_forward_generate_stats_false_no_stats() -> None:
    g = graph()
    o, stats = g.sdpa(*inputs(g, "Q K V"), generate_stats=False)
    assert stats is None
    assert g.nodes[0].attributes.get_stats() is None
    o.set_output(True)
    g.validate()
    assert o.get_dim() == [B, H, S, D]


def test_forward_inference_shapes_through_graph() -> None:
    g = graph()
    q = g.tensor(name="Q", dim=[B, H, S, D])
    k = g.tensor(name="K", dim=[B, 2, 32, D])
    v = g.tensor(name="V", dim=[B, 1, 32, 48])
    o, stats = g.sdpa(q, k, v, name="f", generate_stats=True)
    g.validate()
    assert stats is not None
    assert o.get_dim() == [B, H, S, 48] and stats.get_dim() == [B, H, S, 1]
    assert stats.get_data_type() is DataType.FLOAT
    assert o.get_data_type() is DataType.FLOAT  # virtual → intermediate


# ----- validate() step 1: duplicate uids -----
def test_duplicate_uids() -> None:
    g, ts, _ = bwd_graph()
    ts[0].set_uid(1)
    ts[1].set_uid(1)
    ts[2].set_uid(2)
    ts[3].set_uid(2)
    expect(g.validate, INVALID, "Duplicate tensor UIDs found in the graph: 1, 2")


def test_duplicate_uid_output_and_input() -> None:
    g, ts, (dq, _, _) = bwd_graph()
    ts[4].set_uid(7)
    dq.set_uid(7)
    expect(g.validate, INVALID, "Duplicate tensor UIDs found in the graph: 7")


def test_same_tensor_in_two_slots_is_not_a_duplicate() -> None:
    g = graph()
    q = g.tensor(name="QK", dim=[B, H, S, D]).set_uid(1)
    v, o, do, stats = inputs(g, "V O dO Stats")
    for t in g.sdpa_backward(q, q, v, o, do, stats):
        t.set_output(True)
    g.validate()


def test_unique_uids_pass() -> None:
    g, ts, grads = bwd_graph()
    for i, t in enumerate([*ts, *grads], start=1):
        t.set_uid(i)
    g.validate()
    assert [t.get_uid() for t in ts] == [1, 2, 3, 4, 5, 6]


def test_validate_assigns_no_uids() -> None:
    g, ts, grads = bwd_graph()
    g.validate()
    assert not any(t.has_uid() for t in (*ts, *grads))


def test_duplicates_reported_before_disconnected() -> None:
    g = graph()
    a = inputs(g, "Q K V")
    b = inputs(g, "Q2 K2 V2")
    a[0].set_uid(3)
    b[0].set_uid(3)
    g.sdpa(*a, generate_stats=False)
    g.sdpa(*b, generate_stats=False)
    expect(g.validate, INVALID, "Duplicate tensor UIDs found in the graph: 3")


# ----- step 2: ordering -----
CYCLE = "Graph contains a cycle, cannot be sorted."
DISCONNECTED = (
    "Graph contains multiple disconnected components, please split the graph into individual graphs"
)


def test_disconnected_components() -> None:
    g = graph()
    g.sdpa(*inputs(g, "Q K V"), generate_stats=False)
    g.sdpa(*inputs(g, "Q2 K2 V2"), generate_stats=False)
    expect(g.validate, INVALID, DISCONNECTED)


def test_nodes_sharing_only_inputs_are_disconnected() -> None:
    # hipDNN connects nodes only through producer→consumer tensors, not shared inputs
    g = graph()
    q, k, v = inputs(g, "Q K V")
    g.sdpa(q, k, v, generate_stats=False)
    g.sdpa(q, k, v, generate_stats=False)
    expect(g.validate, INVALID, DISCONNECTED)


def _cyclic_graph() -> Graph:
    g = graph()
    q, k, v, o, do, stats = inputs(g)
    dq, _, _ = g.sdpa_backward(q, k, v, o, do, stats, name="bwd")
    fwd = SdpaAttributes().set_name("fwd").set_q(q).set_k(k).set_v(v).set_bias(dq)
    fwd.set_o(o).set_stats(stats).set_generate_stats(True)
    g.add_node(SdpaFwdNode(fwd, g.attributes))
    return g


def test_cycle() -> None:
    expect(_cyclic_graph().validate, INVALID, CYCLE)


def test_reverse_insertion_order_is_sorted() -> None:
    g = graph()
    q, k, v, do = inputs(g, "Q K V dO")
    o = g.tensor(name="O")  # produced by the forward node added below
    stats = g.tensor(name="Stats")
    grads = g.sdpa_backward(q, k, v, o, do, stats, name="bwd")
    for t in grads:
        t.set_output(True)
    o.set_is_virtual(True)
    stats.set_is_virtual(True)
    fwd = SdpaAttributes().set_name("fwd").set_q(q).set_k(k).set_v(v).set_o(o).set_stats(stats)
    g.add_node(SdpaFwdNode(fwd.set_generate_stats(True), g.attributes))
    assert [n.name for n in g.nodes] == ["bwd", "fwd"]  # insertion order before validate
    g.validate()
    assert [n.name for n in g.nodes] == ["fwd", "bwd"]
    assert o.get_dim() == [B, H, S, D] and stats.get_dim() == [B, H, S, 1]
    assert grads[0].get_dim() == [B, H, S, D]


def test_ties_keep_insertion_order() -> None:
    g = graph()
    q, k, v = inputs(g, "Q K V")
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True)
    assert stats is not None
    for name in ("b1", "b2", "b3"):
        do = g.tensor_like(q, f"dO_{name}")
        for t in g.sdpa_backward(q, k, v, o, do, stats, name=name):
            t.set_output(True)
    g.validate()
    assert [n.name for n in g.nodes] == ["fwd", "b1", "b2", "b3"]


def test_ties_keep_insertion_order_when_producer_is_in_the_middle() -> None:
    g = graph()
    q, k, v, do = inputs(g, "Q K V dO")
    o = g.tensor(name="O").set_is_virtual(True)
    stats = g.tensor(name="Stats").set_is_virtual(True)
    g.sdpa_backward(q, k, v, o, do, stats, name="x")
    fwd = SdpaAttributes().set_name("fwd").set_q(q).set_k(k).set_v(v).set_o(o).set_stats(stats)
    g.add_node(SdpaFwdNode(fwd.set_generate_stats(True), g.attributes))
    g.sdpa_backward(q, k, v, o, g.tensor_like(q, "dO2"), stats, name="y")
    for n in g.nodes:
        for t in n.outputs():
            if n.name != "fwd":
                t.set_output(True)
    g.validate()
    assert [n.name for n in g.nodes] == ["fwd", "x", "y"]


def test_order_is_hipdnn_fifo_kahn() -> None:
    # fwdA → bwdA → bwdB ← fwdB, declared in a valid order. hipDNN's Kahn sort (FIFO queue)
    # emits both sources first, so fwdB moves ahead of bwdA.
    g = graph()
    q, k, v = inputs(g, "Q K V")
    o_a, s_a = g.sdpa(q, k, v, name="fwdA", generate_stats=True)
    assert s_a is not None
    dq_a, _, _ = g.sdpa_backward(q, k, v, o_a, g.tensor_like(q, "dO"), s_a, name="bwdA")
    o_b, s_b = g.sdpa(g.tensor_like(q, "Q2"), k, v, name="fwdB", generate_stats=True)
    assert s_b is not None
    for t in g.sdpa_backward(q, k, v, o_b, dq_a, s_b, name="bwdB"):
        t.set_output(True)
    g.validate()
    assert [n.name for n in g.nodes] == ["fwdA", "fwdB", "bwdA", "bwdB"]


def test_nodes_and_to_networkx() -> None:
    g, _ = fwd_bwd_graph()
    g.validate()
    assert [type(n) for n in g.nodes] == [SdpaFwdNode, SdpaBwdNode]
    dg = g.to_networkx()
    assert isinstance(dg, nx.DiGraph)
    assert set(dg.nodes) == {"fwd", "bwd"}
    assert list(dg.edges) == [("fwd", "bwd")]
    assert sorted(dg.edges["fwd", "bwd"]["tensors"]) == ["fwd::O", "fwd::Stats"]
    assert list(nx.topological_sort(dg)) == ["fwd", "bwd"]


def test_to_networkx_before_validate() -> None:
    g, _ = fwd_bwd_graph()
    assert set(g.to_networkx().nodes) == {"fwd", "bwd"}


# ----- step 3: graph inputs are filled and validated -----
def test_inputs_filled_from_io_type() -> None:
    g, ts, _ = bwd_graph()
    g.validate()
    assert [t.get_data_type() for t in ts[:5]] == [DataType.BFLOAT16] * 5
    assert ts[5].get_data_type() is DataType.FLOAT  # explicit type kept


def test_graph_inputs_in_node_then_slot_order_whatever_order_the_slots_were_set() -> None:
    """validate() reads each node's slot map as it is; the graph inputs still come in slot order
    (a tensor read in two slots of a node counts at its lowest slot), and the first one that
    fails is the first reported."""
    g = graph()
    q, k, v, o, do, stats = inputs(g)
    given = SdpaBackwardAttributes().set_stats(stats).set_do(do).set_bias(q)  # Q read twice
    g.sdpa_backward(q, k, v, o, do, stats, given)
    assert [slot.name for slot in g.nodes[0].attributes.inputs][:3] == ["Stats", "dO", "Bias"]
    assert [t.name for t in g.graph_inputs()] == ["Q", "K", "V", "O", "dO", "Stats"]
    assert g.graph_inputs() == list(dict.fromkeys(g.nodes[0].inputs()))  # slot order, once each
    stats.set_alignment(0)
    q.set_alignment(0)
    expect(g.validate, INVALID, "Tensor Q alignment must be >= 1")


def test_input_without_data_type_when_io_not_set() -> None:
    g = graph(io_data_type=DataType.NOT_SET)
    ts = inputs(g)
    for t in g.sdpa_backward(*ts):
        t.set_output(True)
    expect(g.validate, NOT_SET, "Tensor Q does not have a data type set")


def test_input_validation_message() -> None:
    g, ts, _ = bwd_graph()
    ts[1].set_dim([B, H, 0, D])
    expect(g.validate, INVALID, "Tensor K must have only positive dimensions")


def test_input_validated_before_node_rules() -> None:
    g, ts, _ = bwd_graph()
    ts[1].set_dim([B + 1, H, S, D])  # node rule would fail (batch) ...
    ts[2].set_alignment(0)  # ... but input validation runs first
    expect(g.validate, INVALID, "Tensor V alignment must be >= 1")


def test_disconnected_reported_before_input_validation() -> None:
    g = graph()
    a = inputs(g, "Q K V")
    a[0].set_dim([0, 1, 1, 1])
    g.sdpa(*a, generate_stats=False)
    g.sdpa(*inputs(g, "Q2 K2 V2"), generate_stats=False)
    expect(g.validate, INVALID, DISCONNECTED)


# ----- step 4: node lifecycle -----
def test_node_rule_through_graph() -> None:
    g, ts, _ = bwd_graph()
    ts[1].set_dim([B, H, S, D + 1]).set_stride(generate_strides([B, H, S, D + 1]))
    expect(g.validate, INVALID, "SdpaBwdNode: head_dim mismatch between Q and K: 8 vs 9")


def test_post_validate_compute_type_through_graph() -> None:
    g = graph(compute_data_type=DataType.NOT_SET)
    for t in g.sdpa_backward(*inputs(g)):
        t.set_output(True)
    expect(g.validate, NOT_SET, "Node SdpaBwd_0 does not have a compute_data_type set")


def test_virtual_output_without_intermediate_type() -> None:
    g = graph(intermediate_data_type=DataType.NOT_SET)
    g.sdpa_backward(*inputs(g), name="bwd")
    expect(g.validate, NOT_SET, "Tensor bwd::dQ does not have a data type set")


def test_outputs_set_as_outputs_take_io_type() -> None:
    g, _, grads = bwd_graph()
    g.validate()
    assert [t.get_data_type() for t in grads] == [DataType.BFLOAT16] * 3


def test_virtual_outputs_take_intermediate_type() -> None:
    g = graph()
    grads = g.sdpa_backward(*inputs(g))
    g.validate()
    assert [t.get_data_type() for t in grads] == [DataType.FLOAT] * 3


def test_nodes_validated_in_topological_order() -> None:
    g = graph()
    q, k, v, do = inputs(g, "Q K V dO")
    o = g.tensor(name="O").set_is_virtual(True)
    stats = g.tensor(name="Stats").set_is_virtual(True)
    g.sdpa_backward(q, k, v, o, do, stats, name="bwd", attn_scale=0.5)
    fwd = SdpaAttributes().set_name("fwd").set_q(q).set_k(k).set_v(v).set_o(o).set_stats(stats)
    fwd.set_bias(g.tensor(name="bad_bias", dim=[S + 1]))
    g.add_node(SdpaFwdNode(fwd, g.attributes))
    g.nodes[0].attributes.set_max_total_seq_len_q(1)  # bwd would fail too, but fwd goes first
    expect(
        g.validate, INVALID, "SdpaFwdNode: ATTN_MASK last dim must equal seq_kv (16) or 1, got 17"
    )


def test_backward_checks_do_against_inferred_o() -> None:
    g = graph()
    q, k, v = inputs(g, "Q K V")
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True)
    assert stats is not None
    do = g.tensor(name="dO", dim=[B, H, S + 1, D])
    g.sdpa_backward(q, k, v, o, do, stats, name="bwd")
    expect(g.validate, INVALID, "SdpaBwdNode: dO seq_q mismatch with O")


def test_explicit_wrong_gradient_dims_rejected_through_graph() -> None:
    g, _, (dq, _, _) = bwd_graph()
    dq.set_dim([B, H, S, D * 2])
    with pytest.raises(HipdnnError) as info:
        g.validate()
    assert info.value.code is INVALID and "dQ" in info.value.message


def test_fwd_bwd_graph_validates_and_is_idempotent() -> None:
    g, t = fwd_bwd_graph()
    g.validate()
    g.validate()
    assert [n.name for n in g.nodes] == ["fwd", "bwd"]
    assert t["o"].get_dim() == [B, H, S, D]
    assert t["dq"].get_dim() == [B, H, S, D]
    assert t["dq"].get_stride() == generate_strides([B, H, S, D])


# ----- nothing the caller passed in is mutated (but graph-owned tensors are) -----
def _snapshot(a: SdpaBackwardAttributes) -> dict[str, Any]:
    return {
        "fields": {k: v for k, v in a.model_dump().items() if k not in ("inputs", "outputs")},
        "inputs": {k: id(v) for k, v in a.inputs.items()},
        "outputs": {k: id(v) for k, v in a.outputs.items()},
        "reason": a.get_unsupported_reason(),
    }


def test_caller_attributes_not_mutated() -> None:
    g = graph()
    ts = inputs(g)
    bias = g.tensor(name="bias", dim=[1, 1, S, S])
    a = SdpaBackwardAttributes().set_causal_mask(True).set_bias(bias).set_attn_scale(0.25)
    before = _snapshot(a)
    grads = g.sdpa_backward(*ts, a)
    for t in grads:
        t.set_output(True)
    g.validate()
    assert _snapshot(a) == before
    assert a.get_name() == "" and a.get_compute_data_type() is DataType.NOT_SET
    assert a.get_q() is None and a.get_dq() is None
    node_attrs = g.nodes[0].attributes
    assert node_attrs is not a and node_attrs.get_causal_mask() is True
    assert node_attrs.get_bias() is bias


def test_caller_attributes_not_mutated_by_failed_validate() -> None:
    g = graph(compute_data_type=DataType.NOT_SET)
    a = SdpaBackwardAttributes().set_name("bwd")
    before = _snapshot(a)
    g.sdpa_backward(*inputs(g), a, use_causal_mask=True)
    with pytest.raises(HipdnnError):
        g.validate()
    assert _snapshot(a) == before
    assert a.get_causal_mask() is False  # keywords applied to the graph's copy only


def test_caller_forward_attributes_not_mutated() -> None:
    g = graph()
    a = SdpaAttributes().set_causal_mask(True).set_generate_stats(True)
    before = {k: v for k, v in a.model_dump().items() if k not in ("inputs", "outputs")}
    o, _ = g.sdpa(*inputs(g, "Q K V"), a, name="fwd")
    o.set_output(True)
    g.validate()
    assert {k: v for k, v in a.model_dump().items() if k not in ("inputs", "outputs")} == before
    assert a.get_o() is None and a.get_stats() is None and a.get_q() is None
    assert g.nodes[0].attributes.get_o() is o


def test_same_attributes_object_reusable_for_two_nodes() -> None:
    g = graph()
    q, k, v = inputs(g, "Q K V")
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True)
    assert stats is not None
    a = SdpaBackwardAttributes().set_causal_mask(True)
    g1 = g.sdpa_backward(q, k, v, o, g.tensor_like(q, "dO1"), stats, a)
    g2 = g.sdpa_backward(q, k, v, o, g.tensor_like(q, "dO2"), stats, a)
    assert g1[0] is not g2[0]
    assert [n.name for n in g.nodes] == ["fwd", "SdpaBwd_1", "SdpaBwd_2"]
    g.validate()


# ----- robustness: validate() raises HipdnnError or passes, never anything else -----
DTYPES = st.sampled_from(
    [
        DataType.NOT_SET,
        DataType.FLOAT,
        DataType.HALF,
        DataType.BFLOAT16,
        DataType.INT32,
        DataType.INT64,
        DataType.BOOLEAN,
    ]
)
DIMS = st.lists(st.integers(-1, 5), min_size=0, max_size=5)


@st.composite
def tensors(draw: Any, name: str) -> TensorAttributes:
    """Mostly plausible tensors (so node rules are reached), sometimes nonsense."""
    t = TensorAttributes().set_name(draw(st.sampled_from([name, name, ""])))
    if draw(st.integers(0, 9)) < 8:  # plausible: rank 4 mostly, small positive dims
        rank = draw(st.sampled_from([4, 4, 4, 4, 4, 4, 1, 2, 3, 5]))
        dims = draw(st.lists(st.sampled_from([1, 2, 2, 2, 3]), min_size=rank, max_size=rank))
        t.set_data_type(draw(st.sampled_from([DataType.HALF, DataType.FLOAT, DataType.INT32])))
        t.set_dim(dims).set_stride(generate_strides(dims))
        if draw(st.integers(0, 9)) == 0:
            t.set_value(draw(st.sampled_from([0.5, 2, True])))
        return t
    t.set_data_type(draw(DTYPES))
    dims = draw(DIMS)
    t.set_dim(dims)
    mode = draw(st.sampled_from(["packed", "none", "random"]))
    if mode == "packed":
        t.set_stride(generate_strides(dims))
    elif mode == "random":
        t.set_stride(draw(st.lists(st.integers(-2, 8), max_size=5)))
    t.set_is_virtual(draw(st.booleans()))
    if draw(st.integers(0, 4)) == 0:
        t.set_is_pass_by_value(True)
    if draw(st.integers(0, 4)) == 0:
        t.set_value(draw(st.sampled_from([0.5, 2, True])))
    if draw(st.integers(0, 9)) == 0:
        t.set_alignment(draw(st.integers(-1, 64)))
    if draw(st.integers(0, 4)) == 0:
        t.set_uid(draw(st.integers(0, 3)))
    return t


PLAUSIBLE_TYPES = st.sampled_from([DataType.FLOAT, DataType.FLOAT, DataType.HALF, DataType.NOT_SET])


OPTIONAL = ["attn_scale", "bias", "seq_len_q", "seq_len_kv", "dropout_mask"]


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_validate_raises_only_hipdnn_error(data: Any) -> None:
    g = Graph(
        io_data_type=data.draw(PLAUSIBLE_TYPES),
        intermediate_data_type=data.draw(PLAUSIBLE_TYPES),
        compute_data_type=data.draw(PLAUSIBLE_TYPES),
    )
    b, h, sq, skv, d = (data.draw(st.integers(1, 3)) for _ in range(5))
    coherent = {
        "Q": [b, h, sq, d],
        "K": [b, h, skv, d],
        "V": [b, h, skv, d],
        "O": [b, h, sq, d],
        "dO": [b, h, sq, d],
        "Stats": [b, h, sq, 1],
        "bias": [1, 1, sq, skv],
        "dropout_mask": [b, h, sq, skv],
        "seq_len_q": [b, 1, 1, 1],
        "seq_len_kv": [b, 1, 1, 1],
    }

    def make(name: str) -> TensorAttributes:
        if name in coherent and data.draw(st.integers(0, 19)) < 17:
            dims = coherent[name]
            dtype = DataType.INT32 if name.startswith("seq_len") else DataType.HALF
            return g.tensor(name=name, dim=dims, data_type=dtype)
        if name == "attn_scale" and data.draw(st.booleans()):
            return g.tensor(TensorAttributes(name=name).set_value(0.5))
        return g.tensor(data.draw(tensors(name)))

    try:
        q, k, v = (make(n) for n in ("Q", "K", "V"))
        with_fwd = data.draw(st.booleans())
        if with_fwd:
            fkw: dict[str, Any] = {"generate_stats": True}
            if data.draw(st.booleans()):
                fkw["bias"] = make("bias")
            o, stats = g.sdpa(q, k, v, **fkw)
            assert stats is not None
            if data.draw(st.integers(0, 5)) == 0:
                o.set_dim(data.draw(DIMS))
        else:
            o, stats = (make(n) for n in ("O", "Stats"))
        do = make("dO")
        kw: dict[str, Any] = {}
        for slot in OPTIONAL:
            if data.draw(st.integers(0, 3)) == 0:
                kw[slot] = make(slot)
        if data.draw(st.integers(0, 3)) == 0:
            kw["use_padding_mask"] = True
            for slot in ("seq_len_q", "seq_len_kv"):
                if slot not in kw and data.draw(st.integers(0, 9)) < 8:
                    kw[slot] = make(slot)
        if data.draw(st.integers(0, 3)) == 0:
            kw["attn_scale"] = kw.get("attn_scale", 0.5)
        if data.draw(st.integers(0, 3)) == 0:
            kw["dBias"] = make("dBias")
        if data.draw(st.integers(0, 5)) == 0:
            kw["dropout"] = (0.1, make("seed"), make("offset"))
        a = SdpaBackwardAttributes()
        if data.draw(st.integers(0, 5)) == 0:
            a.set_attn_scale(0.25)
        dropout_mask = kw.pop("dropout_mask", None)
        if dropout_mask is not None:
            a.set_dropout_mask(dropout_mask)
        grads = g.sdpa_backward(q, k, v, o, do, stats, a, **kw)
        for t in grads:
            t.set_output(data.draw(st.booleans()))
            if data.draw(st.integers(0, 6)) == 0:
                t.set_dim(data.draw(DIMS))
            if data.draw(st.integers(0, 9)) == 0:
                t.set_stride(data.draw(st.lists(st.integers(-1, 64), max_size=5)))
    except HipdnnError:
        return
    try:
        g.validate()
    except HipdnnError as err:
        assert isinstance(err.code, ErrorCode) and err.code is not ErrorCode.OK
        assert isinstance(err.message, str) and err.message


def test_single_node_reading_its_own_output_is_a_cycle() -> None:
    g = graph()
    q, k, v, o, do = inputs(g, "Q K V O dO")
    dv = g.tensor(name="dV", dim=[B, H, S, D])  # also fed back as the node's Stats
    a = SdpaBackwardAttributes().set_name("self").set_q(q).set_k(k).set_v(v).set_o(o)
    a.set_do(do).set_stats(dv).set_dq(TensorAttributes()).set_dk(TensorAttributes()).set_dv(dv)
    g.add_node(SdpaBwdNode(a, g.attributes))
    expect(g.validate, INVALID, CYCLE)


def test_to_networkx_keeps_nodes_with_equal_names_apart() -> None:
    g = graph()
    q, k, v = inputs(g, "Q K V")
    o, stats = g.sdpa(q, k, v, name="same", generate_stats=True)
    assert stats is not None
    g.sdpa_backward(q, k, v, o, g.tensor_like(q, "dO"), stats, name="same")
    assert g.to_networkx().number_of_nodes() == 2

"""Graph lowering (spec §3, §7): ``build_operation_graph`` gives one finalized OPERATIONGRAPH
descriptor, and ``Graph.from_operation_graph_descriptor`` lifts it back into an equal graph."""

from __future__ import annotations

import pytest
from sdpa_graph_cases import BIG_ENGINE_NAME, CASES, by_uid, tensor_fields

import hipdnn_graph as hg
from hipdnn_graph.backend import engine_id
from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError
from hipdnn_graph.descriptors.enums import AttributeName as A
from hipdnn_graph.descriptors.enums import AttributeType as T
from hipdnn_graph.descriptors.enums import DescriptorType
from hipdnn_graph.types import ErrorCode

IDS = sorted(CASES)


def _descriptor(case: str) -> BackendDescriptor:
    desc: BackendDescriptor = CASES[case]().build_operation_graph().get_operation_graph_descriptor()
    return desc


def _ops(desc: BackendDescriptor) -> list[BackendDescriptor]:
    return desc.get_attribute(A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR)


@pytest.mark.parametrize("case", IDS)
def test_lowering_gives_a_finalized_operation_graph(case: str) -> None:
    desc = _descriptor(case)
    assert desc.descriptor_type == DescriptorType.OPERATIONGRAPH
    assert int(desc.descriptor_type) == 10
    assert desc.is_finalized
    assert all(op.is_finalized for op in _ops(desc))


@pytest.mark.parametrize("case", IDS)
def test_lifting_gives_an_equal_graph(case: str) -> None:
    g = CASES[case]()
    desc = g.build_operation_graph().get_operation_graph_descriptor()
    lifted = hg.Graph.from_operation_graph_descriptor(desc)
    # descriptors carry no declaration order: a lifted graph lists its tensors by uid
    assert [t.uid for t in lifted.tensors] == sorted(t.uid for t in g.graph_tensors())
    original = {t.uid: tensor_fields(t) for t in g.graph_tensors()}
    assert {t.uid: tensor_fields(t) for t in lifted.tensors} == original
    lifted.validate()
    again = lifted.build_operation_graph().get_operation_graph_descriptor()
    relifted = hg.Graph.from_operation_graph_descriptor(again)
    assert {t.uid: tensor_fields(t) for t in relifted.tensors} == original
    assert by_uid(lifted.to_json()) == by_uid(g.to_json())
    assert relifted.serialize() == lifted.serialize()


def test_operations_are_in_topological_order() -> None:
    g = hg.Graph(
        io_data_type=hg.DataType.HALF,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q, k, v = (g.tensor(name=n, dim=[1, 2, 8, 16]) for n in "QKV")
    do = g.tensor(name="dO", dim=[1, 2, 8, 16])
    o = g.tensor(name="O_in", dim=[1, 2, 8, 16])
    stats = g.tensor(name="S_in", dim=[1, 2, 8, 1], data_type=hg.DataType.FLOAT)
    # declared backward first; it reads the forward's outputs through its attributes later
    bwd = hg.SdpaBackwardAttributes().set_name("bwd")
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, bwd)
    fwd_o, fwd_stats = g.sdpa(q, k, v, name="fwd")
    assert fwd_stats is not None
    g.nodes[0].attributes.set_o(fwd_o).set_stats(fwd_stats)
    for t in (dq, dk, dv):
        t.set_output(True)
    ops = _ops(g.build_operation_graph().get_operation_graph_descriptor())
    assert [op.descriptor_type for op in ops] == [
        DescriptorType.OPERATION_SDPA_FWD,
        DescriptorType.OPERATION_SDPA_BWD_DESCRIPTOR_EXT,
    ]
    lifted = hg.Graph.from_operation_graph_descriptor(g.get_operation_graph_descriptor())
    assert [n.name for n in lifted.nodes] == ["fwd", "bwd"]


def test_graph_attributes_are_packed() -> None:
    desc = _descriptor("engine_by_name")
    get = desc.get_attribute
    assert get(A.OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, T.DATA_TYPE) == [hg.DataType.FLOAT]
    assert get(A.OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, T.DATA_TYPE) == [hg.DataType.FLOAT]
    assert get(A.OPERATIONGRAPH_IO_DATA_TYPE_EXT, T.DATA_TYPE) == [hg.DataType.BFLOAT16]
    assert get(A.OPERATIONGRAPH_NAME_EXT, T.CHAR) == ["bwd"]
    # INT64 attribute: a 64-bit id above 2**63 is stored as its two's-complement value
    big = engine_id(BIG_ENGINE_NAME)
    assert big >= 2**63
    assert get(A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.INT64) == [big - 2**64]
    lifted = hg.Graph.from_operation_graph_descriptor(desc)
    assert lifted.get_preferred_engine_id_ext() == big


def test_optional_graph_attributes_are_left_out_when_unset() -> None:
    desc = _descriptor("unnamed")
    assert not desc.has_attribute(A.OPERATIONGRAPH_NAME_EXT)
    assert not desc.has_attribute(A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT)
    lifted = hg.Graph.from_operation_graph_descriptor(desc)
    assert lifted.get_name() == "" and lifted.get_preferred_engine_id_ext() is None


def test_lifted_tensors_are_listed_by_uid() -> None:
    lifted = hg.Graph.from_operation_graph_descriptor(_descriptor("bwd_full"))
    uids = [t.get_uid() for t in lifted.tensors]
    assert uids == sorted(uids) == list(range(1, 20))


def test_build_operation_graph_validates_first() -> None:
    g = CASES["bwd"]()
    assert not g.is_validated
    g.build_operation_graph()
    assert g.is_validated
    bad = CASES["bwd"]()
    bad.tensors[1].set_dim([2, 4, 16, 4]).set_stride([256, 64, 4, 1])
    with pytest.raises(hg.HipdnnError) as err:
        bad.build_operation_graph()
    assert err.value.message == "SdpaBwdNode: head_dim mismatch between Q and K: 8 vs 4"
    assert all(t.uid is None for t in bad.tensors)  # nothing assigned when validation fails


def test_descriptor_is_unavailable_before_lowering() -> None:
    with pytest.raises(hg.HipdnnError) as err:
        CASES["fwd"]().get_operation_graph_descriptor()
    assert err.value.code == ErrorCode.INVALID_VALUE


def test_lowering_twice_keeps_uids() -> None:
    g = CASES["fwd_bwd"]()
    g.build_operation_graph()
    first = [t.get_uid() for t in g.tensors]
    g.build_operation_graph()
    assert [t.get_uid() for t in g.tensors] == first


def test_uids_assigned_after_a_change_skip_existing_ones() -> None:
    g = CASES["fwd"]()
    g.build_operation_graph()
    extra = g.tensor(name="Bias", dim=[1, 4, 16, 16])
    g.nodes[0].attributes.set_bias(extra)
    g.build_operation_graph()
    assert extra.get_uid() == 6  # Q K V O Stats hold 1-5


def test_lift_rejects_other_descriptors() -> None:
    op = _ops(_descriptor("fwd"))[0]
    with pytest.raises(hg.HipdnnError) as err:
        hg.Graph.from_operation_graph_descriptor(op)
    assert err.value.code == ErrorCode.INVALID_VALUE
    assert err.value.message == "Expected an OPERATIONGRAPH descriptor, got OPERATION_SDPA_FWD"


def test_lift_of_an_unfinalized_descriptor_fails_like_hipdnn() -> None:
    desc = BackendDescriptor(DescriptorType.OPERATIONGRAPH)
    with pytest.raises(DescriptorError) as err:
        hg.Graph.from_operation_graph_descriptor(desc)
    assert err.value.message == "GraphDescriptor::getAttribute() failed: Not finalized."


def test_a_graph_descriptor_needs_operations() -> None:
    desc = BackendDescriptor(DescriptorType.OPERATIONGRAPH)
    with pytest.raises(DescriptorError) as err:
        desc.finalize()
    assert err.value.message == "GraphDescriptor::finalize: graph is null"

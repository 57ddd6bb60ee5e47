"""Per-node packing (spec §7): ``create_operation`` then ``unpack_from_descriptor`` gives equal
attributes; what each operation descriptor holds follows hipDNN's rules."""

from __future__ import annotations

from typing import Any

import pytest
from sdpa_graph_cases import CASES, tensor_fields

import hipdnn_graph as hg
from hipdnn_graph.descriptors import BackendDescriptor
from hipdnn_graph.descriptors.enums import AttributeName as A
from hipdnn_graph.descriptors.enums import AttributeType as T
from hipdnn_graph.descriptors.enums import DescriptorType
from hipdnn_graph.descriptors.node_spec import Kind
from hipdnn_graph.nodes.sdpa_bwd import SDPA_BWD_SPEC
from hipdnn_graph.nodes.sdpa_fwd import SDPA_FWD_SPEC
from hipdnn_graph.types import ErrorCode

IDS = sorted(CASES)
_PLAIN = (
    "name", "compute_data_type", "alibi_mask", "padding_mask", "causal_mask",
    "causal_mask_bottom_right", "dropout_probability", "attn_scale_value", "left_bound",
    "right_bound", "diagonal_alignment",
)  # fmt: skip


def _lowered(case: str) -> hg.Graph:
    g = CASES[case]()
    g.build_operation_graph()
    return g


def _pack_unpack(g: hg.Graph) -> list[Any]:
    """Pack every node, then unpack each into a fresh node sharing one tensor map."""
    descs: dict[int, BackendDescriptor] = {}
    ops: list[BackendDescriptor] = []
    for node in g.nodes:
        op = node.create_operation(descs, ops)  # type: ignore[attr-defined]
        assert op is ops[-1] and op.is_finalized
    tensor_map: dict[int, hg.TensorAttributes] = {}
    unpacked = []
    for node, op in zip(g.nodes, ops, strict=True):
        fresh = type(node)(type(node.attributes)(), g.attributes)
        assert fresh.unpack_from_descriptor(op, tensor_map) is fresh  # type: ignore[attr-defined]
        unpacked.append(fresh)
    return unpacked


@pytest.mark.parametrize("case", IDS)
def test_pack_then_unpack_gives_equal_attributes(case: str) -> None:
    g = _lowered(case)
    for node, back in zip(g.nodes, _pack_unpack(g), strict=True):
        a, b = node.attributes, back.attributes
        assert type(a) is type(b)
        for field in _PLAIN:
            assert getattr(b, field) == getattr(a, field), field
            assert type(getattr(b, field)) is type(getattr(a, field)), field
        if isinstance(a, hg.SdpaAttributes):
            assert b.generate_stats == a.generate_stats
        assert list(b.inputs) == [s for s in a.InputNames if s in a.inputs]
        assert list(b.outputs) == [s for s in a.OutputNames if s in a.outputs]
        for mine, theirs in ((a.inputs, b.inputs), (a.outputs, b.outputs)):
            assert set(mine) == set(theirs)
            for slot, tensor in mine.items():
                assert tensor_fields(theirs[slot]) == tensor_fields(tensor), slot.name
                assert theirs[slot] is not tensor  # rebuilt, not aliased


@pytest.mark.parametrize("case", ["fwd_bwd", "unnamed", "user_uids", "explicit_layouts"])
def test_unpacked_tensors_are_shared_once_per_uid(case: str) -> None:
    g = _lowered(case)
    nodes = _pack_unpack(g)
    by_uid: dict[int, hg.TensorAttributes] = {}
    for node in nodes:
        for t in (*node.inputs(), *node.outputs()):
            assert by_uid.setdefault(t.get_uid(), t) is t
    fwd, bwd = nodes
    assert bwd.attributes.get_q() is fwd.attributes.get_q()
    assert bwd.attributes.get_o() is fwd.attributes.get_o()
    assert bwd.attributes.get_stats() is fwd.attributes.get_stats()


def test_tensor_descriptors_are_shared_by_uid() -> None:
    g = _lowered("fwd_bwd")
    descs: dict[int, BackendDescriptor] = {}
    ops: list[BackendDescriptor] = []
    for node in g.nodes:
        node.create_operation(descs, ops)  # type: ignore[attr-defined]
    fwd, bwd = ops

    def ref(op: BackendDescriptor, attr: A) -> Any:
        return op.get_attribute(attr, T.BACKEND_DESCRIPTOR)[0]

    assert ref(fwd, A.OPERATION_SDPA_FWD_QDESC) is ref(bwd, A.OPERATION_SDPA_BWD_Q_EXT)
    assert ref(fwd, A.OPERATION_SDPA_FWD_ODESC) is ref(bwd, A.OPERATION_SDPA_BWD_O_EXT)
    assert ref(fwd, A.OPERATION_SDPA_FWD_STATSDESC) is ref(bwd, A.OPERATION_SDPA_BWD_STATS_EXT)
    assert sorted(descs) == sorted(t.get_uid() for t in g.tensors)


def _op(case: str, index: int = 0) -> BackendDescriptor:
    g = _lowered(case)
    ops = g.get_operation_graph_descriptor().get_attribute(
        A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR
    )
    op: BackendDescriptor = ops[index]
    return op


def _flags(spec: Any) -> list[Any]:
    return [s.attribute[0] for s in spec.scalars if s.kind is Kind.BOOL and s.attribute]


def _optional_scalars(spec: Any) -> list[Any]:
    return [s.attribute[0] for s in spec.scalars if not s.always and s.attribute]


def test_minimal_backward_writes_required_slots_flags_alignment_type_and_name() -> None:
    op = _op("bwd")
    assert op.descriptor_type == DescriptorType.OPERATION_SDPA_BWD_DESCRIPTOR_EXT
    for slot in SDPA_BWD_SPEC.slots:
        assert op.has_attribute(slot.attribute) == slot.required, slot.name
    for attr in _flags(SDPA_BWD_SPEC):
        assert op.has_attribute(attr) and op.get_attribute(attr, T.BOOLEAN) == [False]
    for attr in _optional_scalars(SDPA_BWD_SPEC):
        assert not op.has_attribute(attr)
    assert op.get_attribute(A.SDPA_BWD_DIAGONAL_ALIGNMENT_EXT, T.DIAGONAL_ALIGNMENT) == [
        hg.DiagonalAlignment.TOP_LEFT
    ]
    assert op.has_attribute(A.SDPA_BWD_DIAGONAL_ALIGNMENT_EXT)
    assert op.get_attribute(A.SDPA_BWD_COMP_TYPE_EXT, T.DATA_TYPE) == [hg.DataType.FLOAT]
    assert op.get_attribute(A.OPERATION_NAME_EXT, T.CHAR) == ["grad"]


def test_full_backward_writes_every_slot_and_scalar() -> None:
    op = _op("bwd_full")
    for slot in SDPA_BWD_SPEC.slots:
        assert op.has_attribute(slot.attribute), slot.name
    for attr in _flags(SDPA_BWD_SPEC):
        assert op.get_attribute(attr, T.BOOLEAN) == [True]
    assert op.get_attribute(A.SDPA_BWD_DROPOUT_PROBABILITY_EXT, T.FLOAT) == [
        pytest.approx(0.1, rel=1e-6)
    ]
    assert op.get_attribute(A.SDPA_BWD_LEFT_BOUND_EXT, T.INT64) == [64]
    assert op.get_attribute(A.SDPA_BWD_RIGHT_BOUND_EXT, T.INT64) == [0]
    assert not op.has_attribute(A.SDPA_BWD_ATTN_SCALE_VALUE_EXT)  # a scale tensor instead
    assert op.get_attribute(A.SDPA_BWD_DIAGONAL_ALIGNMENT_EXT, T.DIAGONAL_ALIGNMENT) == [
        hg.DiagonalAlignment.BOTTOM_RIGHT
    ]


def test_forward_scalars_are_written_only_when_set() -> None:
    full, plain, inference = _op("fwd_full"), _op("fwd"), _op("fwd_no_stats")
    assert full.get_attribute(A.SDPA_FWD_GENERATE_STATS_EXT, T.BOOLEAN) == [True]
    assert inference.get_attribute(A.SDPA_FWD_GENERATE_STATS_EXT, T.BOOLEAN) == [False]
    assert not inference.has_attribute(A.OPERATION_SDPA_FWD_STATSDESC)
    assert full.get_attribute(A.SDPA_FWD_LEFT_BOUND_EXT, T.INT64) == [4]
    for attr in _optional_scalars(SDPA_FWD_SPEC):
        if attr != A.SDPA_FWD_GENERATE_STATS_EXT:
            assert not plain.has_attribute(attr), attr.name
    layouts = _op("explicit_layouts")
    assert layouts.get_attribute(A.SDPA_FWD_ATTN_SCALE_VALUE_EXT, T.FLOAT) == [0.5]


def test_unnamed_nodes_get_default_names_which_are_packed() -> None:
    assert _op("unnamed", 0).get_attribute(A.OPERATION_NAME_EXT, T.CHAR) == ["SdpaFwd_0"]
    assert _op("unnamed", 1).get_attribute(A.OPERATION_NAME_EXT, T.CHAR) == ["SdpaBwd_1"]


def test_an_empty_node_name_is_not_packed() -> None:
    g = _lowered("bwd")
    g.nodes[0].attributes.name = ""
    ops: list[BackendDescriptor] = []
    op = g.nodes[0].create_operation({}, ops)  # type: ignore[attr-defined]
    assert not op.has_attribute(A.OPERATION_NAME_EXT)
    back = hg.SdpaBwdNode(hg.SdpaBackwardAttributes()).unpack_from_descriptor(op, {})
    assert back.attributes.name == ""


def test_tensor_descriptor_fields() -> None:
    op = _op("bwd_full")
    scale = op.get_attribute(A.OPERATION_SDPA_BWD_SCALE_EXT, T.BACKEND_DESCRIPTOR)[0]
    assert scale.descriptor_type == DescriptorType.TENSOR
    assert scale.get_attribute(A.TENSOR_NAME_EXT, T.CHAR) == ["Scale"]
    assert scale.get_attribute(A.TENSOR_DATA_TYPE, T.DATA_TYPE) == [hg.DataType.FLOAT]
    assert scale.get_attribute(A.TENSOR_VALUE_EXT, T.CHAR) == [b"\x00\x00\x00>"]  # 0.125f
    dq = op.get_attribute(A.OPERATION_SDPA_BWD_DQ_EXT, T.BACKEND_DESCRIPTOR)[0]
    assert dq.get_attribute(A.TENSOR_IS_VIRTUAL, T.BOOLEAN) == [False]
    assert dq.get_attribute(A.TENSOR_DIMENSIONS, T.INT64) == [2, 4, 16, 8]
    assert dq.get_attribute(A.TENSOR_STRIDES, T.INT64) == [512, 128, 8, 1]
    assert not dq.has_attribute(A.TENSOR_VALUE_EXT)


def test_unpack_rejects_another_operation_type() -> None:
    op = _op("fwd")
    with pytest.raises(hg.HipdnnError) as err:
        hg.SdpaBwdNode(hg.SdpaBackwardAttributes()).unpack_from_descriptor(op, {})
    assert err.value.code == ErrorCode.INVALID_VALUE
    assert "OPERATION_SDPA_BWD_DESCRIPTOR_EXT" in err.value.message


def test_packing_needs_uids() -> None:
    g = CASES["bwd"]()
    g.validate()
    with pytest.raises(hg.HipdnnError) as err:
        g.nodes[0].create_operation({}, [])  # type: ignore[attr-defined]
    assert err.value.code == ErrorCode.INVALID_VALUE
    assert err.value.message == ("Tensor Q has no uid; call build_operation_graph() to assign uids")

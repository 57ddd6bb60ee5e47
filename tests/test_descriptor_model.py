"""BackendDescriptor rules and the hipDNN ids of the descriptor enums."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from hipdnn_graph.descriptors import BackendDescriptor, DescriptorError
from hipdnn_graph.descriptors.enums import AttributeName as A
from hipdnn_graph.descriptors.enums import AttributeType as T
from hipdnn_graph.descriptors.enums import DescriptorType as D
from hipdnn_graph.descriptors.enums import Status
from hipdnn_graph.errors import HipdnnError
from hipdnn_graph.types import DataType, DiagonalAlignment, ErrorCode

# ------------------------------------------------------------------------------------------------
# ids (HIPDNN_SPEC.md §7 and hipDNN's backend headers)
# ------------------------------------------------------------------------------------------------


def test_descriptor_type_ids() -> None:
    assert D.OPERATIONGRAPH == 10
    assert D.TENSOR == 14
    assert D.OPERATION_SDPA_FWD == 24
    assert D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT == 30


def test_tensor_and_graph_attribute_ids() -> None:
    assert [int(a) for a in (A.TENSOR_UNIQUE_ID, A.TENSOR_NAME_EXT, A.TENSOR_DATA_TYPE)] == [
        1300,
        1301,
        1302,
    ]
    assert A.TENSOR_DIMENSIONS == 1303 and A.TENSOR_STRIDES == 1304
    assert A.TENSOR_IS_VIRTUAL == 1305 and A.TENSOR_VALUE_EXT == 1306
    assert A.TENSOR_BYTE_ALIGNMENT == 1309
    assert A.OPERATIONGRAPH_OPS == 601
    assert A.OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT == 604
    assert A.OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT == 605
    assert A.OPERATIONGRAPH_IO_DATA_TYPE_EXT == 606
    assert A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT == 607
    assert A.OPERATIONGRAPH_NAME_EXT == 608
    assert A.OPERATION_NAME_EXT == 60300


def test_sdpa_bwd_attribute_ids_are_3100_to_3128_in_spec_order() -> None:
    spec_order = [
        *("Q", "K", "V", "O", "DO", "STATS", "DQ", "DK", "DV", "SCALE", "ATTN_MASK"),
        *("SEQ_LEN_Q", "SEQ_LEN_KV", "SEED", "OFFSET", "DROPOUT_MASK", "DROPOUT_SCALE"),
        *("DROPOUT_SCALE_INV", "DBIAS"),
    ]
    for i, slot in enumerate(spec_order):
        assert A[f"OPERATION_SDPA_BWD_{slot}_EXT"] == 3100 + i
    plain = [
        *("ALIBI_MASK", "PADDING_MASK", "CAUSAL_MASK", "CAUSAL_MASK_BOTTOM_RIGHT"),
        *("DROPOUT_PROBABILITY", "ATTN_SCALE_VALUE", "LEFT_BOUND", "RIGHT_BOUND"),
        *("DIAGONAL_ALIGNMENT", "COMP_TYPE"),
    ]
    for i, slot in enumerate(plain):
        assert A[f"SDPA_BWD_{slot}_EXT"] == 3119 + i


def test_sdpa_fwd_attribute_ids() -> None:
    assert A.OPERATION_SDPA_FWD_QDESC == 2600
    assert A.OPERATION_SDPA_FWD_ODESC == 2603
    assert A.OPERATION_SDPA_FWD_ATTN_MASK_EXT == 2604
    assert A.OPERATION_SDPA_FWD_SCALEDESC == 2605
    assert A.OPERATION_SDPA_FWD_STATSDESC == 2622
    assert A.SDPA_FWD_GENERATE_STATS_EXT == 2628
    assert A.SDPA_FWD_DIAGONAL_ALIGNMENT_EXT == 2638
    assert A.SDPA_FWD_COMP_TYPE_EXT == 2641
    assert all(
        2600 <= a <= 2641 for a in A if a.name.startswith(("SDPA_FWD", "OPERATION_SDPA_FWD"))
    )


def test_attribute_type_and_status_values() -> None:
    assert (T.HANDLE, T.DATA_TYPE, T.BOOLEAN, T.INT64, T.FLOAT, T.DOUBLE) == (0, 1, 2, 3, 4, 5)
    assert T.BACKEND_DESCRIPTOR == 13 and T.INT32 == 18 and T.CHAR == 19
    assert T.DIAGONAL_ALIGNMENT == 26
    assert Status.NOT_INITIALIZED == 1 and Status.BAD_PARAM == 2 and Status.NOT_SUPPORTED == 8


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def tensor(uid: int, *, finalize: bool = True) -> BackendDescriptor:
    t = BackendDescriptor(D.TENSOR)
    t.set_attribute(A.TENSOR_UNIQUE_ID, T.INT64, [uid])
    t.set_attribute(A.TENSOR_DATA_TYPE, T.DATA_TYPE, [DataType.BFLOAT16])
    t.set_attribute(A.TENSOR_DIMENSIONS, T.INT64, [1, 2, 8, 16])
    t.set_attribute(A.TENSOR_STRIDES, T.INT64, [256, 128, 16, 1])
    if finalize:
        t.finalize()
    return t


BWD_REQUIRED = (
    (A.OPERATION_SDPA_BWD_Q_EXT, "Q"),
    (A.OPERATION_SDPA_BWD_K_EXT, "K"),
    (A.OPERATION_SDPA_BWD_V_EXT, "V"),
    (A.OPERATION_SDPA_BWD_O_EXT, "O"),
    (A.OPERATION_SDPA_BWD_DO_EXT, "dO"),
    (A.OPERATION_SDPA_BWD_STATS_EXT, "Stats"),
    (A.OPERATION_SDPA_BWD_DQ_EXT, "dQ"),
    (A.OPERATION_SDPA_BWD_DK_EXT, "dK"),
    (A.OPERATION_SDPA_BWD_DV_EXT, "dV"),
)
FWD_REQUIRED = (
    (A.OPERATION_SDPA_FWD_QDESC, "Q"),
    (A.OPERATION_SDPA_FWD_KDESC, "K"),
    (A.OPERATION_SDPA_FWD_VDESC, "V"),
    (A.OPERATION_SDPA_FWD_ODESC, "O"),
)


def sdpa(kind: D, skip: A | None = None, compute: DataType | None = DataType.FLOAT) -> Any:
    required, comp = (
        (BWD_REQUIRED, A.SDPA_BWD_COMP_TYPE_EXT)
        if kind == D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT
        else (FWD_REQUIRED, A.SDPA_FWD_COMP_TYPE_EXT)
    )
    op = BackendDescriptor(kind)
    for uid, (name, _) in enumerate(required):
        if name != skip:
            op.set_attribute(name, T.BACKEND_DESCRIPTOR, [tensor(uid)])
    if compute is not None:
        op.set_attribute(comp, T.DATA_TYPE, [compute])
    return op


def fails(fn: Any, status: Status, message: str) -> None:
    with pytest.raises(DescriptorError) as info:
        fn()
    assert info.value.status == status
    assert info.value.code == ErrorCode.HIPDNN_BACKEND_ERROR
    assert str(info.value) == message


# ------------------------------------------------------------------------------------------------
# lifecycle rules
# ------------------------------------------------------------------------------------------------


def test_set_after_finalize_fails_with_hipdnn_status_and_text() -> None:
    t = tensor(1)
    fails(
        lambda: t.set_attribute(A.TENSOR_IS_VIRTUAL, T.BOOLEAN, [True]),
        Status.NOT_INITIALIZED,
        "TensorDescriptor::setAttribute() failed: Already finalized.",
    )
    assert isinstance(DescriptorError(Status.BAD_PARAM, "x"), HipdnnError)


def test_get_before_finalize_fails() -> None:
    op = sdpa(D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT)
    fails(
        lambda: op.get_attribute(A.OPERATION_SDPA_BWD_Q_EXT, T.BACKEND_DESCRIPTOR),
        Status.NOT_INITIALIZED,
        "SdpaBwdOperationDescriptor::getAttribute() failed: Not finalized.",
    )


def test_type_mismatch_on_set_and_get() -> None:
    t = tensor(1, finalize=False)
    fails(
        lambda: t.set_attribute(A.TENSOR_UNIQUE_ID, T.INT32, [1]),
        Status.BAD_PARAM,
        "TensorDescriptor::setAttribute(): attributeType mismatch",
    )
    t.finalize()
    fails(
        lambda: t.get_attribute(A.TENSOR_DIMENSIONS, T.DOUBLE),
        Status.BAD_PARAM,
        "TensorDescriptor::getAttribute(): attributeType mismatch",
    )


def test_unknown_attribute_is_not_supported() -> None:
    t = tensor(1, finalize=False)
    fails(
        lambda: t.set_attribute(A.OPERATION_SDPA_BWD_Q_EXT, T.BACKEND_DESCRIPTOR, [tensor(2)]),
        Status.NOT_SUPPORTED,
        "TensorDescriptor::setAttribute: attributeName not supported",
    )


@pytest.mark.parametrize(
    ("name", "attr_type", "values", "message"),
    [
        (A.TENSOR_UNIQUE_ID, T.INT64, [1, 2], "elementCount is not 1"),
        (A.TENSOR_DIMENSIONS, T.INT64, [], "elementCount must be positive"),
        (A.TENSOR_UNIQUE_ID, T.INT64, [True], "invalid value"),
        (A.TENSOR_UNIQUE_ID, T.INT64, [2**63], "invalid value"),
        (A.TENSOR_IS_VIRTUAL, T.BOOLEAN, [1], "invalid value"),
        (A.TENSOR_DATA_TYPE, T.DATA_TYPE, [99], "invalid value"),
        (A.TENSOR_NAME_EXT, T.CHAR, [3], "invalid value"),
    ],
)
def test_bad_values(name: A, attr_type: T, values: list[Any], message: str) -> None:
    t = BackendDescriptor(D.TENSOR)
    fails(
        lambda: t.set_attribute(name, attr_type, values),
        Status.BAD_PARAM,
        f"TensorDescriptor::setAttribute(): {message}",
    )


def test_referenced_descriptors_must_be_finalized_tensors() -> None:
    op = BackendDescriptor(D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT)
    fails(
        lambda: op.set_attribute(
            A.OPERATION_SDPA_BWD_Q_EXT, T.BACKEND_DESCRIPTOR, [tensor(1, finalize=False)]
        ),
        Status.BAD_PARAM_NOT_FINALIZED,
        "SdpaBwdOperationDescriptor::setAttribute(): descriptor not finalized",
    )
    other = sdpa(D.OPERATION_SDPA_FWD)
    other.finalize()
    fails(
        lambda: op.set_attribute(A.OPERATION_SDPA_BWD_Q_EXT, T.BACKEND_DESCRIPTOR, [other]),
        Status.BAD_PARAM,
        "SdpaBwdOperationDescriptor::setAttribute(): descriptor type mismatch",
    )
    fails(
        lambda: op.set_attribute(A.OPERATION_SDPA_BWD_Q_EXT, T.BACKEND_DESCRIPTOR, [None]),
        Status.BAD_PARAM_NULL_POINTER,
        "SdpaBwdOperationDescriptor::setAttribute(): descriptor is null",
    )


def test_unsupported_descriptor_type() -> None:
    with pytest.raises(DescriptorError) as info:
        BackendDescriptor(D.ENGINE)
    assert info.value.status == Status.NOT_SUPPORTED


def test_finalize_twice_is_allowed() -> None:
    t = tensor(3)
    t.finalize()
    assert t.is_finalized


# ------------------------------------------------------------------------------------------------
# finalize rules, in hipDNN's order
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("missing", "label"), BWD_REQUIRED)
def test_sdpa_bwd_finalize_names_the_missing_tensor(missing: A, label: str) -> None:
    op = sdpa(D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT, skip=missing)
    fails(
        op.finalize,
        Status.BAD_PARAM,
        f"SdpaBwdOperationDescriptor::finalize() failed: {label} tensor not set",
    )


@pytest.mark.parametrize(("missing", "label"), FWD_REQUIRED)
def test_sdpa_fwd_finalize_names_the_missing_tensor(missing: A, label: str) -> None:
    op = sdpa(D.OPERATION_SDPA_FWD, skip=missing)
    fails(
        op.finalize,
        Status.BAD_PARAM,
        f"SdpaFwdOperationDescriptor::finalize() failed: {label} tensor not set",
    )


@pytest.mark.parametrize("compute", [None, DataType.NOT_SET])
@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        (D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT, "SdpaBwdOperationDescriptor"),
        (D.OPERATION_SDPA_FWD, "SdpaFwdOperationDescriptor"),
    ],
)
def test_sdpa_finalize_needs_a_compute_type(kind: D, cls: str, compute: DataType | None) -> None:
    op = sdpa(kind, compute=compute)
    fails(op.finalize, Status.BAD_PARAM, f"{cls}::finalize() failed: compute data type not set")


def test_first_missing_slot_wins() -> None:
    op = BackendDescriptor(D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT)
    op.set_attribute(A.OPERATION_SDPA_BWD_Q_EXT, T.BACKEND_DESCRIPTOR, [tensor(0)])
    fails(
        op.finalize,
        Status.BAD_PARAM,
        "SdpaBwdOperationDescriptor::finalize() failed: K tensor not set",
    )


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        (A.TENSOR_DIMENSIONS, "dimensions not set"),
        (A.TENSOR_STRIDES, "strides not set"),
        (A.TENSOR_DATA_TYPE, "data type not set"),
        (A.TENSOR_UNIQUE_ID, "unique id not set"),
    ],
)
def test_tensor_finalize_rules(drop: A, message: str) -> None:
    full = {
        A.TENSOR_UNIQUE_ID: (T.INT64, [1]),
        A.TENSOR_DATA_TYPE: (T.DATA_TYPE, [DataType.HALF]),
        A.TENSOR_DIMENSIONS: (T.INT64, [4, 4]),
        A.TENSOR_STRIDES: (T.INT64, [4, 1]),
    }
    t = BackendDescriptor(D.TENSOR)
    for name, (attr_type, values) in full.items():
        if name != drop:
            t.set_attribute(name, attr_type, values)
    fails(t.finalize, Status.BAD_PARAM, f"TensorDescriptor::finalize() failed: {message}")


def test_tensor_dims_and_strides_must_match() -> None:
    t = tensor(1, finalize=False)
    t.set_attribute(A.TENSOR_STRIDES, T.INT64, [1])
    fails(
        t.finalize,
        Status.BAD_PARAM,
        "TensorDescriptor::finalize() failed: dims and strides size mismatch",
    )


def test_operation_graph_needs_ops() -> None:
    g = BackendDescriptor(D.OPERATIONGRAPH)
    fails(g.finalize, Status.BAD_PARAM, "GraphDescriptor::finalize: graph is null")


# ------------------------------------------------------------------------------------------------
# values
# ------------------------------------------------------------------------------------------------


def test_round_trip_of_every_kind_of_value() -> None:
    q = tensor(1)
    op = sdpa(D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT)
    op.set_attribute(A.OPERATION_SDPA_BWD_Q_EXT, T.BACKEND_DESCRIPTOR, [q])  # replaces
    op.set_attribute(A.SDPA_BWD_CAUSAL_MASK_EXT, T.BOOLEAN, [True])
    op.set_attribute(A.SDPA_BWD_DROPOUT_PROBABILITY_EXT, T.FLOAT, [0.25])
    op.set_attribute(A.SDPA_BWD_LEFT_BOUND_EXT, T.INT64, [7])
    op.set_attribute(A.SDPA_BWD_DIAGONAL_ALIGNMENT_EXT, T.DIAGONAL_ALIGNMENT, [1])
    op.set_attribute(A.OPERATION_NAME_EXT, T.CHAR, ["bwd"])
    assert op.has_attribute(A.SDPA_BWD_CAUSAL_MASK_EXT)
    assert not op.has_attribute(A.SDPA_BWD_ALIBI_MASK_EXT)
    op.finalize()
    got = op.get_attribute(A.OPERATION_SDPA_BWD_Q_EXT, T.BACKEND_DESCRIPTOR)
    assert got == [q] and got[0] is q  # shared by reference
    assert op.get_attribute(A.SDPA_BWD_CAUSAL_MASK_EXT, T.BOOLEAN) == [True]
    assert op.get_attribute(A.SDPA_BWD_DROPOUT_PROBABILITY_EXT, T.FLOAT) == [0.25]
    assert op.get_attribute(A.SDPA_BWD_LEFT_BOUND_EXT, T.INT64) == [7]
    alignment = op.get_attribute(A.SDPA_BWD_DIAGONAL_ALIGNMENT_EXT, T.DIAGONAL_ALIGNMENT)
    assert alignment == [DiagonalAlignment.BOTTOM_RIGHT]
    assert type(alignment[0]) is DiagonalAlignment
    assert op.get_attribute(A.OPERATION_NAME_EXT, T.CHAR) == ["bwd"]
    comp = op.get_attribute(A.SDPA_BWD_COMP_TYPE_EXT, T.DATA_TYPE)
    assert comp == [DataType.FLOAT] and type(comp[0]) is DataType


def test_defaults_and_unset_optionals() -> None:
    op = sdpa(D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT)
    op.finalize()
    assert op.get_attribute(A.SDPA_BWD_ALIBI_MASK_EXT, T.BOOLEAN) == [False]
    assert op.get_attribute(A.SDPA_BWD_DIAGONAL_ALIGNMENT_EXT, T.DIAGONAL_ALIGNMENT) == [
        DiagonalAlignment.TOP_LEFT
    ]
    assert op.get_attribute(A.OPERATION_SDPA_BWD_DBIAS_EXT, T.BACKEND_DESCRIPTOR) == []
    assert op.get_attribute(A.SDPA_BWD_ATTN_SCALE_VALUE_EXT, T.FLOAT) == []
    t = tensor(1)
    assert t.get_attribute(A.TENSOR_BYTE_ALIGNMENT, T.INT64) == [16]
    assert t.get_attribute(A.TENSOR_IS_VIRTUAL, T.BOOLEAN) == [False]


def test_get_returns_a_copy() -> None:
    t = tensor(1)
    dims = t.get_attribute(A.TENSOR_DIMENSIONS, T.INT64)
    dims.append(99)
    assert t.get_attribute(A.TENSOR_DIMENSIONS, T.INT64) == [1, 2, 8, 16]


def test_operation_graph_holds_its_ops() -> None:
    ops = [sdpa(D.OPERATION_SDPA_FWD), sdpa(D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT)]
    for op in ops:
        op.finalize()
    g = BackendDescriptor(D.OPERATIONGRAPH)
    g.set_attribute(A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR, ops)
    g.set_attribute(A.OPERATIONGRAPH_IO_DATA_TYPE_EXT, T.DATA_TYPE, [DataType.HALF])
    g.set_attribute(A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.INT64, [5])
    g.finalize()
    got = g.get_attribute(A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR)
    assert [a is b for a, b in zip(got, ops, strict=True)] == [True, True]
    assert g.get_attribute(A.OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, T.DATA_TYPE) == [
        DataType.NOT_SET
    ]
    assert g.get_attribute(A.OPERATIONGRAPH_NAME_EXT, T.CHAR) == []
    assert "OPERATIONGRAPH" in repr(g)


def test_descriptor_error_pickles() -> None:
    err = DescriptorError(Status.BAD_PARAM, "x")
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), back.status, back.code, back.message) == (
        DescriptorError,
        Status.BAD_PARAM,
        ErrorCode.HIPDNN_BACKEND_ERROR,
        "x",
    )

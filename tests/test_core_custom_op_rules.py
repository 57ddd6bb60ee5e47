"""CustomOpNode: hipDNN's rules and messages (ports of hipDNN's TestCustomOpNode.cpp, plus the
exact messages and codes of CustomOpNode.hpp) and the builder (Graph.custom_op)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import hipdnn_graph as hg

F = hg.DataType.FLOAT


def _t(name: str, uid: int, dims: list[int], data_type: hg.DataType = F) -> hg.TensorAttributes:
    """hipDNN's makeTensor."""
    return hg.TensorAttributes(name=name, uid=uid, dim=dims, stride=hg.generate_strides(dims),
                               data_type=data_type)  # fmt: skip


def _graph_attributes() -> hg.GraphAttributes:
    return hg.GraphAttributes(compute_data_type=F)


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_node_name_type_and_tensors() -> None:
    a, b, out = _t("input_a", 1, [2, 3]), _t("input_b", 2, [2, 3]), _t("output", 3, [2, 3])
    attrs = hg.CustomOpAttributes().set_name("test_op").set_inputs([a, b]).set_outputs([out])
    node = hg.CustomOpNode(attrs, _graph_attributes())
    assert (node.name, node.get_node_type()) == ("test_op", hg.NodeType.CUSTOM_OP)
    assert node.inputs() == [a, b] and node.outputs() == [out]
    assert list(attrs.tensors_by_slot()) == ["IN_0", "IN_1", "OUT_0"]


@pytest.mark.parametrize(("n_in", "n_out"), [(1, 1), (3, 2), (0, 1)])
def test_pre_validation_succeeds(n_in: int, n_out: int) -> None:
    """hipDNN's PreValidateSucceeds, ...WithMultipleInputsAndOutputs, ...WithNoInputs."""
    inputs = [_t(f"in{i}", i + 1, [2, 3]) for i in range(n_in)]
    outputs = [_t(f"out{i}", 10 + i, [2, 3]) for i in range(n_out)]
    attrs = hg.CustomOpAttributes().set_custom_op_id("example.multi_io")
    node = hg.CustomOpNode(attrs.set_inputs(inputs).set_outputs(outputs), _graph_attributes())
    node.pre_validate_node()


@pytest.mark.parametrize(("setter", "kind"), [("set_inputs", "input"), ("set_outputs", "output")])
def test_a_null_tensor_is_refused(setter: str, kind: str) -> None:
    """hipDNN's PreValidateFailsWithNullInput/Output: INVALID_VALUE with its message, raised
    here when the list is set (a list holding None is never stored)."""
    attrs = hg.CustomOpAttributes().set_name("test_op")
    err = _error(lambda: getattr(attrs, setter)([_t("x", 1, [2]), None]))
    assert (err.code, err.message) == (
        hg.ErrorCode.INVALID_VALUE,
        f"Node test_op has null {kind} tensor at index 1",
    )
    assert attrs.get_inputs() == [] and attrs.get_outputs() == []


def test_post_validation_order() -> None:
    """hipDNN's PostValidateSucceeds, ...FailsWithoutCustomOpId, ...FailsWithoutComputeDataType:
    the id first, then the compute type, then the outputs."""
    x, y = _t("input", 1, [2, 3]), _t("output", 2, [2, 3])
    attrs = hg.CustomOpAttributes().set_name("test_op").set_inputs([x]).set_outputs([y])
    node = hg.CustomOpNode(attrs, hg.GraphAttributes())
    err = _error(node.post_validate_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        "Node test_op does not have a custom_op_id set",
    )
    attrs.set_custom_op_id("example.my_add")
    err = _error(node.post_validate_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        "Node test_op does not have a compute_data_type set",
    )
    attrs.set_compute_data_type(F)
    node.post_validate_node()
    y.dim, y.stride = [], []
    assert _error(node.post_validate_node).message == "Tensor output dims must be non-empty"


def test_inference_propagates_the_context() -> None:
    """hipDNN's InferPropertiesPropagatesContext: only data types are filled."""
    x = hg.TensorAttributes(uid=1, dim=[2, 3], stride=[3, 1])
    y = hg.TensorAttributes(uid=2, dim=[2, 3], stride=[3, 1])
    attrs = hg.CustomOpAttributes().set_name("test_op").set_inputs([x]).set_outputs([y])
    context = hg.GraphAttributes(compute_data_type=F, io_data_type=hg.DataType.HALF)
    hg.CustomOpNode(attrs, context).infer_properties_node()
    assert (x.get_data_type(), y.get_data_type()) == (hg.DataType.HALF, hg.DataType.HALF)
    assert attrs.get_compute_data_type() == F


@pytest.mark.parametrize(
    ("value", "expected"), [([0xCA, 0xFE], [202, 254]), (b"\x00\x01", [0, 1]), ([], [])]
)
def test_payload(value: Any, expected: list[int]) -> None:
    assert hg.CustomOpAttributes().set_data(value).get_data() == expected


@pytest.mark.parametrize("value", [[256], [-1], [True], "ab", 3, [1.0]])
def test_payload_must_be_bytes(value: Any) -> None:
    err = _error(lambda: hg.CustomOpAttributes().set_data(value))
    assert err.code == hg.ErrorCode.INVALID_VALUE


def test_lists_must_hold_tensors_and_ids_be_text() -> None:
    attrs = hg.CustomOpAttributes()
    assert "takes a list" in _error(lambda: attrs.set_inputs(_t("x", 1, [2]))).message  # type: ignore[arg-type]
    assert "must be a TensorAttributes" in _error(lambda: attrs.set_outputs(["y"])).message  # type: ignore[list-item]
    assert _error(lambda: attrs.set_custom_op_id(3)).code == hg.ErrorCode.INVALID_VALUE  # type: ignore[arg-type]


def _g() -> hg.Graph:
    return hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)


def test_builder_names_and_creates_outputs() -> None:
    g = _g()
    x, named = g.tensor(dim=[4, 8]), g.tensor(name="kept", dim=[4, 8])
    outputs = g.custom_op([x, named], 2, hg.CustomOpAttributes().set_custom_op_id("ex.split"))
    assert [t.get_name() for t in outputs] == ["CustomOp_0::OUT_0", "CustomOp_0::OUT_1"]
    assert (x.get_name(), named.get_name()) == ("CustomOp_0::IN_0", "kept")
    assert all(t.get_is_virtual() and not t.get_dim() for t in outputs)
    err = _error(g.validate)  # nothing infers the outputs' dims
    assert err.message == "Tensor CustomOp_0::OUT_0 dims must be non-empty"
    for t in outputs:
        t.set_dim([4, 4]).set_stride([4, 1])
    g.validate()
    assert g.custom_op([], 0, custom_op_id="ex.nothing", name="empty") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("x", 1), "custom_op() takes a list of input tensors, an output count, then "
                   "CustomOpAttributes"),
        (([], -1), "custom_op() takes a non-negative output count, got -1"),
        (([], True), "custom_op() takes a non-negative output count, got True"),
        (([], 1, hg.MatmulAttributes()),
         "custom_op() expects CustomOpAttributes attributes, got MatmulAttributes"),
    ],
)  # fmt: skip
def test_builder_refusals(args: tuple[Any, ...], message: str) -> None:
    err = _error(lambda: _g().custom_op(*args))
    assert (err.code, err.message) == (hg.ErrorCode.INVALID_VALUE, message)

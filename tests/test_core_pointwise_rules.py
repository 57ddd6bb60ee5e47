"""PointwiseNode: hipDNN's rules, messages and inference (ports of hipDNN's TestPointwiseNode.cpp,
plus the exact messages and codes of PointwiseNode.hpp)."""

from __future__ import annotations

from enum import IntEnum

import pytest

import hipdnn_graph as hg
from hipdnn_graph.nodes.pointwise import (
    BINARY_MODES,
    TERNARY_MODES,
    UNARY_MODES,
    broadcast_compatible,
    common_shape,
)

M = hg.PointwiseMode


def _t(
    name: str = "", dim: list[int] | None = None, stride: list[int] | None = None
) -> hg.TensorAttributes:
    t = hg.TensorAttributes()
    if name:
        t.set_name(name).set_data_type(hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim)
    if stride is not None:
        t.set_stride(stride)
    return t


def _node(
    mode: M, inputs: list[hg.TensorAttributes], out: hg.TensorAttributes | None
) -> hg.PointwiseNode:
    a = hg.PointwiseAttributes().set_mode(mode)
    for i, tensor in enumerate(inputs):
        a._set_input(a.InputNames(i), tensor)
    if out is not None:
        a.set_output_0(out)
    return hg.PointwiseNode(a, hg.GraphAttributes())


def _error(call: object) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()  # type: ignore[operator]
    return info.value


def test_mode_sets_partition_the_modes() -> None:
    """Every mode but NOT_SET is exactly one of unary, binary, ternary (23 + 23 + 1 = 47)."""
    assert len(UNARY_MODES) == 23 and len(BINARY_MODES) == 23 and len(TERNARY_MODES) == 1
    assert set(M) - {M.NOT_SET} == UNARY_MODES | BINARY_MODES | TERNARY_MODES
    assert not (UNARY_MODES & BINARY_MODES)


def test_mode_values_are_hipdnns() -> None:
    assert (M.NOT_SET, M.ABS, M.BINARY_SELECT, M.MAX, M.MIN, M.RELU_FWD, M.TANH_FWD) == (
        0, 1, 4, 28, 29, 34, 47,
    )  # fmt: skip
    assert len(M) == 48


@pytest.mark.parametrize("mode", sorted(UNARY_MODES))
def test_unary_modes(mode: M) -> None:
    out = _t(dim=[2, 3, 4])
    _node(mode, [_t("x", [2, 3, 4], [12, 4, 1])], out).pre_validate_node()
    for n, message in (
        (2, "two inputs must have a binary"),
        (3, "three inputs must have a ternary"),
    ):
        err = _error(_node(mode, [_t() for _ in range(n)], _t()).pre_validate_node)
        assert err.code == hg.ErrorCode.INVALID_VALUE and message in err.message


@pytest.mark.parametrize("mode", sorted(BINARY_MODES))
def test_binary_modes(mode: M) -> None:
    ins = [_t(f"x{i}", [2, 3, 4], [12, 4, 1]) for i in range(2)]
    _node(mode, ins, _t(dim=[2, 3, 4])).pre_validate_node()
    err = _error(_node(mode, [_t()], _t()).pre_validate_node)
    assert err.message == "PointwiseNode with one input must have a unary operation"
    err = _error(_node(mode, [_t(), _t(), _t()], _t()).pre_validate_node)
    assert err.message == "PointwiseNode with three inputs must have a ternary operation"


def test_ternary_mode() -> None:
    ins = [_t(f"x{i}", [2, 3, 4], [12, 4, 1]) for i in range(3)]
    _node(M.BINARY_SELECT, ins, _t(dim=[2, 3, 4])).pre_validate_node()
    for n in (1, 2):
        err = _error(_node(M.BINARY_SELECT, [_t() for _ in range(n)], _t()).pre_validate_node)
        assert err.code == hg.ErrorCode.INVALID_VALUE


def test_checks_in_hipdnns_order() -> None:
    """Output first, then the mode, then the inputs' count."""
    err = _error(_node(M.NOT_SET, [], None).pre_validate_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        "PointwiseNode missing OUT_0 for pre-validation",
    )
    err = _error(_node(M.NOT_SET, [], _t()).pre_validate_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        "PointwiseNode missing operation for pre-validation",
    )
    err = _error(_node(M.RELU_FWD, [], _t()).pre_validate_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.INVALID_VALUE,
        "PointwiseNode must have at least one input",
    )


def test_more_than_three_inputs_and_two_outputs() -> None:
    extra = IntEnum("Extra", [("IN_3", 3), ("OUT_2", 2)])
    node = _node(M.BINARY_SELECT, [_t(), _t(), _t()], _t())
    node.attributes.inputs[extra.IN_3] = _t()
    err = _error(node.pre_validate_node)
    assert err.message == "PointwiseNode can only have one, two, or three inputs"
    node = _node(M.RELU_FWD, [_t()], _t())
    node.attributes.outputs[extra.OUT_2] = _t()
    err = _error(node.pre_validate_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.INVALID_VALUE,
        "PointwiseNode must have exactly one output",
    )


@pytest.mark.parametrize(
    ("dims", "out"),
    [
        ([[1, 3, 1, 4], [2, 1, 5, 1]], [2, 3, 5, 4]),
        ([[1, 3, 1], [2, 1, 4]], [2, 3, 4]),
        ([[1], [2, 3, 4]], [2, 3, 4]),
        ([[3, 4], [4]], [2, 3, 4]),
    ],
)
def test_broadcastable_inputs_pass(dims: list[list[int]], out: list[int]) -> None:
    ins = [_t(f"x{i}", d, hg.generate_strides(d)) for i, d in enumerate(dims)]
    _node(M.ADD, ins, _t("y", out, hg.generate_strides(out))).pre_validate_node()


def test_non_broadcastable_input_names_the_input() -> None:
    ins = [_t("InputTensor0", [2, 3, 4], [12, 4, 1]), _t("InputTensor1", [2, 5, 4], [20, 4, 1])]
    err = _error(_node(M.ADD, ins, _t("y", [2, 5, 4], [20, 4, 1])).pre_validate_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.INVALID_VALUE,
        "PointwiseNode input 'InputTensor0' has dimensions incompatible with output. "
        "All inputs must be broadcastable to output dimensions.",
    )


def test_infer_dims_and_strides_from_single_input() -> None:
    out = _t("y")
    node = _node(M.RELU_FWD, [_t("x", [2, 3, 4], [12, 4, 1])], out)
    node.infer_properties_node()
    assert (out.get_dim(), out.get_stride()) == ([2, 3, 4], [12, 4, 1])


def test_infer_common_shape_and_first_matching_stride() -> None:
    out = _t("y")
    ins = [_t("a", [2, 3, 4], [3, 1, 1]), _t("b", [2, 1, 4], [4, 4, 1])]
    _node(M.ADD, ins, out).infer_properties_node()
    assert (out.get_dim(), out.get_stride()) == ([2, 3, 4], [3, 1, 1])


def test_stride_inference_fails_without_a_same_shaped_input() -> None:
    out = _t("y", [5, 6, 7])
    err = _error(_node(M.RELU_FWD, [_t("x", [2, 3, 4], [12, 4, 1])], out).infer_properties_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        "PointwiseNode output missing stride",
    )
    # a broadcast output has no input of its shape either
    out = _t("y")
    ins = [_t("a", [1, 3, 1], [3, 1, 1]), _t("b", [2, 1, 4], [4, 4, 1])]
    err = _error(_node(M.ADD, ins, out).infer_properties_node)
    assert err.message == "PointwiseNode output missing stride" and out.get_dim() == [2, 3, 4]


def test_common_shape_counts_dims_from_the_left() -> None:
    """hipDNN's findCommonShape aligns dims at index 0 (unlike the broadcast test)."""
    assert common_shape([[1, 2], [1, 2, 5]]) == [1, 2, 5]
    err = _error(lambda: common_shape([[2, 3, 4], [4]]))
    assert (err.code, err.message) == (hg.ErrorCode.INVALID_VALUE, "Incompatible shapes")
    assert broadcast_compatible([4], [2, 3, 4]) and not broadcast_compatible([2, 3, 4], [4])


def test_graph_builder_names_and_validates() -> None:
    g = hg.Graph(io_data_type=hg.DataType.HALF, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    a, b, c = (hg.TensorAttributes().set_dim([2, 4]).set_stride([4, 1]) for _ in range(3))
    s = g.pointwise(a, b, c, hg.PointwiseAttributes().set_mode(M.BINARY_SELECT))
    y = g.pointwise(s, mode=M.TANH_FWD, name="act")
    y.set_output(True)
    g.validate()
    assert [t.get_name() for t in (a, b, c)] == [f"Pointwise_0::IN_{i}" for i in range(3)]
    assert (s.get_name(), y.get_name(), y.get_dim()) == ("Pointwise_0::OUT_0", "act::OUT_0", [2, 4])
    assert s.get_data_type() == hg.DataType.FLOAT and y.get_data_type() == hg.DataType.HALF
    assert [n.get_node_type() for n in g.nodes] == [hg.NodeType.POINTWISE] * 2


def test_graph_builder_leaves_the_callers_attributes_alone() -> None:
    g = hg.Graph()
    attrs = hg.PointwiseAttributes().set_mode(M.EXP)
    g.pointwise(g.tensor(name="x", dim=[3]), attrs)
    assert attrs.get_name() == "" and attrs.get_output_0() is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda g, x: g.pointwise(), "one, two or three input tensors"),
        (lambda g, x: g.pointwise("x"), "one, two or three input tensors"),
        (lambda g, x: g.pointwise(x, x, x, x), "one, two or three input tensors"),
        (lambda g, x: g.pointwise(x, bogus=1), "unknown keyword 'bogus'"),
        (lambda g, x: g.pointwise(x, mode=99), "Unknown pointwise mode 99"),
        (lambda g, x: g.pointwise(x, hg.SdpaAttributes()), "expects PointwiseAttributes"),
        (lambda g, x: g.pointwise(x, relu_lower_clip="0.5"), "relu_lower_clip must be a float"),
    ],
)
def test_graph_builder_refusals(call: object, message: str) -> None:
    g = hg.Graph()
    x = g.tensor(name="x", dim=[3])
    err = _error(lambda: call(g, x))  # type: ignore[operator]
    assert err.code == hg.ErrorCode.INVALID_VALUE and message in err.message
    assert len(g.nodes) == 0


def test_attribute_setters_round_to_float32_and_check_types() -> None:
    a = hg.PointwiseAttributes().set_swish_beta(0.1).set_axis(2).set_mode(34)
    assert a.get_swish_beta() == pytest.approx(0.1) and a.get_swish_beta() != 0.1
    assert (a.get_axis(), a.get_mode()) == (2, M.RELU_FWD)
    for call in (lambda: a.set_axis(1.5), lambda: a.set_mode(True), lambda: a.set_elu_alpha(None)):
        assert _error(call).code == hg.ErrorCode.INVALID_VALUE

"""MoeGroupedMatmulBwdNode: hipDNN's rules, messages and inference (ports of hipDNN's
TestMoeGroupedMatmulBwdNode.cpp and TestGraphMoeGroupedMatmulBwd.cpp, plus the exact messages
and codes of MoeGroupedMatmulBwdNode.hpp, the version that infers DWEIGHT from the offsets)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import hipdnn_graph as hg

F, I32 = hg.DataType.FLOAT, hg.DataType.INT32
SETTERS = ("set_doutput", "set_token", "set_first_token_offset", "set_dweight")


def _t(dim: list[int], data_type: hg.DataType = F) -> hg.TensorAttributes:
    return hg.TensorAttributes(dim=dim, stride=hg.generate_strides(dim), data_type=data_type)


def _valid() -> hg.MoeGroupedMatmulBwdAttributes:
    """hipDNN's createValidAttributes: doutput [1, 8, 32], token [1, 8, 16], offsets [2, 1, 1]
    INT32, dweight [2, 16, 32]."""
    return (
        hg.MoeGroupedMatmulBwdAttributes()
        .set_doutput(_t([1, 8, 32]))
        .set_token(_t([1, 8, 16]))
        .set_first_token_offset(_t([2, 1, 1], I32))
        .set_dweight(_t([2, 16, 32]))
    )


def _node(attrs: hg.MoeGroupedMatmulBwdAttributes) -> hg.MoeGroupedMatmulBwdNode:
    return hg.MoeGroupedMatmulBwdNode(attrs, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def _pre(attrs: hg.MoeGroupedMatmulBwdAttributes) -> tuple[hg.ErrorCode, str]:
    err = _error(_node(attrs).pre_validate_node)
    return err.code, err.message


def _with(slot: str, **fields: Any) -> hg.MoeGroupedMatmulBwdAttributes:
    attrs = _valid()
    tensor = getattr(attrs, f"get_{slot}")()
    for key, value in fields.items():
        setattr(tensor, key, value)
    return attrs


def test_node_type_and_valid_attributes() -> None:
    assert _node(hg.MoeGroupedMatmulBwdAttributes()).get_node_type() == (
        hg.NodeType.MOE_GROUPED_MATMUL_BWD
    )
    node = _node(_valid())
    node.pre_validate_node()
    node.infer_properties_node()


@pytest.mark.parametrize(
    ("setter", "pre", "infer"),
    [
        ("set_doutput", "doutput (input)", "doutput"),
        ("set_token", "token (input)", "token"),
        ("set_first_token_offset", "first_token_offset (input)", "first_token_offset"),
        ("set_dweight", "dweight (output)", "dweight"),
    ],
)
def test_missing_tensors(setter: str, pre: str, infer: str) -> None:
    attrs = _valid()
    getattr(attrs, setter)(None)
    assert _pre(attrs) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        f"MoeGroupedMatmulBwdNode missing {pre} for pre-validation",
    )
    err = _error(_node(attrs).infer_properties_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        f"MoeGroupedMatmulBwdNode missing {infer} for setting properties",
    )


@pytest.mark.parametrize("slot", ["doutput", "token", "first_token_offset"])
def test_missing_input_dimensions(slot: str) -> None:
    assert _pre(_with(slot, dim=[], stride=[])) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        f"MoeGroupedMatmulBwdNode missing {slot} dimensions for pre-validation",
    )


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        (_with("doutput", dim=[8, 32]),
         "MoE doutput tensor must have at least 3 dimensions, but has 2"),
        (_with("token", dim=[8, 16]),
         "MoE token tensor must have at least 3 dimensions, but has 2"),
        (_with("first_token_offset", dim=[2, 1]),
         "MoE first_token_offset tensor must have at least 3 dimensions, but has 2"),
        (_with("doutput", dim=[1, 1, 8, 32]), "MoE doutput tensor must have rank 3"),
        (_with("token", dim=[1, 1, 8, 16]), "MoE token tensor must have rank 3"),
        (_with("doutput", dim=[2, 8, 32]),
         "MoE doutput tensor must have a singleton leading dimension"),
        (_with("token", dim=[2, 8, 16]),
         "MoE token tensor must have a singleton leading dimension"),
        (_with("token", dim=[1, 7, 16]),
         "MoE doutput token-count dimension must match the token tensor"),
        (_with("first_token_offset", dim=[2, 1, 1, 1]),
         "MoE first-token-offset tensor must have shape [experts, 1, 1]"),
        (_with("first_token_offset", dim=[2, 2, 1]),
         "MoE first-token-offset tensor must have trailing dimensions [1, 1]"),
        (_with("first_token_offset", dim=[2, 1, 2]),
         "MoE first-token-offset tensor must have trailing dimensions [1, 1]"),
        (_with("first_token_offset", dim=[0, 1, 1]),
         "MoE first-token-offset tensor must describe at least one expert"),
        (_with("first_token_offset", data_type=F),
         "MoE first-token-offset tensor must have INT32 data type"),
    ],
)  # fmt: skip
def test_rules_in_order(attrs: hg.MoeGroupedMatmulBwdAttributes, message: str) -> None:
    assert _pre(attrs) == (hg.ErrorCode.INVALID_VALUE, message)


def test_dweight_dims_are_checked_by_inference_not_pre_validation() -> None:
    for dims in ([2, 8, 32], [2, 16, 64], [3, 16, 32], [2, 16]):
        attrs = _with("dweight", dim=dims)
        node = _node(attrs)
        node.pre_validate_node()  # dweight's dims are not checked here
        err = _error(node.infer_properties_node)
        assert (err.code, err.message) == (
            hg.ErrorCode.INVALID_VALUE,
            "MoeGroupedMatmulBwd dweight tensor dimensions do not match the inferred dimensions",
        )


def test_inference_fills_dims_and_column_major_strides() -> None:
    dweight = hg.TensorAttributes()
    attrs = _valid().set_dweight(dweight)
    _node(attrs).infer_properties_node()
    assert (dweight.get_dim(), dweight.get_stride()) == ([2, 16, 32], [512, 1, 16])
    row_major = _valid()  # caller-set strides are kept
    _node(row_major).infer_properties_node()
    assert row_major.get_dweight().get_stride() == [512, 32, 1]  # type: ignore[union-attr]


def _graph() -> hg.Graph:
    return hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)


def test_graph_builds_and_infers_dweight() -> None:
    """hipDNN's TestGraphMoeGroupedMatmulBwd.BuildGraph."""
    g = _graph()
    dout, token = g.tensor(dim=[1, 8, 32]), g.tensor(dim=[1, 8, 16])
    offsets = g.tensor(dim=[2, 1, 1], data_type=I32)
    dweight = g.moe_grouped_matmul_bwd(
        dout, token, offsets, hg.MoeGroupedMatmulBwdAttributes().set_name("MoeGroupedMatmulBwdNode")
    )
    assert dweight.get_name() == "MoeGroupedMatmulBwdNode::DWEIGHT"
    assert dweight.get_is_virtual()
    g.validate()
    assert dweight.get_dim() == [2, 16, 32]


@pytest.mark.parametrize(("index", "fragment"), [(0, "doutput"), (1, "token"),
                                                 (2, "first_token_offset")])  # fmt: skip
def test_graph_with_a_null_input(index: int, fragment: str) -> None:
    """hipDNN's TestGraphMoeGroupedMatmulBwdNullInput: the builder takes the null input and
    validation names it."""
    g = _graph()
    inputs: list[hg.TensorAttributes | None] = [
        g.tensor(dim=[1, 8, 32]),
        g.tensor(dim=[1, 8, 16]),
        g.tensor(dim=[2, 1, 1], data_type=I32),
    ]
    inputs[index] = None
    dweight = g.moe_grouped_matmul_bwd(*inputs, name="MoeGroupedMatmulBwdNullInput")
    assert dweight is not None
    err = _error(g.validate)
    assert err.code == hg.ErrorCode.ATTRIBUTE_NOT_SET
    assert fragment in err.message


def test_builder_refuses_a_non_tensor() -> None:
    err = _error(lambda: _graph().moe_grouped_matmul_bwd("x", None, None))
    assert (err.code, err.message) == (
        hg.ErrorCode.INVALID_VALUE,
        "moe_grouped_matmul_bwd() takes a tensor or None for DOUTPUT, got str",
    )

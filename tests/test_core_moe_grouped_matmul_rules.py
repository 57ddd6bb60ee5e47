"""MoeGroupedMatmulNode: hipDNN's rules, messages and inference (ports of hipDNN's
TestMoeGroupedMatmulNode.cpp, plus the exact messages and codes of MoeGroupedMatmulNode.hpp)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import hipdnn_graph as hg

F, I32 = hg.DataType.FLOAT, hg.DataType.INT32
Mode = hg.MoeGroupedMatmulMode


def _t(dim: list[int], data_type: hg.DataType = F, name: str = "") -> hg.TensorAttributes:
    return hg.TensorAttributes(name=name, dim=dim, stride=hg.generate_strides(dim),
                               data_type=data_type)  # fmt: skip


def _routing(rows: int = 8, data_type: hg.DataType = I32) -> hg.TensorAttributes:
    return _t([1, rows, 1], data_type)


def _valid() -> hg.MoeGroupedMatmulAttributes:
    """hipDNN's createValidAttributes: token [1, 8, 16], weight [2, 16, 32], offsets [2, 1, 1]
    INT32, output [1, 8, 32]."""
    return (
        hg.MoeGroupedMatmulAttributes()
        .set_token(_t([1, 8, 16]))
        .set_weight(_t([2, 16, 32]))
        .set_first_token_offset(_t([2, 1, 1], I32))
        .set_output(_t([1, 8, 32]))
    )


def _node(attrs: hg.MoeGroupedMatmulAttributes) -> hg.MoeGroupedMatmulNode:
    return hg.MoeGroupedMatmulNode(attrs, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def _pre(attrs: hg.MoeGroupedMatmulAttributes) -> tuple[hg.ErrorCode, str]:
    err = _error(_node(attrs).pre_validate_node)
    return err.code, err.message


def test_node_type_and_default_mode() -> None:
    assert _node(hg.MoeGroupedMatmulAttributes()).get_node_type() == (
        hg.NodeType.MOE_GROUPED_MATMUL
    )
    assert hg.MoeGroupedMatmulAttributes().get_mode() == Mode.NONE
    assert hg.MoeGroupedMatmulAttributes().get_top_k() == 0


def test_none_mode_accepts_required_inputs() -> None:
    _node(_valid()).pre_validate_node()


def test_not_set_mode_is_rejected() -> None:
    assert _pre(_valid().set_mode(Mode.NOT_SET)) == (
        hg.ErrorCode.INVALID_VALUE,
        "MoeGroupedMatmulNode has an unknown routing mode",
    )


@pytest.mark.parametrize(
    ("setter", "message"),
    [
        ("set_token", "MoeGroupedMatmulNode missing token input"),
        ("set_weight", "MoeGroupedMatmulNode missing weight input"),
        ("set_first_token_offset", "MoeGroupedMatmulNode missing first_token_offset input"),
        ("set_output", "MoeGroupedMatmulNode missing output"),
    ],
)
def test_required_tensors_must_be_present(setter: str, message: str) -> None:
    attrs = _valid()
    getattr(attrs, setter)(None)
    assert _pre(attrs) == (hg.ErrorCode.ATTRIBUTE_NOT_SET, message)
    assert _error(_node(attrs).infer_properties_node).message == message


def _with(slot: str, **fields: Any) -> hg.MoeGroupedMatmulAttributes:
    attrs = _valid()
    tensor = getattr(attrs, f"get_{slot}")()
    for key, value in fields.items():
        setattr(tensor, key, value)
    return attrs


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        (_with("token", dim=[8, 16]),
         "MoE token tensor must have at least 3 dimensions, but has 2"),
        (_with("token", dim=[8, 16], name="tok"), "tok must have at least 3 dimensions, but has 2"),
        (_with("weight", dim=[16, 32]),
         "MoE weight tensor must have at least 3 dimensions, but has 2"),
        (_with("first_token_offset", dim=[2]),
         "MoE first-token-offset tensor must have at least 3 dimensions, but has 1"),
        (_with("token", dim=[1, 1, 8, 16]), "MoE token tensor must have shape [1, tokens, K]"),
        (_with("weight", dim=[1, 2, 16, 32]), "MoE weight tensor must have shape [experts, K, N]"),
        (_with("first_token_offset", dim=[2, 1, 1, 1]),
         "MoE first-token-offset tensor must have shape [batch * experts, 1, 1]"),
        (_with("token", dim=[2, 8, 16]),
         "MoE token tensor must have a singleton leading dimension"),
        (_with("first_token_offset", dim=[2, 2, 1]),
         "MoE first-token-offset tensor must have trailing dimensions [1, 1]"),
        (_with("first_token_offset", dim=[2, 1, 3]),
         "MoE first-token-offset tensor must have trailing dimensions [1, 1]"),
        (_with("token", dim=[1, 8, 15]), "MoE token K dimension must match the weight K dimension"),
        (_with("weight", dim=[0, 16, 32]), "MoE weight tensor must describe at least one expert"),
        (_with("weight", dim=[-2, 16, 32]), "MoE weight tensor must describe at least one expert"),
        (_with("first_token_offset", dim=[3, 1, 1]),
         "MoE first-token-offset tensor length must be divisible by expert count"),
        (_with("first_token_offset", data_type=F),
         "MoE first-token-offset tensor must have INT32 data type"),
    ],
)  # fmt: skip
def test_shape_and_type_rules_in_order(attrs: hg.MoeGroupedMatmulAttributes, message: str) -> None:
    assert _pre(attrs) == (hg.ErrorCode.INVALID_VALUE, message)


def test_batch_of_experts_offsets_pass() -> None:
    """G = batch * experts: 4 offsets for 2 experts."""
    _node(_with("first_token_offset", dim=[4, 1, 1])).pre_validate_node()


def test_gather_requires_an_int32_token_index() -> None:
    attrs = _valid().set_mode(Mode.GATHER)
    assert _pre(attrs) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        "MoeGroupedMatmulNode missing MoE token-index tensor input",
    )
    assert _pre(_valid().set_mode(Mode.GATHER).set_token_index(_routing(8, F))) == (
        hg.ErrorCode.INVALID_VALUE,
        "MoE token-index tensor must have INT32 data type",
    )
    _node(_valid().set_mode(Mode.GATHER).set_token_index(_routing(6))).pre_validate_node()


@pytest.mark.parametrize(
    ("dim", "message"),
    [
        ([1, 8], "MoE token-index tensor must have at least 3 dimensions, but has 2"),
        ([1, 8, 1, 1], "MoE token-index tensor must have shape [1, routed_tokens, 1]"),
        ([2, 8, 1], "MoE token-index tensor must have a singleton leading dimension"),
        ([1, 8, 2], "MoE token-index tensor must have a singleton trailing dimension"),
    ],
)
def test_routing_tensor_shape(dim: list[int], message: str) -> None:
    attrs = _valid().set_mode(Mode.GATHER).set_token_index(_t(dim, I32))
    assert _pre(attrs) == (hg.ErrorCode.INVALID_VALUE, message)


def _scatter(index: int = 8, ks: int = 8, top_k: int = 2) -> hg.MoeGroupedMatmulAttributes:
    return (
        _valid()
        .set_mode(Mode.SCATTER)
        .set_token_index(_routing(index))
        .set_token_ks(_routing(ks))
        .set_top_k(top_k)
    )


def test_scatter_validates_routing_and_top_k() -> None:
    _node(_scatter()).pre_validate_node()
    assert _pre(_scatter(top_k=0)) == (
        hg.ErrorCode.INVALID_VALUE,
        "MoE SCATTER mode requires top_k to be positive",
    )
    assert _pre(_scatter(top_k=-1))[1] == "MoE SCATTER mode requires top_k to be positive"
    assert _pre(_scatter(ks=7, top_k=1)) == (
        hg.ErrorCode.INVALID_VALUE,
        "MoE token-index and token-ks tensors must have the same routed-token count",
    )
    assert _pre(_scatter(top_k=3)) == (
        hg.ErrorCode.INVALID_VALUE,
        "MoE top_k must not exceed the number of experts",
    )


def test_scatter_requires_both_routing_tensors() -> None:
    attrs = _valid().set_mode(Mode.SCATTER).set_token_ks(_routing()).set_top_k(1)
    assert _pre(attrs) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        "MoeGroupedMatmulNode missing MoE token-index tensor input",
    )
    attrs = _valid().set_mode(Mode.SCATTER).set_token_index(_routing()).set_top_k(1)
    assert _pre(attrs) == (
        hg.ErrorCode.ATTRIBUTE_NOT_SET,
        "MoeGroupedMatmulNode missing MoE token-ks tensor input",
    )
    attrs.set_token_ks(_routing(8, F))
    assert _pre(attrs) == (
        hg.ErrorCode.INVALID_VALUE,
        "MoE token-ks tensor must have INT32 data type",
    )


def test_none_and_gather_ignore_the_tensors_and_top_k_they_do_not_use() -> None:
    """hipDNN's node reads TOKEN_INDEX only in GATHER/SCATTER, TOKEN_KS and top_k only in
    SCATTER (a FLOAT token-ks in GATHER mode passes)."""
    _node(_valid().set_token_index(_routing(3, F)).set_top_k(-5)).pre_validate_node()
    gather = _valid().set_mode(Mode.GATHER).set_token_index(_routing(4))
    _node(gather.set_token_ks(_routing(9, F)).set_top_k(9)).pre_validate_node()


def test_gather_infers_output_dimensions_and_strides() -> None:
    output = hg.TensorAttributes()
    attrs = _valid().set_mode(Mode.GATHER).set_token_index(_routing(6)).set_output(output)
    node = _node(attrs)
    node.pre_validate_node()
    node.infer_properties_node()
    assert (output.get_dim(), output.get_stride()) == ([1, 6, 32], [192, 32, 1])


def test_none_and_scatter_infer_from_the_token_rows_and_reject_a_mismatch() -> None:
    for attrs in (_valid(), _scatter()):
        output = hg.TensorAttributes()
        node = _node(attrs.set_output(output))
        node.pre_validate_node()
        node.infer_properties_node()
        assert (output.get_dim(), output.get_stride()) == ([1, 8, 32], [256, 32, 1])
        assert output.get_data_type() == hg.DataType.NOT_SET  # no graph type to fill from
    mismatched = _with("output", dim=[1, 7, 32])
    node = _node(mismatched)
    node.pre_validate_node()
    err = _error(node.infer_properties_node)
    assert (err.code, err.message) == (
        hg.ErrorCode.INVALID_VALUE,
        "MoeGroupedMatmul output tensor dimensions do not match the inferred dimensions",
    )


def test_preset_strides_are_kept() -> None:
    attrs = _valid()
    attrs.get_output().set_stride([32, 1, 8])  # type: ignore[union-attr]
    node = _node(attrs)
    node.infer_properties_node()
    assert attrs.get_output().get_stride() == [32, 1, 8]  # type: ignore[union-attr]


@pytest.mark.parametrize("value", [True, "2", 2.0, 2**31, -(2**31) - 1])
def test_top_k_must_be_an_int32(value: Any) -> None:
    err = _error(lambda: hg.MoeGroupedMatmulAttributes().set_top_k(value))
    assert err.code == hg.ErrorCode.INVALID_VALUE


@pytest.mark.parametrize("value", [True, 7, "GATHER", None])
def test_mode_must_be_a_mode(value: Any) -> None:
    err = _error(lambda: hg.MoeGroupedMatmulAttributes().set_mode(value))
    assert (err.code, err.message) == (
        hg.ErrorCode.INVALID_VALUE,
        f"Unknown MoE grouped matmul mode {value!r}",
    )


def test_graph_validate_runs_the_rules() -> None:
    g = hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)
    token, weight = g.tensor(dim=[1, 8, 16]), g.tensor(dim=[2, 16, 32])
    offsets = g.tensor(dim=[2, 1, 1], data_type=I32)
    out = g.moe_grouped_matmul(token, weight, offsets, None, None, mode=Mode.GATHER)
    err = _error(g.validate)
    assert err.message == "MoeGroupedMatmulNode missing MoE token-index tensor input"
    assert out.get_name() == "MoeGroupedMatmul_0::OUTPUT"
    assert (token.get_name(), offsets.get_name()) == (
        "MoeGroupedMatmul_0::TOKEN",
        "MoeGroupedMatmul_0::FIRST_TOKEN_OFFSET",
    )

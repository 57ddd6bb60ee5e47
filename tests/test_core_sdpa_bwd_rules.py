"""Spec §4: SdpaBwdNode pre-validation rules 0–11 (order, codes, exact text), inference and
post-validation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sdpa_graph_cases import redim, ten

from hipdnn_graph import (
    DataType,
    ErrorCode,
    GraphAttributes,
    HipdnnError,
    NodeType,
    SdpaBackwardAttributes,
    SdpaBwdNode,
    TensorAttributes,
    generate_strides,
)

INVALID = ErrorCode.INVALID_VALUE
NOT_SET = ErrorCode.ATTRIBUTE_NOT_SET

# B=2, H=4, Sq=8, D=16; Hk=2, Skv=10; Hv=1, Dv=32 (GQA for K, MQA for V, Dv != D)
B, H, SQ, D, HK, SKV, HV, DV = 2, 4, 8, 16, 2, 10, 1, 32
P = "SdpaBwdNode: "


def ga() -> GraphAttributes:
    return (
        GraphAttributes()
        .set_io_data_type(DataType.HALF)
        .set_intermediate_data_type(DataType.FLOAT)
        .set_compute_data_type(DataType.FLOAT)
    )


def attrs() -> SdpaBackwardAttributes:
    """A valid, fully wired backward configuration."""
    return (
        SdpaBackwardAttributes()
        .set_name("bwd")
        .set_q(ten("Q", [B, H, SQ, D]))
        .set_k(ten("K", [B, HK, SKV, D]))
        .set_v(ten("V", [B, HV, SKV, DV]))
        .set_o(ten("O", [B, H, SQ, DV]))
        .set_do(ten("dO", [B, H, SQ, DV]))
        .set_stats(ten("Stats", [B, H, SQ, 1], DataType.FLOAT))
        .set_dq(TensorAttributes().set_name("dQ").set_is_virtual(True))
        .set_dk(TensorAttributes().set_name("dK").set_is_virtual(True))
        .set_dv(TensorAttributes().set_name("dV").set_is_virtual(True))
    )


def pre(a: SdpaBackwardAttributes) -> None:
    SdpaBwdNode(a, ga()).pre_validate_node()


def expect(a: SdpaBackwardAttributes, code: ErrorCode, message: str) -> None:
    with pytest.raises(HipdnnError) as info:
        pre(a)
    assert (info.value.code, info.value.message, str(info.value)) == (code, message, message)


def test_valid_configuration_passes_and_node_type() -> None:
    a = attrs()
    node = SdpaBwdNode(a, ga())
    node.pre_validate_node()
    assert node.get_node_type() is NodeType.SDPA_BWD


# ----- rule 0: unsupported usage first -----
def test_rule0_unsupported_usage_before_missing_slots() -> None:
    a = SdpaBackwardAttributes().set_score_mod(lambda x: x)
    expect(a, INVALID, "SDPA score modifier is unsupported by hipDNN")


def test_rule0_unsupported_usage_on_valid_node_first_wins() -> None:
    a = attrs().set_sink_token(ten("s", [1])).set_deterministic_algorithm(True)
    expect(a, INVALID, "SDPA backward sink token is unsupported by hipDNN")


def test_rule0_deterministic_false_passes() -> None:
    pre(attrs().set_deterministic_algorithm(False))


# ----- rule 1: required slots in order -----
SLOTS: list[tuple[str, str]] = [
    ("set_q", "SdpaBwdNode missing Q input"),
    ("set_k", "SdpaBwdNode missing K input"),
    ("set_v", "SdpaBwdNode missing V input"),
    ("set_o", "SdpaBwdNode missing O input"),
    ("set_do", "SdpaBwdNode missing dO input"),
    ("set_stats", "SdpaBwdNode missing Stats input"),
    ("set_dq", "SdpaBwdNode missing dQ output"),
    ("set_dk", "SdpaBwdNode missing dK output"),
    ("set_dv", "SdpaBwdNode missing dV output"),
]


@pytest.mark.parametrize(("setter", "message"), SLOTS, ids=[s for s, _ in SLOTS])
def test_rule1_missing_slot(setter: str, message: str) -> None:
    a = attrs()
    getattr(a, setter)(None)
    expect(a, NOT_SET, message)


@pytest.mark.parametrize("first", range(len(SLOTS)), ids=[s for s, _ in SLOTS])
def test_rule1_earliest_missing_slot_wins(first: int) -> None:
    a = attrs()
    for setter, _ in SLOTS[first:]:
        getattr(a, setter)(None)
    expect(a, NOT_SET, SLOTS[first][1])


def test_rule1_empty_attributes() -> None:
    expect(SdpaBackwardAttributes(), NOT_SET, "SdpaBwdNode missing Q input")


def test_rule1_dbias_is_optional() -> None:
    pre(attrs())  # no dBias, no bias


# ----- rule 2: rank-4 Q, K, V -----
@pytest.mark.parametrize(
    ("getter", "label"),
    [("get_q", "Query tensor Q"), ("get_k", "Key tensor K"), ("get_v", "Value tensor V")],
)
@pytest.mark.parametrize("rank", [0, 3, 5])
def test_rule2_rank(getter: str, label: str, rank: int) -> None:
    a = attrs()
    redim(getattr(a, getter)(), [2] * rank)
    expect(a, INVALID, f"{P}{label} must be rank-4, got rank={rank}")


def test_rule2_q_reported_before_k_and_v() -> None:
    a = attrs()
    redim(a.get_v(), [1])
    redim(a.get_k(), [1, 2])
    expect(a, INVALID, f"{P}Key tensor K must be rank-4, got rank=2")
    redim(a.get_q(), [1, 2, 3])
    expect(a, INVALID, f"{P}Query tensor Q must be rank-4, got rank=3")


# ----- rule 3: batch -----
def test_rule3_batch_q_k() -> None:
    a = attrs()
    redim(a.get_k(), [3, HK, SKV, D])
    expect(a, INVALID, f"{P}batch size mismatch between Q and K: 2 vs 3")


def test_rule3_batch_q_v() -> None:
    a = attrs()
    redim(a.get_v(), [5, HV, SKV, DV])
    expect(a, INVALID, f"{P}batch size mismatch between Q and V: 2 vs 5")


def test_rule3_k_before_v() -> None:
    a = attrs()
    redim(a.get_k(), [3, HK, SKV, D])
    redim(a.get_v(), [5, HV, SKV, DV])
    expect(a, INVALID, f"{P}batch size mismatch between Q and K: 2 vs 3")


# ----- rule 4: head dim -----
def test_rule4_head_dim_q_k() -> None:
    a = attrs()
    redim(a.get_k(), [B, HK, SKV, 24])
    expect(a, INVALID, f"{P}head_dim mismatch between Q and K: 16 vs 24")


def test_rule4_value_head_dim_may_differ() -> None:
    a = attrs()
    redim(a.get_v(), [B, HV, SKV, 128])
    redim(a.get_o(), [B, H, SQ, 128])
    redim(a.get_do(), [B, H, SQ, 128])
    pre(a)


def test_rule3_before_rule4() -> None:
    a = attrs()
    redim(a.get_k(), [7, HK, SKV, 24])
    expect(a, INVALID, f"{P}batch size mismatch between Q and K: 2 vs 7")


# ----- rule 5: seq_kv -----
def test_rule5_seq_kv() -> None:
    a = attrs()
    redim(a.get_v(), [B, HV, 12, DV])
    expect(a, INVALID, f"{P}seq_kv mismatch between K and V: 10 vs 12")


def test_rule4_before_rule5() -> None:
    a = attrs()
    redim(a.get_k(), [B, HK, SKV, 24])
    redim(a.get_v(), [B, HV, 12, DV])
    expect(a, INVALID, f"{P}head_dim mismatch between Q and K: 16 vs 24")


# ----- rule 6: GQA / MQA heads -----
@pytest.mark.parametrize("hk", [0, -2])
def test_rule6_num_heads_k_positive(hk: int) -> None:
    a = attrs()
    redim(a.get_k(), [B, hk, SKV, D])
    expect(a, INVALID, f"{P}num_heads_k must be positive, got {hk}")


def test_rule6_num_heads_k_divides() -> None:
    a = attrs()
    redim(a.get_k(), [B, 3, SKV, D])
    expect(
        a,
        INVALID,
        f"{P}num_heads must be divisible by num_heads_k for GQA/MQA. num_heads=4, num_heads_k=3",
    )


@pytest.mark.parametrize("hv", [0, -1])
def test_rule6_num_heads_v_positive(hv: int) -> None:
    a = attrs()
    redim(a.get_v(), [B, hv, SKV, DV])
    expect(a, INVALID, f"{P}num_heads_v must be positive, got {hv}")


def test_rule6_num_heads_v_divides() -> None:
    a = attrs()
    redim(a.get_v(), [B, 8, SKV, DV])
    expect(
        a,
        INVALID,
        f"{P}num_heads must be divisible by num_heads_v for GQA/MQA. num_heads=4, num_heads_v=8",
    )


def test_rule6_k_checked_before_v() -> None:
    a = attrs()
    redim(a.get_k(), [B, 3, SKV, D])
    redim(a.get_v(), [B, 0, SKV, DV])
    expect(
        a,
        INVALID,
        f"{P}num_heads must be divisible by num_heads_k for GQA/MQA. num_heads=4, num_heads_k=3",
    )


@pytest.mark.parametrize(("hk", "hv"), [(4, 1), (1, 4), (2, 4), (4, 2), (1, 1), (4, 4)])
def test_rule6_hk_hv_independent(hk: int, hv: int) -> None:
    a = attrs()
    redim(a.get_k(), [B, hk, SKV, D])
    redim(a.get_v(), [B, hv, SKV, DV])
    pre(a)


# ----- rule 7: dO vs O (only when both have dims) -----
@pytest.mark.parametrize("rank", [3, 5])
def test_rule7_do_rank(rank: int) -> None:
    a = attrs()
    redim(a.get_do(), [2] * rank)
    expect(a, INVALID, f"{P}dO must be rank-4, got rank={rank}")


@pytest.mark.parametrize(
    ("index", "what"), [(0, "batch"), (1, "num_heads"), (2, "seq_q"), (3, "head_dim")]
)
def test_rule7_do_mismatch(index: int, what: str) -> None:
    a = attrs()
    dims = [B, H, SQ, DV]
    dims[index] += 1
    redim(a.get_do(), dims)
    expect(a, INVALID, f"{P}dO {what} mismatch with O")


def test_rule7_first_mismatching_dim_reported() -> None:
    a = attrs()
    redim(a.get_do(), [B, H + 1, SQ + 1, DV + 1])
    expect(a, INVALID, f"{P}dO num_heads mismatch with O")


def test_rule7_skipped_when_o_has_no_dims() -> None:
    a = attrs()
    a.set_o(ten("O"))  # no dims (e.g. not inferred yet)
    redim(a.get_do(), [1, 1, 1])
    pre(a)


def test_rule7_skipped_when_do_has_no_dims() -> None:
    a = attrs()
    a.set_do(ten("dO"))
    pre(a)


def test_rule6_before_rule7() -> None:
    a = attrs()
    redim(a.get_v(), [B, 3, SKV, DV])
    redim(a.get_do(), [1, 2, 3])
    expect(
        a,
        INVALID,
        f"{P}num_heads must be divisible by num_heads_v for GQA/MQA. num_heads=4, num_heads_v=3",
    )


# ----- rule 8: bias (ATTN_MASK) -----
@pytest.mark.parametrize(
    "dims",
    [[B, H, SQ, SKV], [1, 1, SQ, SKV], [1, 1, 1, 1], [SQ, SKV], [1, SKV], [SQ, 1], [SKV], [1]],
    ids=str,
)
def test_rule8_bias_accepted_shapes(dims: list[int]) -> None:
    pre(attrs().set_bias(ten("bias", dims)))


def test_rule8_bias_rank() -> None:
    a = attrs().set_bias(ten("bias", [1, 1, 1, SQ, SKV]))
    expect(a, INVALID, f"{P}ATTN_MASK rank must be <= 4, got rank=5")


@pytest.mark.parametrize("dims", [[B, H, SQ, 7], [7], [SQ, SQ]], ids=str)
def test_rule8_bias_last_dim(dims: list[int]) -> None:
    a = attrs().set_bias(ten("bias", dims))
    expect(a, INVALID, f"{P}ATTN_MASK last dim must equal seq_kv (10) or 1, got {dims[-1]}")


@pytest.mark.parametrize("dims", [[B, H, 3, SKV], [SKV, SKV], [1, 5, 1]], ids=str)
def test_rule8_bias_second_to_last_dim(dims: list[int]) -> None:
    a = attrs().set_bias(ten("bias", dims))
    expect(a, INVALID, f"{P}ATTN_MASK second-to-last dim must equal seq_q (8) or 1, got {dims[-2]}")


def test_rule8_last_dim_checked_before_second_to_last() -> None:
    a = attrs().set_bias(ten("bias", [3, 7]))
    expect(a, INVALID, f"{P}ATTN_MASK last dim must equal seq_kv (10) or 1, got 7")


def test_rule8_rank_checked_before_dims() -> None:
    a = attrs().set_bias(ten("bias", [1, 1, 1, 3, 7]))
    expect(a, INVALID, f"{P}ATTN_MASK rank must be <= 4, got rank=5")


def test_rule8_empty_bias_dims_rejected_clearly() -> None:
    a = attrs().set_bias(ten("bias"))
    with pytest.raises(HipdnnError) as info:
        pre(a)
    assert info.value.code is INVALID
    assert info.value.message.startswith(P) and "ATTN_MASK" in info.value.message


def test_rule7_before_rule8() -> None:
    a = attrs().set_bias(ten("bias", [7]))
    redim(a.get_do(), [B + 1, H, SQ, DV])
    expect(a, INVALID, f"{P}dO batch mismatch with O")


# ----- rule 9: dropout mask -----
@pytest.mark.parametrize("dims", [[B, H, SQ, SKV], [1, 1, SQ, SKV], [B, 1, SQ, SKV]], ids=str)
def test_rule9_dropout_mask_accepted(dims: list[int]) -> None:
    pre(attrs().set_dropout_mask(ten("mask", dims)))


@pytest.mark.parametrize(
    ("dims", "message"),
    [
        ([SQ, SKV], "DROPOUT_MASK must be rank-4, got rank=2"),
        ([1, B, H, SQ, SKV], "DROPOUT_MASK must be rank-4, got rank=5"),
        ([3, H, SQ, SKV], "DROPOUT_MASK dim[0] must equal batch (2) or 1, got 3"),
        ([B, 2, SQ, SKV], "DROPOUT_MASK dim[1] must equal num_heads (4) or 1, got 2"),
        ([B, H, 1, SKV], "DROPOUT_MASK dim[2] must equal seq_q (8), got 1"),
        ([B, H, SQ, 1], "DROPOUT_MASK dim[3] must equal seq_kv (10), got 1"),
        ([3, 3, 3, 3], "DROPOUT_MASK dim[0] must equal batch (2) or 1, got 3"),
        ([1, 1, SQ, 11], "DROPOUT_MASK dim[3] must equal seq_kv (10), got 11"),
    ],
    ids=str,
)
def test_rule9_dropout_mask_shape(dims: list[int], message: str) -> None:
    expect(attrs().set_dropout_mask(ten("mask", dims)), INVALID, P + message)


def test_rule9_via_set_dropout_mask_form() -> None:
    a = attrs().set_dropout(ten("mask", [B, H, SQ]), ten("s", [1]), ten("si", [1]))
    expect(a, INVALID, f"{P}DROPOUT_MASK must be rank-4, got rank=3")


def test_rule8_before_rule9() -> None:
    a = attrs().set_bias(ten("bias", [7])).set_dropout_mask(ten("mask", [1]))
    expect(a, INVALID, f"{P}ATTN_MASK last dim must equal seq_kv (10) or 1, got 7")


# ----- rule 10: padding mask and seq-len tensors -----
def seq_len(name: str, dims: list[int] | None = None, dtype: DataType = DataType.INT32) -> Any:
    return ten(name, [B, 1, 1, 1] if dims is None else dims, dtype)


def padded() -> SdpaBackwardAttributes:
    return (
        attrs()
        .set_padding_mask(True)
        .set_seq_len_q(seq_len("seq_q"))
        .set_seq_len_kv(seq_len("seq_kv"))
    )


def test_rule10_valid_padding_passes() -> None:
    pre(padded())


def test_rule10_seq_len_q_required() -> None:
    expect(
        padded().set_seq_len_q(None),
        NOT_SET,
        f"{P}padding_mask=true requires seq_len_q tensor to be set",
    )


def test_rule10_seq_len_kv_required() -> None:
    expect(
        padded().set_seq_len_kv(None),
        NOT_SET,
        f"{P}padding_mask=true requires seq_len_kv tensor to be set",
    )


def test_rule10_both_missing_reports_q() -> None:
    expect(
        padded().set_seq_len_q(None).set_seq_len_kv(None),
        NOT_SET,
        f"{P}padding_mask=true requires seq_len_q tensor to be set",
    )


def test_rule10_missing_kv_reported_before_bad_q_shape() -> None:
    a = padded().set_seq_len_q(seq_len("seq_q", [B])).set_seq_len_kv(None)
    expect(a, NOT_SET, f"{P}padding_mask=true requires seq_len_kv tensor to be set")


SEQ_LEN_CASES = [
    ([B, 1, 1], DataType.INT32, "{s} must be rank-4, got rank=3"),
    ([B], DataType.INT32, "{s} must be rank-4, got rank=1"),
    ([3, 1, 1, 1], DataType.INT32, "{s} dim[0] must equal batch (2), got 3"),
    ([1, 1, 1, 1], DataType.INT32, "{s} dim[0] must equal batch (2), got 1"),
    ([B, 4, 1, 1], DataType.INT32, "{s} dim[1] must be 1, got 4"),
    ([B, 1, 5, 1], DataType.INT32, "{s} dim[2] must be 1, got 5"),
    ([B, 1, 1, 6], DataType.INT32, "{s} dim[3] must be 1, got 6"),
    ([B, 1, 1, 1], DataType.INT64, "{s} must have INT32 data type"),
    ([B, 1, 1, 1], DataType.FLOAT, "{s} must have INT32 data type"),
    ([B, 2, 2, 1], DataType.FLOAT, "{s} dim[1] must be 1, got 2"),
]


@pytest.mark.parametrize("which", ["seq_len_q", "seq_len_kv"])
@pytest.mark.parametrize(("dims", "dtype", "template"), SEQ_LEN_CASES, ids=lambda x: str(x))
def test_rule10_seq_len_shape_and_type(
    which: str, dims: list[int], dtype: DataType, template: str
) -> None:
    a = padded()
    getattr(a, f"set_{which}")(seq_len(which, dims, dtype))
    expect(a, INVALID, P + template.format(s=which))


def test_rule10_q_checks_complete_before_kv() -> None:
    a = padded()
    a.set_seq_len_q(seq_len("q", dtype=DataType.FLOAT))
    a.set_seq_len_kv(seq_len("kv", [B, 1, 1]))
    expect(a, INVALID, f"{P}seq_len_q must have INT32 data type")


def test_rule10_padding_false_does_not_check_seq_len() -> None:
    a = attrs().set_seq_len_q(seq_len("q", [7], DataType.FLOAT))
    a.set_seq_len_kv(seq_len("kv", [1, 2, 3], DataType.HALF))
    pre(a)
    pre(attrs().set_padding_mask(False))


def test_rule9_before_rule10() -> None:
    a = padded().set_seq_len_q(None).set_dropout_mask(ten("mask", [1]))
    expect(a, INVALID, f"{P}DROPOUT_MASK must be rank-4, got rank=1")


# ----- rule 11: attention scale -----
def scalar(name: str = "scale") -> TensorAttributes:
    return TensorAttributes().set_name(name).set_value(0.125)


def test_rule11_scale_tensor_value_passes() -> None:
    pre(attrs().set_attn_scale(scalar()))


def test_rule11_runtime_pass_by_value_scale_passes() -> None:
    s = ten("scale", [1], DataType.FLOAT).set_is_pass_by_value(True)
    pre(attrs().set_attn_scale(s))


def test_rule11_scalar_of_rank4_passes() -> None:
    s = ten("scale", [1, 1, 1, 1], DataType.FLOAT).set_is_pass_by_value(True)
    pre(attrs().set_attn_scale(s))


def test_rule11_float_scale_passes() -> None:
    pre(attrs().set_attn_scale(0.125))


def test_rule11_tensor_and_value_both_set() -> None:
    a = attrs().set_attn_scale(scalar()).set_attn_scale(0.5)
    expect(a, INVALID, f"{P}attn_scale tensor and attn_scale_value cannot both be set")


def test_rule11_both_set_reported_before_shape() -> None:
    a = attrs().set_attn_scale(ten("scale")).set_attn_scale(0.5)
    expect(a, INVALID, f"{P}attn_scale tensor and attn_scale_value cannot both be set")


def test_rule11_named_scale_without_dims() -> None:
    a = attrs().set_attn_scale(ten("my_scale"))
    expect(a, NOT_SET, "my_scale dimensions are not set")


def test_rule11_unnamed_scale_without_dims() -> None:
    a = attrs().set_attn_scale(TensorAttributes().set_data_type(DataType.FLOAT))
    expect(a, NOT_SET, "SCALE tensor dimensions are not set")


@pytest.mark.parametrize(("dims", "n"), [([2], 2), ([2, 3], 6), ([1, 1, 4, 1], 4)], ids=str)
def test_rule11_scale_not_scalar(dims: list[int], n: int) -> None:
    s = ten("s", dims, DataType.FLOAT).set_is_pass_by_value(True)
    expect(
        attrs().set_attn_scale(s),
        INVALID,
        f"s must be a scalar (single element), but has {n} elements",
    )


def test_rule11_unnamed_scale_not_scalar() -> None:
    s = TensorAttributes().set_data_type(DataType.FLOAT).set_dim([3]).set_stride([1])
    expect(
        attrs().set_attn_scale(s),
        INVALID,
        "SCALE tensor must be a scalar (single element), but has 3 elements",
    )


def test_rule11_scale_must_be_pass_by_value() -> None:
    expect(
        attrs().set_attn_scale(ten("s", [1], DataType.FLOAT)),
        INVALID,
        "s must be a pass-by-value tensor",
    )


def test_rule11_unnamed_scale_must_be_pass_by_value() -> None:
    s = TensorAttributes().set_data_type(DataType.FLOAT).set_dim([1]).set_stride([1])
    expect(attrs().set_attn_scale(s), INVALID, "SCALE tensor must be a pass-by-value tensor")


def test_rule11_volume_checked_before_pass_by_value() -> None:
    expect(
        attrs().set_attn_scale(ten("s", [2], DataType.FLOAT)),
        INVALID,
        "s must be a scalar (single element), but has 2 elements",
    )


def test_rule10_before_rule11() -> None:
    a = padded().set_seq_len_kv(None).set_attn_scale(ten("s"))
    expect(a, NOT_SET, f"{P}padding_mask=true requires seq_len_kv tensor to be set")


# ----- peeling: one configuration breaking every rule reports them in order -----
def test_rules_reported_in_order_when_fixed_one_by_one() -> None:
    a = attrs()
    a.set_bias(ten("bias", [7]))
    a.set_dropout_mask(ten("mask", [1]))
    a.set_padding_mask(True)
    a.set_attn_scale(ten("s", [2], DataType.FLOAT))
    redim(a.get_q(), [B, H, SQ])
    fixes: list[tuple[str, Callable[[], Any]]] = [
        ("SDPA max_total_seq_len_q is unsupported by hipDNN", lambda: None),
        ("SdpaBwdNode missing dV output", lambda: a.set_dv(ten("dV"))),
        (f"{P}Query tensor Q must be rank-4, got rank=3", lambda: redim(a.get_q(), [B, H, SQ, D])),
        (
            f"{P}batch size mismatch between Q and V: 2 vs 9",
            lambda: redim(a.get_v(), [B, HV, SKV, DV]),
        ),
        (f"{P}dO seq_q mismatch with O", lambda: redim(a.get_do(), [B, H, SQ, DV])),
        (f"{P}ATTN_MASK last dim must equal seq_kv (10) or 1, got 7", lambda: a.set_bias(None)),
        (f"{P}DROPOUT_MASK must be rank-4, got rank=1", lambda: a.set_dropout_mask(None)),
        (
            f"{P}padding_mask=true requires seq_len_q tensor to be set",
            lambda: a.set_padding_mask(False),
        ),
        ("s must be a scalar (single element), but has 2 elements", lambda: a.set_attn_scale(None)),
    ]
    a.set_dv(None)
    redim(a.get_v(), [9, HV, SKV, DV])
    redim(a.get_do(), [B, H, SQ + 1, DV])
    # rule 0 needs a fresh object (unsupported usage cannot be cleared)
    blocked = a.model_copy().set_max_total_seq_len_q(64)
    with pytest.raises(HipdnnError) as info:
        pre(blocked)
    assert info.value.message == fixes[0][0]
    for message, fix in fixes[1:]:
        with pytest.raises(HipdnnError) as info:
            pre(a)
        assert info.value.message == message
        fix()
    pre(a)


# ----- inference -----
def test_infer_gradients_take_qkv_dims_and_packed_strides() -> None:
    a = attrs()
    node = SdpaBwdNode(a, ga())
    node.pre_validate_node()
    node.infer_properties_node()
    for grad, dims in (
        (a.get_dq(), [B, H, SQ, D]),
        (a.get_dk(), [B, HK, SKV, D]),
        (a.get_dv(), [B, HV, SKV, DV]),
    ):
        assert grad is not None
        assert grad.get_dim() == dims
        assert grad.get_stride() == generate_strides(dims)
    node.post_validate_node()


def test_infer_packed_strides_even_when_source_is_strided() -> None:
    a = attrs()
    q = a.get_q()
    assert q is not None
    q.set_stride([SQ * H * D, D, H * D, 1])  # BSHD layout
    node = SdpaBwdNode(a, ga())
    node.infer_properties_node()
    assert a.get_dq().get_dim() == [B, H, SQ, D]  # type: ignore[union-attr]
    assert a.get_dq().get_stride() == generate_strides([B, H, SQ, D])  # type: ignore[union-attr]


def test_infer_keeps_explicit_dims_and_strides() -> None:
    a = attrs()
    stride = [SQ * H * D, D, H * D, 1]
    a.get_dq().set_dim([B, H, SQ, D]).set_stride(stride)  # type: ignore[union-attr]
    node = SdpaBwdNode(a, ga())
    node.validate_node()
    assert a.get_dq().get_stride() == stride  # type: ignore[union-attr]


def test_infer_explicit_dims_without_strides_get_packed_strides() -> None:
    a = attrs()
    a.get_dk().set_dim([B, HK, SKV, D])  # type: ignore[union-attr]
    SdpaBwdNode(a, ga()).infer_properties_node()
    assert a.get_dk().get_stride() == generate_strides([B, HK, SKV, D])  # type: ignore[union-attr]


def test_infer_fills_types_and_compute_type_from_context() -> None:
    a = attrs()
    a.get_q().set_data_type(DataType.NOT_SET)  # type: ignore[union-attr]
    node = SdpaBwdNode(a, ga())
    node.infer_properties_node()
    assert a.get_q().get_data_type() is DataType.HALF  # type: ignore[union-attr]
    assert a.get_dq().get_data_type() is DataType.FLOAT  # virtual → intermediate  # type: ignore[union-attr]
    assert a.get_compute_data_type() is DataType.FLOAT


def test_infer_keeps_explicit_compute_type() -> None:
    a = attrs().set_compute_data_type(DataType.DOUBLE)
    SdpaBwdNode(a, ga()).infer_properties_node()
    assert a.get_compute_data_type() is DataType.DOUBLE


def test_infer_does_not_fail_without_data_types() -> None:
    a = attrs()
    for t in (*a.inputs.values(), *a.outputs.values()):
        t.set_data_type(DataType.NOT_SET)
    node = SdpaBwdNode(a, GraphAttributes())
    node.pre_validate_node()
    node.infer_properties_node()
    assert a.get_dv().get_dim() == [B, HV, SKV, DV]  # type: ignore[union-attr]
    assert a.get_dv().get_data_type() is DataType.NOT_SET  # type: ignore[union-attr]


def test_dbias_inferred_only_when_given() -> None:
    a = attrs().set_bias(ten("bias", [1, H, SQ, SKV]))
    SdpaBwdNode(a, ga()).validate_node()
    assert a.get_dbias() is None
    db = TensorAttributes().set_name("dBias")
    a2 = attrs().set_bias(ten("bias", [1, H, SQ, SKV])).set_dbias(db)
    SdpaBwdNode(a2, ga()).validate_node()
    assert db.get_dim() == [1, H, SQ, SKV]


# ----- post-validation -----
def test_post_validate_compute_type_not_set() -> None:
    a = attrs().set_name("my_bwd")
    node = SdpaBwdNode(a, GraphAttributes().set_intermediate_data_type(DataType.FLOAT))
    node.pre_validate_node()
    node.infer_properties_node()
    with pytest.raises(HipdnnError) as info:
        node.post_validate_node()
    assert info.value.code is NOT_SET
    assert info.value.message == "Node my_bwd does not have a compute_data_type set"


def test_post_validate_validates_outputs() -> None:
    a = attrs()
    node = SdpaBwdNode(a, GraphAttributes().set_compute_data_type(DataType.FLOAT))
    node.pre_validate_node()
    node.infer_properties_node()
    with pytest.raises(HipdnnError) as info:
        node.post_validate_node()
    assert info.value.code is NOT_SET
    assert info.value.message == "Tensor dQ does not have a data type set"


def test_post_validate_reports_the_first_failing_output_in_slot_order() -> None:
    """Outputs set dV first, then dK: dK (the lower slot) is reported, as hipDNN walks them."""
    dv, dk = TensorAttributes().set_name("dV"), TensorAttributes().set_name("dK")
    a = attrs().set_dq(None).set_dk(None).set_dv(None).set_dv(dv).set_dk(dk)
    a.set_dq(TensorAttributes().set_name("dQ"))
    assert [slot.name for slot in a.outputs] == ["dV", "dK", "dQ"]
    node = SdpaBwdNode(a, ga())
    node.pre_validate_node()
    node.infer_properties_node()
    dv.set_alignment(0)
    dk.set_alignment(0)
    with pytest.raises(HipdnnError) as info:
        node.post_validate_node()
    assert info.value.message == "Tensor dK alignment must be >= 1"


@pytest.mark.parametrize(
    ("getter", "dims"),
    [
        ("get_dq", [B, H, SQ, D + 1]),
        ("get_dq", [B, H, SQ]),
        ("get_dk", [B, H, SKV, D]),
        ("get_dv", [B, HV, SKV, D]),
    ],
    ids=["dQ_headdim", "dQ_rank", "dK_heads", "dV_headdim"],
)
def test_post_validate_rejects_explicit_wrong_gradient_dims(getter: str, dims: list[int]) -> None:
    a = attrs()
    redim(getattr(a, getter)(), dims)
    node = SdpaBwdNode(a, ga())
    node.pre_validate_node()
    node.infer_properties_node()
    assert getattr(a, getter)().get_dim() == dims  # explicit dims are kept by inference
    with pytest.raises(HipdnnError) as info:
        node.post_validate_node()
    assert info.value.code is INVALID
    assert {"get_dq": "dQ", "get_dk": "dK", "get_dv": "dV"}[getter] in info.value.message


def test_post_validate_accepts_explicit_matching_gradient_dims() -> None:
    a = attrs()
    redim(a.get_dq(), [B, H, SQ, D])
    redim(a.get_dk(), [B, HK, SKV, D])
    redim(a.get_dv(), [B, HV, SKV, DV])
    SdpaBwdNode(a, ga()).validate_node()


# ----- robustness: the node lifecycle raises HipdnnError or passes, nothing else -----
_SLOT_SETTERS = [s for s, _ in SLOTS] + [
    "set_attn_scale",
    "set_bias",
    "set_seq_len_q",
    "set_seq_len_kv",
    "set_dropout_mask",
    "set_dbias",
]


_DIMS = st.lists(st.integers(-2, 4), max_size=6)
_KINDS = st.sampled_from(["plain", "plain", "plain", "untyped", "int32", "value", "runtime"])
_SHAPE_MODES = st.sampled_from(["coherent"] * 24 + ["random", "empty", "missing"])


def _coherent(setter: str, b: int, h: int, sq: int, skv: int, d: int) -> list[int]:
    return {
        "set_q": [b, h, sq, d],
        "set_k": [b, h, skv, d],
        "set_v": [b, h, skv, d],
        "set_o": [b, h, sq, d],
        "set_do": [b, h, sq, d],
        "set_stats": [b, h, sq, 1],
        "set_dq": [],
        "set_dk": [],
        "set_dv": [],
        "set_attn_scale": [1],
        "set_bias": [1, 1, sq, skv],
        "set_seq_len_q": [b, 1, 1, 1],
        "set_seq_len_kv": [b, 1, 1, 1],
        "set_dropout_mask": [b, h, sq, skv],
        "set_dbias": [],
    }[setter]


def _tensor(dims: list[int], kind: str, strided: bool) -> TensorAttributes:
    t = TensorAttributes(name="x" if strided else "", dim=dims)
    if strided:
        t.set_stride(generate_strides(dims)[1:])  # wrong length on purpose
    if kind == "plain":
        t.set_data_type(DataType.HALF)
    elif kind == "int32":
        t.set_data_type(DataType.INT32)
    elif kind == "value":
        t.set_value(0.5)
    elif kind == "runtime":
        t.set_is_pass_by_value(True)
    return t


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.lists(st.integers(1, 3), min_size=5, max_size=5),
    slots=st.lists(
        st.tuples(_SHAPE_MODES, _DIMS, _KINDS, st.integers(0, 9)),
        min_size=len(_SLOT_SETTERS),
        max_size=len(_SLOT_SETTERS),
    ),
    padding=st.booleans(),
    scale_value=st.sampled_from([None, None, 0.5]),
    graph_type=st.sampled_from([DataType.NOT_SET, DataType.FLOAT, DataType.FLOAT]),
)
def test_node_lifecycle_raises_only_hipdnn_error(
    base: list[int],
    slots: list[tuple[str, list[int], str, int]],
    padding: bool,
    scale_value: float | None,
    graph_type: DataType,
) -> None:
    a = SdpaBackwardAttributes().set_padding_mask(padding)
    for setter, (mode, random_dims, kind, odd) in zip(_SLOT_SETTERS, slots, strict=True):
        optional = setter not in {s for s, _ in SLOTS}
        if mode == "missing" or (optional and odd < 6):
            continue
        dims = {"coherent": _coherent(setter, *base), "random": random_dims, "empty": []}[mode]
        if setter.startswith("set_seq_len") and kind == "plain" and odd < 8:
            kind = "int32"
        if setter == "set_attn_scale" and odd < 8:
            kind = "value"
        getattr(a, setter)(_tensor(dims, kind, strided=odd == 9))
    if scale_value is not None:
        a.set_attn_scale(scale_value)
    g = GraphAttributes(
        io_data_type=graph_type, intermediate_data_type=graph_type, compute_data_type=graph_type
    )
    try:
        SdpaBwdNode(a, g).validate_node()
    except HipdnnError as err:
        assert err.code in (INVALID, NOT_SET) and err.message

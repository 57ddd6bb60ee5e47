"""Spec §5: SdpaFwdNode pre-validation (prefix ``SdpaFwdNode``), O checks and inference."""

from __future__ import annotations

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
    SdpaAttributes,
    SdpaFwdNode,
    TensorAttributes,
    generate_strides,
)

INVALID = ErrorCode.INVALID_VALUE
NOT_SET = ErrorCode.ATTRIBUTE_NOT_SET
B, H, SQ, D, HK, SKV, HV, DV = 2, 4, 8, 16, 2, 10, 1, 32
P = "SdpaFwdNode: "


def ga() -> GraphAttributes:
    return (
        GraphAttributes()
        .set_io_data_type(DataType.HALF)
        .set_intermediate_data_type(DataType.HALF)
        .set_compute_data_type(DataType.FLOAT)
    )


def attrs() -> SdpaAttributes:
    return (
        SdpaAttributes()
        .set_name("fwd")
        .set_q(ten("Q", [B, H, SQ, D]))
        .set_k(ten("K", [B, HK, SKV, D]))
        .set_v(ten("V", [B, HV, SKV, DV]))
        .set_o(TensorAttributes().set_name("O").set_is_virtual(True))
        .set_stats(TensorAttributes().set_name("Stats").set_is_virtual(True))
        .set_generate_stats(True)
    )


def pre(a: SdpaAttributes) -> None:
    SdpaFwdNode(a, ga()).pre_validate_node()


def expect(a: SdpaAttributes, code: ErrorCode, message: str) -> None:
    with pytest.raises(HipdnnError) as info:
        pre(a)
    assert (info.value.code, info.value.message, str(info.value)) == (code, message, message)


def test_valid_passes_and_node_type() -> None:
    node = SdpaFwdNode(attrs(), ga())
    node.pre_validate_node()
    assert node.get_node_type() is NodeType.SDPA_FWD


def test_unsupported_usage_first() -> None:
    a = SdpaAttributes().set_max_total_seq_len_kv(16)
    expect(a, INVALID, "SDPA max_total_seq_len_kv is unsupported by hipDNN")


def test_unsupported_paged_attention_on_valid_node() -> None:
    a = attrs().set_paged_attention_k_table(ten("table", [B, 1, 1, 1]))
    with pytest.raises(HipdnnError) as info:
        pre(a)
    assert info.value.code is INVALID
    assert info.value.message == a.get_unsupported_reason()


@pytest.mark.parametrize(
    ("setter", "message"),
    [
        ("set_q", "SdpaFwdNode missing Q input"),
        ("set_k", "SdpaFwdNode missing K input"),
        ("set_v", "SdpaFwdNode missing V input"),
        ("set_o", "SdpaFwdNode missing O output"),
    ],
)
def test_missing_slot(setter: str, message: str) -> None:
    a = attrs()
    getattr(a, setter)(None)
    expect(a, NOT_SET, message)


def test_missing_slots_in_order() -> None:
    expect(SdpaAttributes(), NOT_SET, "SdpaFwdNode missing Q input")
    expect(attrs().set_v(None).set_o(None), NOT_SET, "SdpaFwdNode missing V input")


def test_stats_slot_optional() -> None:
    pre(attrs().set_stats(None).set_generate_stats(False))


@pytest.mark.parametrize(
    ("getter", "label"),
    [("get_q", "Query tensor Q"), ("get_k", "Key tensor K"), ("get_v", "Value tensor V")],
)
def test_rank4(getter: str, label: str) -> None:
    a = attrs()
    redim(getattr(a, getter)(), [1, 2, 3])
    expect(a, INVALID, f"{P}{label} must be rank-4, got rank=3")


def test_batch_k_then_v() -> None:
    a = attrs()
    redim(a.get_v(), [3, HV, SKV, DV])
    expect(a, INVALID, f"{P}batch size mismatch between Q and V: 2 vs 3")
    redim(a.get_k(), [4, HK, SKV, D])
    expect(a, INVALID, f"{P}batch size mismatch between Q and K: 2 vs 4")


def test_head_dim() -> None:
    a = attrs()
    redim(a.get_k(), [B, HK, SKV, 8])
    expect(a, INVALID, f"{P}head_dim mismatch between Q and K: 16 vs 8")


def test_seq_kv() -> None:
    a = attrs()
    redim(a.get_v(), [B, HV, 11, DV])
    expect(a, INVALID, f"{P}seq_kv mismatch between K and V: 10 vs 11")


@pytest.mark.parametrize(
    ("k_heads", "v_heads", "message"),
    [
        (0, 1, "num_heads_k must be positive, got 0"),
        (
            3,
            1,
            "num_heads must be divisible by num_heads_k for GQA/MQA. num_heads=4, num_heads_k=3",
        ),
        (2, -1, "num_heads_v must be positive, got -1"),
        (
            2,
            3,
            "num_heads must be divisible by num_heads_v for GQA/MQA. num_heads=4, num_heads_v=3",
        ),
    ],
)
def test_gqa(k_heads: int, v_heads: int, message: str) -> None:
    a = attrs()
    redim(a.get_k(), [B, k_heads, SKV, D])
    redim(a.get_v(), [B, v_heads, SKV, DV])
    expect(a, INVALID, P + message)


@pytest.mark.parametrize(
    ("dims", "message"),
    [
        ([1, 1, 1, SQ, SKV], "ATTN_MASK rank must be <= 4, got rank=5"),
        ([B, H, SQ, 3], "ATTN_MASK last dim must equal seq_kv (10) or 1, got 3"),
        ([B, H, 3, SKV], "ATTN_MASK second-to-last dim must equal seq_q (8) or 1, got 3"),
    ],
)
def test_bias(dims: list[int], message: str) -> None:
    expect(attrs().set_bias(ten("bias", dims)), INVALID, P + message)


def test_bias_broadcast_ok() -> None:
    pre(attrs().set_bias(ten("bias", [1, 1, SQ, 1])))


def test_empty_bias_rejected() -> None:
    with pytest.raises(HipdnnError) as info:
        pre(attrs().set_bias(ten("bias")))
    assert info.value.code is INVALID and "ATTN_MASK" in info.value.message


def test_scale_rules() -> None:
    both = attrs().set_attn_scale(TensorAttributes().set_name("s").set_value(0.5))
    both.set_attn_scale(0.5)
    expect(both, INVALID, f"{P}attn_scale tensor and attn_scale_value cannot both be set")
    expect(attrs().set_attn_scale(ten("s")), NOT_SET, "s dimensions are not set")
    expect(
        attrs().set_attn_scale(TensorAttributes().set_data_type(DataType.FLOAT)),
        NOT_SET,
        "SCALE tensor dimensions are not set",
    )
    expect(
        attrs().set_attn_scale(ten("s", [4], DataType.FLOAT).set_is_pass_by_value(True)),
        INVALID,
        "s must be a scalar (single element), but has 4 elements",
    )
    expect(
        attrs().set_attn_scale(ten("s", [1], DataType.FLOAT)),
        INVALID,
        "s must be a pass-by-value tensor",
    )
    pre(attrs().set_attn_scale(TensorAttributes().set_name("s").set_value(0.5)))


def test_bias_before_scale() -> None:
    a = attrs().set_bias(ten("bias", [3])).set_attn_scale(ten("s"))
    expect(a, INVALID, f"{P}ATTN_MASK last dim must equal seq_kv (10) or 1, got 3")


# ----- O dims (only when O has dims) -----
@pytest.mark.parametrize(
    ("dims", "message"),
    [
        ([B, H, SQ], "Output O must be rank-4, got rank=3"),
        ([3, H, SQ, DV], "Output O batch mismatch: expected 2 got 3"),
        ([B, 5, SQ, DV], "Output O num_heads mismatch: expected 4 got 5"),
        ([B, H, 6, DV], "Output O seq_q mismatch: expected 8 got 6"),
        ([B, H, SQ, D], "Output O head_dim must match V head_dim: expected 32 got 16"),
        ([3, 5, 6, 7], "Output O batch mismatch: expected 2 got 3"),
    ],
)
def test_output_o_dims(dims: list[int], message: str) -> None:
    a = attrs()
    redim(a.get_o(), dims)
    expect(a, INVALID, P + message)


def test_output_o_correct_explicit_dims_pass() -> None:
    a = attrs()
    redim(a.get_o(), [B, H, SQ, DV])
    pre(a)


def test_scale_before_output_o() -> None:
    a = attrs().set_attn_scale(ten("s"))
    redim(a.get_o(), [B, H, SQ])
    expect(a, NOT_SET, "s dimensions are not set")


def test_dropout_mask_and_padding_checked_like_backward() -> None:
    with pytest.raises(HipdnnError) as info:
        pre(attrs().set_dropout_mask(ten("m", [B, H, SQ])))
    assert info.value.code is INVALID
    assert info.value.message == f"{P}DROPOUT_MASK must be rank-4, got rank=3"
    a = attrs().set_padding_mask(True)
    expect(a, NOT_SET, f"{P}padding_mask=true requires seq_len_q tensor to be set")
    a.set_seq_len_q(ten("sq", [B, 1, 1, 1], DataType.INT32))
    a.set_seq_len_kv(ten("skv", [B, 1, 1, 1], DataType.INT64))
    expect(a, INVALID, f"{P}seq_len_kv must have INT32 data type")
    a.set_seq_len_kv(ten("skv", [B, 1, 1, 1], DataType.INT32))
    pre(a)


# ----- inference -----
def test_infer_o_and_stats() -> None:
    a = attrs()
    node = SdpaFwdNode(a, ga())
    node.validate_node()
    o, stats = a.get_o(), a.get_stats()
    assert o is not None and stats is not None
    assert o.get_dim() == [B, H, SQ, DV]
    assert o.get_stride() == generate_strides([B, H, SQ, DV])
    assert stats.get_dim() == [B, H, SQ, 1]
    assert stats.get_stride() == generate_strides([B, H, SQ, 1])
    assert o.get_data_type() is DataType.HALF
    # spec §6: Stats is fp32 (hipDNN itself leaves it to fill_from_context: intermediate type)
    assert stats.get_data_type() is DataType.FLOAT


def test_infer_keeps_explicit_o_strides() -> None:
    a = attrs()
    stride = [SQ * H * DV, DV, H * DV, 1]
    a.get_o().set_dim([B, H, SQ, DV]).set_stride(stride)  # type: ignore[union-attr]
    SdpaFwdNode(a, ga()).validate_node()
    assert a.get_o().get_stride() == stride  # type: ignore[union-attr]


def test_infer_without_stats() -> None:
    a = attrs().set_stats(None).set_is_inference(True)
    SdpaFwdNode(a, ga()).validate_node()
    assert a.get_stats() is None
    assert a.get_o().get_dim() == [B, H, SQ, DV]  # type: ignore[union-attr]


def test_infer_does_not_fail_without_types() -> None:
    a = attrs()
    for t in a.inputs.values():
        t.set_data_type(DataType.NOT_SET)
    node = SdpaFwdNode(a, GraphAttributes())
    node.pre_validate_node()
    node.infer_properties_node()
    assert a.get_o().get_dim() == [B, H, SQ, DV]  # type: ignore[union-attr]


def test_post_validate_compute_type() -> None:
    a = attrs()
    node = SdpaFwdNode(a, GraphAttributes().set_intermediate_data_type(DataType.HALF))
    node.pre_validate_node()
    node.infer_properties_node()
    with pytest.raises(HipdnnError) as info:
        node.post_validate_node()
    assert info.value.code is NOT_SET
    assert info.value.message == "Node fwd does not have a compute_data_type set"


def test_post_validate_rejects_wrong_explicit_stats() -> None:
    a = attrs()
    redim(a.get_stats(), [B, H, SQ, 2])
    node = SdpaFwdNode(a, ga())
    node.pre_validate_node()
    node.infer_properties_node()
    with pytest.raises(HipdnnError) as info:
        node.post_validate_node()
    assert info.value.code is INVALID and "Stats" in info.value.message


# ----- robustness: the node lifecycle raises HipdnnError or passes, nothing else -----
_FWD_SETTERS = [
    "set_q",
    "set_k",
    "set_v",
    "set_o",
    "set_stats",
    "set_attn_scale",
    "set_bias",
    "set_dropout_mask",
    "set_seq_len_q",
    "set_seq_len_kv",
]

_MODES = st.sampled_from(["coherent"] * 12 + ["random", "empty", "missing"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.lists(st.integers(1, 3), min_size=5, max_size=5),
    slots=st.lists(
        st.tuples(_MODES, st.lists(st.integers(-2, 4), max_size=6), st.booleans()),
        min_size=len(_FWD_SETTERS),
        max_size=len(_FWD_SETTERS),
    ),
    flags=st.lists(st.booleans(), min_size=2, max_size=2),
)
def test_node_lifecycle_raises_only_hipdnn_error(
    base: list[int], slots: list[tuple[str, list[int], bool]], flags: list[bool]
) -> None:
    b, h, sq, skv, d = base
    coherent = {
        "set_q": [b, h, sq, d],
        "set_k": [b, h, skv, d],
        "set_v": [b, h, skv, d],
        "set_o": [],
        "set_stats": [],
        "set_attn_scale": [1],
        "set_bias": [1, h, sq, skv],
        "set_dropout_mask": [b, 1, sq, skv],
        "set_seq_len_q": [b, 1, 1, 1],
        "set_seq_len_kv": [b, 1, 1, 1],
    }
    a = SdpaAttributes().set_padding_mask(flags[0]).set_generate_stats(flags[1])
    for setter, (mode, random_dims, use) in zip(_FWD_SETTERS, slots, strict=True):
        if mode == "missing" or (setter not in ("set_q", "set_k", "set_v", "set_o") and not use):
            continue
        dims = {"coherent": coherent[setter], "random": random_dims, "empty": []}[mode]
        t = TensorAttributes(name="t", dim=dims, stride=generate_strides(dims))
        if setter.startswith("set_seq_len"):
            t.set_data_type(DataType.INT32)
        if setter == "set_attn_scale":
            t.set_is_pass_by_value(True)
        getattr(a, setter)(t)
    try:
        SdpaFwdNode(a, ga()).validate_node()
    except HipdnnError as err:
        assert err.code in (INVALID, NOT_SET) and err.message

"""Spec §3–§5: GraphAttributes, SdpaBackwardAttributes and SdpaAttributes (slots, setters, flags,
dropout forms, unsupported setters)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hipdnn_graph import (
    DataType,
    DiagonalAlignment,
    ErrorCode,
    GraphAttributes,
    HipdnnError,
    SdpaAttributes,
    SdpaBackwardAttributes,
    TensorAttributes,
)

INVALID = ErrorCode.INVALID_VALUE


def t(name: str = "") -> TensorAttributes:
    return TensorAttributes().set_name(name)


# ----- GraphAttributes -----
def test_graph_attributes_defaults() -> None:
    ga = GraphAttributes()
    assert ga.get_name() == ""
    assert ga.get_io_data_type() is DataType.NOT_SET
    assert ga.get_intermediate_data_type() is DataType.NOT_SET
    assert ga.get_compute_data_type() is DataType.NOT_SET


def test_graph_attributes_setters_chain() -> None:
    ga = GraphAttributes()
    same = (
        ga.set_name("g")
        .set_io_data_type(DataType.HALF)
        .set_intermediate_data_type(DataType.FLOAT)
        .set_compute_data_type(DataType.DOUBLE)
    )
    assert same is ga
    assert ga.get_name() == "g"
    assert ga.get_io_data_type() is DataType.HALF
    assert ga.get_intermediate_data_type() is DataType.FLOAT
    assert ga.get_compute_data_type() is DataType.DOUBLE


@pytest.mark.parametrize(
    "setter", ["set_io_data_type", "set_intermediate_data_type", "set_compute_data_type"]
)
@pytest.mark.parametrize("bad", [99, "HALF", None])
def test_graph_attributes_bad_data_type(setter: str, bad: Any) -> None:
    with pytest.raises(HipdnnError) as info:
        getattr(GraphAttributes(), setter)(bad)
    assert info.value.code is INVALID


# ----- slot enums in hipDNN order -----
def test_backward_input_names_order() -> None:
    names = [m.name for m in sorted(SdpaBackwardAttributes.InputNames, key=int)]
    assert names == [
        "Q",
        "K",
        "V",
        "O",
        "dO",
        "Stats",
        "Attn_scale",
        "Bias",
        "SEQ_LEN_Q",
        "SEQ_LEN_KV",
        "Seed",
        "Offset",
        "Dropout_mask",
        "Dropout_scale",
        "Dropout_scale_inv",
    ]
    assert [int(m) for m in sorted(SdpaBackwardAttributes.InputNames, key=int)] == list(range(15))


def test_backward_output_names_order() -> None:
    out = SdpaBackwardAttributes.OutputNames
    assert [(m.name, int(m)) for m in out] == [("dQ", 0), ("dK", 1), ("dV", 2), ("dBias", 3)]


def test_forward_slot_names_order() -> None:
    ins = [m.name for m in sorted(SdpaAttributes.InputNames, key=int)]
    assert ins[:11] == [
        "Q",
        "K",
        "V",
        "Attn_scale",
        "Bias",
        "SEQ_LEN_Q",
        "SEQ_LEN_KV",
        "Seed",
        "Offset",
        "Dropout_mask",
        "Dropout_scale",
    ]
    assert [m.name for m in sorted(SdpaAttributes.OutputNames, key=int)] == ["O", "Stats"]


# ----- backward defaults, setters, getters -----
def test_backward_defaults() -> None:
    a = SdpaBackwardAttributes()
    assert a.get_name() == ""
    assert a.get_compute_data_type() is DataType.NOT_SET
    assert (a.get_alibi_mask(), a.get_padding_mask()) == (False, False)
    assert (a.get_causal_mask(), a.get_causal_mask_bottom_right()) == (False, False)
    assert a.get_dropout_probability() is None
    assert a.get_attn_scale_value() is None
    assert a.get_diagonal_band_left_bound() is None
    assert a.get_diagonal_band_right_bound() is None
    assert a.get_diagonal_alignment() is DiagonalAlignment.TOP_LEFT
    assert a.has_unsupported_usage() is False
    assert a.get_unsupported_reason() == ""


BWD_TENSOR_SLOTS = [
    ("q", "Q", True),
    ("k", "K", True),
    ("v", "V", True),
    ("o", "O", True),
    ("do", "dO", True),
    ("stats", "Stats", True),
    ("attn_scale", "Attn_scale", True),
    ("bias", "Bias", True),
    ("seq_len_q", "SEQ_LEN_Q", True),
    ("seq_len_kv", "SEQ_LEN_KV", True),
    ("seed", "Seed", True),
    ("offset", "Offset", True),
    ("dropout_mask", "Dropout_mask", True),
    ("dropout_scale", "Dropout_scale", True),
    ("dropout_scale_inv", "Dropout_scale_inv", True),
    ("dq", "dQ", False),
    ("dk", "dK", False),
    ("dv", "dV", False),
    ("dbias", "dBias", False),
]


@pytest.mark.parametrize(("suffix", "slot", "is_input"), BWD_TENSOR_SLOTS)
def test_backward_tensor_setters_and_getters(suffix: str, slot: str, is_input: bool) -> None:
    a = SdpaBackwardAttributes()
    x = t(slot)
    assert getattr(a, f"get_{suffix}")() is None
    assert getattr(a, f"set_{suffix}")(x) is a
    assert getattr(a, f"get_{suffix}")() is x
    if is_input:
        assert a.inputs[SdpaBackwardAttributes.InputNames[slot]] is x
        assert not a.outputs
    else:
        assert a.outputs[SdpaBackwardAttributes.OutputNames[slot]] is x
        assert not a.inputs


FWD_TENSOR_SLOTS = [
    ("q", "Q", True),
    ("k", "K", True),
    ("v", "V", True),
    ("attn_scale", "Attn_scale", True),
    ("bias", "Bias", True),
    ("seq_len_q", "SEQ_LEN_Q", True),
    ("seq_len_kv", "SEQ_LEN_KV", True),
    ("seed", "Seed", True),
    ("offset", "Offset", True),
    ("dropout_mask", "Dropout_mask", True),
    ("dropout_scale", "Dropout_scale", True),
    ("o", "O", False),
    ("stats", "Stats", False),
]


@pytest.mark.parametrize(("suffix", "slot", "is_input"), FWD_TENSOR_SLOTS)
def test_forward_tensor_setters_and_getters(suffix: str, slot: str, is_input: bool) -> None:
    a = SdpaAttributes()
    x = t(slot)
    assert getattr(a, f"set_{suffix}")(x) is a
    assert getattr(a, f"get_{suffix}")() is x
    where = a.inputs if is_input else a.outputs
    enum = SdpaAttributes.InputNames if is_input else SdpaAttributes.OutputNames
    assert where[enum[slot]] is x


@pytest.mark.parametrize("cls", [SdpaBackwardAttributes, SdpaAttributes])
def test_slot_setter_rejects_non_tensor(cls: type) -> None:
    with pytest.raises(HipdnnError) as info:
        cls().set_q("not a tensor")
    assert info.value.code is INVALID
    with pytest.raises(HipdnnError) as info:
        cls().set_bias(3)
    assert info.value.code is INVALID


@pytest.mark.parametrize("cls", [SdpaBackwardAttributes, SdpaAttributes])
@pytest.mark.parametrize(
    ("setter", "getter"),
    [
        ("set_alibi_mask", "get_alibi_mask"),
        ("set_padding_mask", "get_padding_mask"),
        ("set_causal_mask", "get_causal_mask"),
        ("set_causal_mask_bottom_right", "get_causal_mask_bottom_right"),
    ],
)
def test_flag_setters(cls: type, setter: str, getter: str) -> None:
    a = cls()
    assert getattr(a, setter)(True) is a
    assert getattr(a, getter)() is True
    getattr(a, setter)(False)
    assert getattr(a, getter)() is False


@pytest.mark.parametrize("cls", [SdpaBackwardAttributes, SdpaAttributes])
def test_bounds_window_alignment(cls: type) -> None:
    a = cls().set_diagonal_band_left_bound(5).set_diagonal_band_right_bound(0)
    assert (a.get_diagonal_band_left_bound(), a.get_diagonal_band_right_bound()) == (5, 0)
    assert a.set_sliding_window_length(9) is a
    assert a.get_diagonal_band_left_bound() == 9
    assert a.get_diagonal_band_right_bound() == 0
    assert a.set_diagonal_alignment(DiagonalAlignment.BOTTOM_RIGHT) is a
    assert a.get_diagonal_alignment() is DiagonalAlignment.BOTTOM_RIGHT
    a.set_diagonal_alignment(0)
    assert a.get_diagonal_alignment() is DiagonalAlignment.TOP_LEFT


@pytest.mark.parametrize("cls", [SdpaBackwardAttributes, SdpaAttributes])
def test_attn_scale_float_sets_value_not_tensor(cls: type) -> None:
    a = cls().set_attn_scale(0.125)
    assert a.get_attn_scale_value() == 0.125
    assert a.get_attn_scale() is None
    scale = t("scale")
    a2 = cls().set_attn_scale(scale)
    assert a2.get_attn_scale() is scale
    assert a2.get_attn_scale_value() is None


@pytest.mark.parametrize("cls", [SdpaBackwardAttributes, SdpaAttributes])
@pytest.mark.parametrize("value", [np.float32(0.25), np.float64(0.25), np.float16(0.25), 1])
def test_attn_scale_accepts_real_scalars(cls: type, value: Any) -> None:
    a = cls().set_attn_scale(value)
    assert a.get_attn_scale_value() == pytest.approx(float(value))
    assert type(a.get_attn_scale_value()) is float


@pytest.mark.parametrize("cls", [SdpaBackwardAttributes, SdpaAttributes])
def test_name_and_compute_type(cls: type) -> None:
    a = cls()
    assert a.set_name("n").set_compute_data_type(DataType.FLOAT) is a
    assert a.get_name() == "n"
    assert a.get_compute_data_type() is DataType.FLOAT


@pytest.mark.parametrize("cls", [SdpaBackwardAttributes, SdpaAttributes])
@pytest.mark.parametrize(
    "call",
    [
        lambda a: a.set_name(1),
        lambda a: a.set_compute_data_type(99),
        lambda a: a.set_compute_data_type("FLOAT"),
        lambda a: a.set_attn_scale("0.1"),
        lambda a: a.set_attn_scale(True),
        lambda a: a.set_diagonal_alignment(5),
        lambda a: a.set_diagonal_band_left_bound("3"),
        lambda a: a.set_diagonal_band_right_bound(1.5),
        lambda a: a.set_sliding_window_length("w"),
        lambda a: a.set_seq_len_q([1]),
    ],
    ids=[
        "name_int",
        "compute_99",
        "compute_str",
        "scale_str",
        "scale_bool",
        "align_5",
        "left_str",
        "right_float",
        "window_str",
        "seq_len_list",
    ],
)
def test_bad_attribute_types_raise_invalid_value(cls: type, call: Any) -> None:
    with pytest.raises(HipdnnError) as info:
        call(cls())
    assert info.value.code is INVALID


# ----- the two set_dropout forms -----
def test_backward_dropout_philox_form() -> None:
    seed, offset = t("seed"), t("offset")
    a = SdpaBackwardAttributes()
    assert a.set_dropout(0.1, seed, offset) is a
    assert a.get_dropout_probability() == pytest.approx(0.1)
    assert a.get_seed() is seed and a.get_offset() is offset
    assert a.get_dropout_mask() is None and a.get_dropout_scale() is None
    assert a.get_dropout_scale_inv() is None


def test_backward_dropout_mask_form() -> None:
    mask, scale, scale_inv = t("mask"), t("scale"), t("scale_inv")
    a = SdpaBackwardAttributes()
    assert a.set_dropout(mask, scale, scale_inv) is a
    assert a.get_dropout_mask() is mask
    assert a.get_dropout_scale() is scale
    assert a.get_dropout_scale_inv() is scale_inv
    assert a.get_dropout_probability() is None
    assert a.get_seed() is None and a.get_offset() is None


def test_forward_dropout_philox_form() -> None:
    seed, offset = t("seed"), t("offset")
    a = SdpaAttributes()
    assert a.set_dropout(0.2, seed, offset) is a
    assert a.get_dropout_probability() == pytest.approx(0.2)
    assert a.get_seed() is seed and a.get_offset() is offset


def test_forward_dropout_mask_form_takes_two_tensors_only() -> None:
    with pytest.raises(HipdnnError) as info:
        SdpaAttributes().set_dropout(t("mask"), t("scale"), t("scale_inv"))
    assert info.value.code is INVALID


def test_forward_dropout_mask_form() -> None:
    mask, scale = t("mask"), t("scale")
    a = SdpaAttributes()
    assert a.set_dropout(mask, scale) is a
    assert a.get_dropout_mask() is mask and a.get_dropout_scale() is scale
    assert a.get_dropout_probability() is None


@pytest.mark.parametrize("cls", [SdpaBackwardAttributes, SdpaAttributes])
def test_dropout_bad_probability_type(cls: type) -> None:
    with pytest.raises(HipdnnError) as info:
        cls().set_dropout("p", t("seed"), t("offset"))
    assert info.value.code is INVALID


# ----- forward-only members -----
def test_generate_stats_and_is_inference() -> None:
    a = SdpaAttributes()
    assert a.get_generate_stats() is None
    assert a.set_generate_stats(True) is a and a.get_generate_stats() is True
    assert a.set_is_inference(True) is a and a.get_generate_stats() is False
    assert a.set_is_inference(False).get_generate_stats() is True


# ----- unsupported setters (first recorded reason wins) -----
UNSUPPORTED_BWD = [
    ("set_score_mod", object(), "SDPA score modifier is unsupported by hipDNN"),
    ("set_score_mod_bprop", object(), "SDPA score-modifier backprop is unsupported by hipDNN"),
    ("set_max_total_seq_len_q", 128, "SDPA max_total_seq_len_q is unsupported by hipDNN"),
    ("set_max_total_seq_len_kv", 128, "SDPA max_total_seq_len_kv is unsupported by hipDNN"),
    ("set_deterministic_algorithm", True, "Deterministic SDPA backward is unsupported by hipDNN"),
    ("set_rng_dump", t("dump"), "SDPA backward RNG dump is unsupported by hipDNN"),
    ("set_sink_token", t("sink"), "SDPA backward sink token is unsupported by hipDNN"),
    ("set_dsink_token", t("dsink"), "SDPA backward sink-token gradient is unsupported by hipDNN"),
]


@pytest.mark.parametrize(
    ("setter", "arg", "reason"), UNSUPPORTED_BWD, ids=[case[0] for case in UNSUPPORTED_BWD]
)
def test_unsupported_setter_records_reason(setter: str, arg: Any, reason: str) -> None:
    a = SdpaBackwardAttributes()
    assert getattr(a, setter)(arg) is a
    assert a.has_unsupported_usage() is True
    assert a.get_unsupported_reason() == reason


@pytest.mark.parametrize("first", range(len(UNSUPPORTED_BWD)))
def test_unsupported_first_reason_wins(first: int) -> None:
    a = SdpaBackwardAttributes()
    setter, arg, reason = UNSUPPORTED_BWD[first]
    getattr(a, setter)(arg)
    for other_setter, other_arg, _ in UNSUPPORTED_BWD:
        getattr(a, other_setter)(other_arg)
    assert a.get_unsupported_reason() == reason


def test_deterministic_false_records_nothing() -> None:
    a = SdpaBackwardAttributes()
    assert a.set_deterministic_algorithm(False) is a
    assert a.has_unsupported_usage() is False
    assert a.get_unsupported_reason() == ""
    # and does not clear an earlier reason
    a.set_rng_dump(t()).set_deterministic_algorithm(False)
    assert a.get_unsupported_reason() == "SDPA backward RNG dump is unsupported by hipDNN"


@pytest.mark.parametrize(
    ("setter", "arg"),
    [
        ("set_score_mod", object()),
        ("set_max_total_seq_len_q", 8),
        ("set_max_total_seq_len_kv", 8),
        ("set_paged_attention_k_table", t()),
        ("set_paged_attention_v_table", t()),
        ("set_paged_attention_max_seq_len_kv", 8),
        ("set_sink_token", t()),
    ],
)
def test_forward_unsupported_setters_record(setter: str, arg: Any) -> None:
    a = SdpaAttributes()
    assert getattr(a, setter)(arg) is a
    assert a.has_unsupported_usage()
    assert "unsupported by hipDNN" in a.get_unsupported_reason()


def test_forward_unsupported_first_wins() -> None:
    a = SdpaAttributes().set_max_total_seq_len_q(4).set_score_mod(None)
    assert a.get_unsupported_reason() == "SDPA max_total_seq_len_q is unsupported by hipDNN"

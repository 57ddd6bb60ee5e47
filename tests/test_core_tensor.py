"""Spec §2: TensorAttributes fields, setters, validate() order, fill_from_context, set_value."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from hipdnn_graph import (
    DataType,
    ErrorCode,
    GraphAttributes,
    HipdnnError,
    TensorAttributes,
    generate_strides,
)

INVALID = ErrorCode.INVALID_VALUE
NOT_SET = ErrorCode.ATTRIBUTE_NOT_SET


def good(name: str = "T") -> TensorAttributes:
    """A tensor that passes validate()."""
    return (
        TensorAttributes()
        .set_name(name)
        .set_data_type(DataType.HALF)
        .set_dim([2, 3, 4])
        .set_stride([12, 4, 1])
    )


def expect(fn: Any, code: ErrorCode, message: str) -> HipdnnError:
    with pytest.raises(HipdnnError) as info:
        fn()
    err = info.value
    assert err.code is code
    assert err.message == message
    assert str(err) == message
    return err


# ----- defaults, setters, getters -----
def test_defaults() -> None:
    t = TensorAttributes()
    assert t.has_uid() is False
    assert t.get_uid() == 0
    assert t.get_name() == ""
    assert t.get_data_type() is DataType.NOT_SET
    assert t.get_dim() == [] and t.get_stride() == []
    assert t.get_is_virtual() is False
    assert t.get_is_pass_by_value() is False
    assert t.get_value() is None
    assert t.get_alignment() == 16


def test_setters_chain_and_getters_read_back() -> None:
    t = TensorAttributes()
    same = (
        t.set_uid(7)
        .set_name("X")
        .set_data_type(DataType.BFLOAT16)
        .set_dim([1, 2])
        .set_stride([2, 1])
        .set_is_virtual(True)
        .set_alignment(32)
    )
    assert same is t
    assert (t.get_uid(), t.get_name(), t.get_data_type()) == (7, "X", DataType.BFLOAT16)
    assert (t.get_dim(), t.get_stride(), t.get_is_virtual(), t.get_alignment()) == (
        [1, 2],
        [2, 1],
        True,
        32,
    )


def test_keyword_construction_matches_setters() -> None:
    a = TensorAttributes(name="Q", dim=[1, 2, 3, 4], stride=[24, 12, 4, 1], data_type=DataType.HALF)
    b = (
        TensorAttributes()
        .set_name("Q")
        .set_dim([1, 2, 3, 4])
        .set_stride([24, 12, 4, 1])
        .set_data_type(DataType.HALF)
    )
    assert a.logically_equals(b) and a.get_name() == b.get_name()


def test_set_data_type_accepts_plain_int() -> None:
    assert TensorAttributes().set_data_type(3).get_data_type() is DataType.BFLOAT16


def test_set_dim_accepts_tuple_and_numpy_ints() -> None:
    t = TensorAttributes().set_dim((np.int64(2), 3)).set_stride(np.array([3, 1]))
    assert t.get_dim() == [2, 3] and t.get_stride() == [3, 1]
    assert all(type(x) is int for x in t.get_dim() + t.get_stride())


# ----- uid helpers -----
def test_uid_helpers() -> None:
    t = TensorAttributes()
    assert not t.has_uid() and t.get_uid() == 0
    assert t.set_uid(0).has_uid()  # uid 0 is a set uid, distinct from "unset"
    assert t.get_uid() == 0
    t.set_uid(42)
    assert t.has_uid() and t.get_uid() == 42
    assert t.clear_uid() is t
    assert not t.has_uid() and t.get_uid() == 0


# ----- set_output / virtual -----
@pytest.mark.parametrize("output", [True, False])
def test_set_output_is_not_virtual(output: bool) -> None:
    t = TensorAttributes().set_is_virtual(output)
    assert t.set_output(output) is t
    assert t.get_is_virtual() is (not output)


# ----- volume -----
@pytest.mark.parametrize(
    ("dims", "volume"), [([2, 8, 16, 64], 16384), ([1], 1), ([5], 5), ([3, 1, 7], 21)]
)
def test_get_volume_is_product_of_dims(dims: list[int], volume: int) -> None:
    assert TensorAttributes().set_dim(dims).get_volume() == volume


# ----- strides -----
@pytest.mark.parametrize(
    ("dims", "strides"),
    [
        ((2, 8, 16, 64), [8192, 1024, 64, 1]),
        ([2, 8, 1024, 64], [524288, 65536, 64, 1]),
        ([7], [1]),
        ([3, 5], [5, 1]),
        ([4, 1, 1, 1], [1, 1, 1, 1]),
    ],
)
def test_generate_strides_row_major(dims: Any, strides: list[int]) -> None:
    assert generate_strides(dims) == strides


# ----- pass by value -----
def test_runtime_pass_by_value_flag() -> None:
    t = TensorAttributes()
    assert t.set_is_pass_by_value(True) is t
    assert t.get_is_pass_by_value() is True
    assert t.get_value() is None
    t.set_is_pass_by_value(False)
    assert t.get_is_pass_by_value() is False


def test_value_makes_pass_by_value() -> None:
    t = TensorAttributes().set_value(0.5)
    assert t.get_is_pass_by_value() is True
    assert t.get_value() == 0.5


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (0.125, DataType.FLOAT),
        (3, DataType.INT32),
        (-7, DataType.INT32),
        (True, DataType.BOOLEAN),
        (False, DataType.BOOLEAN),
        (np.float64(0.5), DataType.DOUBLE),
        (np.float32(0.5), DataType.FLOAT),
        (np.float16(0.5), DataType.HALF),
        (ml_dtypes.bfloat16(0.5), DataType.BFLOAT16),
        (np.int32(4), DataType.INT32),
        (np.int64(4), DataType.INT64),
        (np.bool_(True), DataType.BOOLEAN),
    ],
    ids=lambda x: type(x).__name__ if not isinstance(x, DataType) else x.name,
)
def test_set_value_types_dims_strides(value: Any, dtype: DataType) -> None:
    t = TensorAttributes().set_dim([4, 4]).set_stride([4, 1])
    assert t.set_value(value) is t
    assert t.get_data_type() is dtype
    assert t.get_dim() == [1]
    assert t.get_stride() == [1]
    assert t.get_is_pass_by_value() is True
    assert float(t.get_value()) == float(value)  # type: ignore[arg-type]
    t.validate()


def test_set_value_bool_is_not_int() -> None:
    t = TensorAttributes().set_value(True)
    assert t.get_value() is True


# ids are stable across processes (pytest-xdist's workers must collect the same ids)
@pytest.mark.parametrize(
    "bad", [None, "0.5", 1 + 2j, [1.0], object()], ids=["None", "str", "complex", "list", "object"]
)
def test_set_value_rejects_non_scalars(bad: Any) -> None:
    with pytest.raises(HipdnnError) as info:
        TensorAttributes().set_value(bad)
    assert info.value.code is INVALID


# ----- fill_from_context -----
def _ga() -> GraphAttributes:
    return (
        GraphAttributes()
        .set_io_data_type(DataType.BFLOAT16)
        .set_intermediate_data_type(DataType.FLOAT)
        .set_compute_data_type(DataType.DOUBLE)
    )


def test_fill_from_context_non_virtual_takes_io_type() -> None:
    t = TensorAttributes()
    t.fill_from_context(_ga())
    assert t.get_data_type() is DataType.BFLOAT16


def test_fill_from_context_virtual_takes_intermediate_type() -> None:
    t = TensorAttributes().set_is_virtual(True)
    t.fill_from_context(_ga())
    assert t.get_data_type() is DataType.FLOAT


@pytest.mark.parametrize("virtual", [True, False])
def test_fill_from_context_keeps_explicit_type(virtual: bool) -> None:
    t = TensorAttributes().set_data_type(DataType.INT32).set_is_virtual(virtual)
    t.fill_from_context(_ga())
    assert t.get_data_type() is DataType.INT32


def test_fill_from_context_fills_nothing_else() -> None:
    t = TensorAttributes().set_name("X")
    t.fill_from_context(_ga())
    assert t.get_dim() == [] and t.get_stride() == []
    assert t.get_name() == "X" and not t.has_uid()
    assert t.get_is_virtual() is False and t.get_alignment() == 16


def test_fill_from_context_with_unset_graph_types_leaves_not_set() -> None:
    t = TensorAttributes()
    t.fill_from_context(GraphAttributes())
    assert t.get_data_type() is DataType.NOT_SET


# ----- validate(): the seven checks, in order -----
def test_valid_tensor_passes() -> None:
    good().validate()


def test_rule1_data_type_not_set() -> None:
    t = good("Q").set_data_type(DataType.NOT_SET)
    expect(t.validate, NOT_SET, "Tensor Q does not have a data type set")


def test_rule2_virtual_and_runtime_pass_by_value() -> None:
    t = good("S").set_is_virtual(True).set_is_pass_by_value(True)
    expect(t.validate, INVALID, "Tensor S cannot be virtual and runtime pass by value")


def test_rule3_virtual_and_value() -> None:
    t = TensorAttributes().set_name("S").set_value(2.0).set_is_virtual(True)
    expect(t.validate, INVALID, "Tensor S cannot be virtual and pass by value")


def test_rule4_dims_strides_sizes_differ() -> None:
    t = good("K").set_stride([1])
    expect(t.validate, INVALID, "Tensor K dims and strides have different sizes")


def test_rule5_dims_empty() -> None:
    t = TensorAttributes().set_name("V").set_data_type(DataType.FLOAT)
    expect(t.validate, NOT_SET, "Tensor V dims must be non-empty")


@pytest.mark.parametrize("dims", [[0, 2], [2, -1], [-3]])
def test_rule6_non_positive_dims(dims: list[int]) -> None:
    t = good("O").set_dim(dims).set_stride([1] * len(dims))
    expect(t.validate, INVALID, "Tensor O must have only positive dimensions")


@pytest.mark.parametrize("alignment", [0, -16])
def test_rule7_alignment(alignment: int) -> None:
    t = good("dO").set_alignment(alignment)
    expect(t.validate, INVALID, "Tensor dO alignment must be >= 1")


def test_alignment_one_is_fine() -> None:
    good().set_alignment(1).validate()


def test_unnamed_tensor_message_has_empty_name() -> None:
    t = TensorAttributes()
    expect(t.validate, NOT_SET, "Tensor  does not have a data type set")


# A tensor that breaks several rules reports the earliest one.
@pytest.mark.parametrize(
    ("build", "code", "message"),
    [
        (  # 1 beats 2..7
            lambda: TensorAttributes(name="A", is_virtual=True, is_pass_by_value=True, alignment=0),
            NOT_SET,
            "Tensor A does not have a data type set",
        ),
        (  # 2 beats 3 (runtime flag and a value, virtual)
            lambda: (
                TensorAttributes(name="A")
                .set_value(1.0)
                .set_is_pass_by_value(True)
                .set_is_virtual(True)
            ),
            INVALID,
            "Tensor A cannot be virtual and runtime pass by value",
        ),
        (  # 3 beats 4
            lambda: TensorAttributes(name="A").set_value(1.0).set_stride([]).set_is_virtual(True),
            INVALID,
            "Tensor A cannot be virtual and pass by value",
        ),
        (  # 4 beats 5 (empty dims, one stride)
            lambda: TensorAttributes(name="A", data_type=DataType.FLOAT, stride=[1]),
            INVALID,
            "Tensor A dims and strides have different sizes",
        ),
        (  # 4 beats 6
            lambda: TensorAttributes(name="A", data_type=DataType.FLOAT, dim=[0, 1], stride=[1]),
            INVALID,
            "Tensor A dims and strides have different sizes",
        ),
        (  # 5 beats 7
            lambda: TensorAttributes(name="A", data_type=DataType.FLOAT, alignment=0),
            NOT_SET,
            "Tensor A dims must be non-empty",
        ),
        (  # 6 beats 7
            lambda: TensorAttributes(
                name="A", data_type=DataType.FLOAT, dim=[0], stride=[1], alignment=0
            ),
            INVALID,
            "Tensor A must have only positive dimensions",
        ),
    ],
    ids=["1>2", "2>3", "3>4", "4>5", "4>6", "5>7", "6>7"],
)
def test_validate_reports_earliest_rule(build: Any, code: ErrorCode, message: str) -> None:
    expect(build().validate, code, message)


def test_non_virtual_pass_by_value_is_fine() -> None:
    TensorAttributes(name="s").set_value(1.0).validate()
    TensorAttributes(name="s", data_type=DataType.FLOAT, dim=[1], stride=[1]).set_is_pass_by_value(
        True
    ).validate()


# ----- identity semantics -----
def test_equality_and_hash_are_by_identity() -> None:
    a, b = good("X"), good("X")
    assert a == a and a != b
    assert hash(a) == hash(a)
    assert len({a, b}) == 2
    assert {a: 1}[a] == 1 and b not in {a: 1}


def test_hash_stable_under_mutation() -> None:
    a = good()
    h = hash(a)
    s = {a}
    a.set_dim([9]).set_stride([1]).set_name("renamed")
    assert hash(a) == h and a in s


def test_logically_equals_ignores_name_and_uid() -> None:
    a, b = good("A").set_uid(1), good("B").set_uid(2)
    assert a.logically_equals(b) and b.logically_equals(a)


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.set_data_type(DataType.FLOAT),
        lambda t: t.set_dim([2, 3, 5]),
        lambda t: t.set_stride([1, 2, 6]),
        lambda t: t.set_is_virtual(True),
        lambda t: t.set_is_pass_by_value(True),
        lambda t: t.set_value(1.0),
    ],
    ids=["dtype", "dims", "strides", "virtual", "runtime_pbv", "value"],
)
def test_logically_equals_sees_content(change: Any) -> None:
    a, b = good(), good()
    change(b)
    assert not a.logically_equals(b)


def test_logically_equals_compares_values() -> None:
    assert TensorAttributes().set_value(1.0).logically_equals(TensorAttributes().set_value(1.0))
    assert not TensorAttributes().set_value(1.0).logically_equals(TensorAttributes().set_value(2.0))


# ----- bad keyword / setter types raise HipdnnError(INVALID_VALUE) -----
@pytest.mark.parametrize(
    "kwargs",
    [
        {"dim": "abc"},
        {"dim": [1, "x"]},
        {"stride": 5},
        {"data_type": 99},
        {"data_type": "FLOAT_PLEASE"},
        {"name": 3},
        {"uid": "one"},
        {"alignment": "sixteen"},
        {"is_virtual": "maybe"},
        {"no_such_field": 1},
    ],
    ids=lambda kw: next(iter(kw)),
)
def test_bad_keyword_types_raise_invalid_value(kwargs: dict[str, Any]) -> None:
    with pytest.raises(HipdnnError) as info:
        TensorAttributes(**kwargs)
    assert info.value.code is INVALID


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.set_dim("abc"),
        lambda t: t.set_dim([1.5, 2]),
        lambda t: t.set_dim(None),
        lambda t: t.set_stride([1, None]),
        lambda t: t.set_data_type(99),
        lambda t: t.set_data_type("HALF"),
        lambda t: t.set_data_type(None),
        lambda t: t.set_name(5),
        lambda t: t.set_uid("1"),
        lambda t: t.set_uid(None),
        lambda t: t.set_uid(1.5),
        lambda t: t.set_alignment("16"),
        lambda t: t.set_alignment(None),
    ],
    ids=[
        "dim_str",
        "dim_float",
        "dim_none",
        "stride_none_elem",
        "dtype_99",
        "dtype_str",
        "dtype_none",
        "name_int",
        "uid_str",
        "uid_none",
        "uid_float",
        "alignment_str",
        "alignment_none",
    ],
)
def test_bad_setter_types_raise_invalid_value(call: Any) -> None:
    with pytest.raises(HipdnnError) as info:
        call(TensorAttributes())
    assert info.value.code is INVALID

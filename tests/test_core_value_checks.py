"""Issue 11 item 6: nonsense values are refused where they are given, with a clear INVALID_VALUE,
and leave the object as it was."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sdpa_graph_cases import SHAPE, backward, new_graph

import hipdnn_graph as hg
from hipdnn_graph.graph.execution import NO_OUTPUT_MESSAGE

INVALID = hg.ErrorCode.INVALID_VALUE


def _refused(call: Callable[[], Any]) -> str:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    assert info.value.code == INVALID
    return info.value.message


# ----- attention scales --------------------------------------------------------------------------

BAD_SCALES = [math.nan, math.inf, -math.inf, 1e300, -1e39, 10**400, np.float64(1e39)]


def _short(value: Any) -> str:
    return repr(value)[:12]


@pytest.mark.parametrize("scale", BAD_SCALES, ids=_short)
def test_setter_refuses_non_finite_or_overflowing_scales(scale: Any) -> None:
    a = hg.SdpaBackwardAttributes().set_attn_scale(0.5)
    message = _refused(lambda: a.set_attn_scale(scale))
    assert message.startswith("attn_scale must be a finite number that fits in float32, got ")
    assert a.get_attn_scale_value() == 0.5  # unchanged


@pytest.mark.parametrize("scale", BAD_SCALES, ids=_short)
def test_keywords_and_constructors_refuse_bad_scales(scale: Any) -> None:
    g = backward()
    q = g.tensors[0]
    _refused(lambda: g.sdpa(q, q, q, attn_scale=scale))
    _refused(lambda: hg.SdpaAttributes(attn_scale_value=scale))


def test_the_largest_float32_scale_is_accepted_and_stored_as_float32() -> None:
    top = float(np.finfo(np.float32).max)
    assert hg.SdpaAttributes().set_attn_scale(top).get_attn_scale_value() == top
    assert hg.SdpaAttributes().set_attn_scale(0.1).get_attn_scale_value() == float(np.float32(0.1))


def test_scale_message_for_1e300() -> None:
    message = _refused(lambda: hg.SdpaAttributes().set_attn_scale(1e300))
    assert message == "attn_scale must be a finite number that fits in float32, got 1e+300"


# ----- dropout probabilities ---------------------------------------------------------------------


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, math.nan, math.inf, 0.999999999], ids=repr)
def test_dropout_probability_outside_0_1_is_refused(p: float) -> None:
    g = new_graph()
    seed, offset = (g.tensor(name=n, dim=[1], data_type=hg.DataType.INT64) for n in "so")
    a = hg.SdpaAttributes()
    message = _refused(lambda: a.set_dropout(p, seed, offset))
    assert message.startswith(f"dropout probability must be in [0, 1), got {p!r}")
    assert a.get_dropout_probability() is None and a.get_seed() is None  # unchanged


def test_rounding_to_float32_is_named_in_the_message() -> None:
    message = _refused(lambda: hg.SdpaBackwardAttributes(dropout_probability=0.999999999))
    assert message == "dropout probability must be in [0, 1), got 0.999999999 (1.0 as float32)"


@pytest.mark.parametrize("p", [0.0, 0.1, 0.99])
def test_dropout_probability_inside_0_1_is_accepted(p: float) -> None:
    assert hg.SdpaAttributes(dropout_probability=p).dropout_probability == float(np.float32(p))


# ----- flags -------------------------------------------------------------------------------------

NOT_BOOLS = ["false", "True", 1, 0, None, 1.0, [True]]


@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
@pytest.mark.parametrize(
    "setter",
    ["set_causal_mask", "set_causal_mask_bottom_right", "set_alibi_mask", "set_padding_mask"],
)
def test_mask_flags_take_only_bools(setter: str, value: Any) -> None:
    a = hg.SdpaBackwardAttributes()
    message = _refused(lambda: getattr(a, setter)(value))
    assert message.endswith(f"must be a bool (True or False), got {type(value).__name__} {value!r}")
    assert not getattr(a, setter.replace("set_", "get_"))()


def test_use_causal_mask_false_as_a_string_is_refused() -> None:
    """The issue's case: the string "false" turned the mask on."""
    g = backward()
    q = g.tensors[0]
    message = _refused(lambda: g.sdpa(q, q, q, use_causal_mask="false"))
    assert message == "causal_mask must be a bool (True or False), got str 'false'"


@pytest.mark.parametrize("value", [True, False, np.bool_(True), np.bool_(False)], ids=repr)
def test_bools_and_numpy_bools_are_accepted(value: Any) -> None:
    a = hg.SdpaAttributes().set_causal_mask(value).set_generate_stats(value)
    assert a.get_causal_mask() is bool(value) and a.get_generate_stats() is bool(value)
    t = hg.TensorAttributes().set_output(value)
    assert t.get_is_virtual() is not bool(value)


@pytest.mark.parametrize(
    "call",
    [
        lambda: hg.SdpaAttributes().set_generate_stats("no"),
        lambda: hg.SdpaAttributes().set_is_inference(1),
        lambda: hg.SdpaBackwardAttributes().set_deterministic_algorithm("False"),
        lambda: hg.TensorAttributes().set_output("yes"),
        lambda: hg.TensorAttributes().set_is_virtual(1),
        lambda: hg.TensorAttributes().set_is_pass_by_value("true"),
        lambda: hg.TensorAttributes(is_virtual="false"),
        lambda: hg.TensorAttributes(is_pass_by_value=1),
        lambda: hg.SdpaAttributes(causal_mask="false"),
        lambda: hg.SdpaAttributes(generate_stats=0),
    ],
)
def test_other_flags_take_only_bools(call: Callable[[], Any]) -> None:
    assert "must be a bool (True or False)" in _refused(call)


# ----- integers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: hg.Graph().tensor(dim=[16.0]), "TensorAttributes dim must be a sequence of "),
        (lambda: hg.Graph().tensor(dim=[True, 2]), "TensorAttributes dim must be a sequence of "),
        (lambda: hg.Graph().tensor(stride=[1.0]), "TensorAttributes stride must be a sequence "),
        (lambda: hg.Graph().tensor(uid=True), "TensorAttributes uid must be an integer, got True"),
        (lambda: hg.Graph().tensor(uid=1.0), "TensorAttributes uid must be an integer, got 1.0"),
        (lambda: hg.Graph().tensor(alignment=False), "TensorAttributes alignment must be an "),
        (lambda: hg.TensorAttributes().set_uid(True), "Tensor uid must be an integer, got True"),
        (lambda: hg.TensorAttributes().set_dim([2.0]), "Tensor  dims must be a sequence of "),
        (lambda: hg.TensorAttributes().set_dim([np.True_]), "Tensor  dims must be a sequence "),
        (lambda: hg.SdpaAttributes().set_diagonal_band_left_bound(True), "diagonal_band_left_"),
        (lambda: hg.SdpaAttributes(right_bound=2.0), "right_bound must be an integer, got 2.0"),
        (lambda: hg.Graph(io_data_type=True), "Unknown data type True"),
        (lambda: hg.TensorAttributes().set_data_type(2.0), "Unknown data type 2.0"),
        (lambda: hg.TensorAttributes(value="1.5"), "TensorAttributes value must be a bool, int"),
    ],
)
def test_bools_floats_and_strings_are_not_integers(call: Callable[[], Any], message: str) -> None:
    assert _refused(call).startswith(message)


def test_numpy_integers_are_integers() -> None:
    t = hg.Graph().tensor(dim=np.array([1, 2, 3, 4]), uid=np.int64(5), alignment=np.int32(8))
    assert (t.get_dim(), t.get_stride(), t.get_uid(), t.get_alignment()) == (
        [1, 2, 3, 4],
        [24, 12, 4, 1],
        5,
        8,
    )
    assert all(type(d) is int for d in t.get_dim())


def test_a_failed_setter_leaves_the_tensor_as_it_was() -> None:
    t = hg.TensorAttributes().set_dim([1, 2]).set_uid(3)
    _refused(lambda: t.set_dim([1, 2.5]))
    _refused(lambda: t.set_uid(False))
    assert (t.get_dim(), t.get_uid()) == ([1, 2], 3)


# ----- constants ---------------------------------------------------------------------------------


def test_set_value_refuses_a_float_that_overflows_float32() -> None:
    t = hg.TensorAttributes(name="c")
    message = _refused(lambda: t.set_value(1e300))
    assert message == (
        "set_value(1e+300): the value overflows FLOAT (float32); "
        "pass np.float64(...) for a DOUBLE constant"
    )
    assert t.get_value() is None
    assert t.set_value(np.float64(1e300)).get_data_type() == hg.DataType.DOUBLE
    assert t.set_value(math.inf).get_value() == math.inf  # an explicit inf is kept


def test_set_value_refuses_an_int_outside_int64() -> None:
    message = _refused(lambda: hg.TensorAttributes().set_value(2**63))
    assert message == f"set_value({2**63}): the value does not fit in INT64"
    assert hg.TensorAttributes().set_value(2**63 - 1).get_data_type() == hg.DataType.INT64


# ----- preferred engine names --------------------------------------------------------------------


@pytest.mark.usefixtures("only_numpy")
def test_a_misspelled_engine_name_is_refused_listing_the_engines() -> None:
    g = hg.Graph()
    message = _refused(lambda: g.set_preferred_engine_id_ext("NUMPY_ENGINE"))
    assert message == (
        "Unknown engine name 'NUMPY_ENGINE'; registered engines: NUMPY_REFERENCE_ENGINE. "
        "Pass an engine id (hg.backend.engine_id(name)) to prefer an engine that is not "
        "registered here"
    )
    assert g.get_preferred_engine_id_ext() is None


@pytest.mark.usefixtures("only_numpy")
def test_an_engine_id_is_not_checked() -> None:
    unknown = hg.backend.engine_id("NOT_INSTALLED_ENGINE")
    assert hg.Graph().set_preferred_engine_id_ext(unknown).get_preferred_engine_id_ext() == unknown


def test_no_backend_registered_is_said() -> None:
    with hg.backend.isolated_registry(load_entry_points=False):
        message = _refused(lambda: hg.Graph().set_preferred_engine_id_ext("X"))
    assert "registered engines: none (no backend is registered)" in message


# ----- run() without outputs ---------------------------------------------------------------------


@pytest.mark.usefixtures("only_numpy")
def test_run_without_any_real_output_says_so() -> None:
    """The issue's case: forgetting set_output(True) made run() return {} without a word."""
    g = new_graph(io=hg.DataType.FLOAT)
    q, k, v = (g.tensor(name=n, dim=SHAPE) for n in "QKV")
    g.sdpa(q, k, v, generate_stats=False)  # O stays virtual
    g.build()
    x = np.ones(SHAPE, np.float32)
    message = _refused(lambda: g.run({q: x, k: x, v: x}))
    assert message == NO_OUTPUT_MESSAGE
    assert "set_output(True)" in message


@pytest.mark.usefixtures("only_numpy")
def test_run_with_an_output_still_returns_it() -> None:
    g = new_graph(io=hg.DataType.FLOAT)
    q, k, v = (g.tensor(name=n, dim=SHAPE) for n in "QKV")
    o, _ = g.sdpa(q, k, v, generate_stats=False)
    o.set_output(True)
    x = np.ones(SHAPE, np.float32)
    out = g.build().run({q: x, k: x, v: x})
    assert list(out) == [o] and np.allclose(out[o], 1.0)

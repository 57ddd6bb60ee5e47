"""RMSNormNode: hipDNN's rules, messages and inference (ports of hipDNN's TestRMSNormNode.cpp,
plus the exact messages and codes of RMSNormNode.hpp and detail/Utilities.hpp), the stride-order
helpers (ShapeUtilities.hpp) and the graph builder ``Graph.rmsnorm``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg
from hipdnn_graph.nodes.norm_rules import ordered_strides, stride_order

P = hg.NormFwdPhase
E = hg.ErrorCode


def _t(dim: list[int] | None = None, stride: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes(data_type=hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim).set_stride(stride or hg.generate_strides(dim))
    return t


def _eps() -> hg.TensorAttributes:
    return hg.TensorAttributes().set_value(1e-5)


def _attrs(
    x: list[int] | None = (2, 64, 32, 32),  # type: ignore[assignment]
    scale: list[int] | None = (1, 64, 32, 32),  # type: ignore[assignment]
    phase: hg.NormFwdPhase = P.TRAINING,
    **slots: hg.TensorAttributes,
) -> hg.RMSNormAttributes:
    a = hg.RMSNormAttributes().set_forward_phase(phase).set_y(slots.pop("y", _t()))
    a.set_x(_t(list(x)) if x is not None else _t()).set_epsilon(slots.pop("epsilon", _eps()))
    a.set_scale(_t(list(scale)) if scale is not None else _t())
    for name, tensor in slots.items():
        getattr(a, f"set_{name}")(tensor)
    return a


def _node(a: hg.RMSNormAttributes) -> hg.RMSNormNode:
    return hg.RMSNormNode(a, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


@pytest.mark.parametrize(
    ("scale", "bias"),
    [
        ([1, 64, 32, 32], [1, 64, 32, 32]),  # normalize over C, H, W
        ([1, 1, 32, 32], [1, 1, 32, 32]),  # over H, W
        ([1, 1, 1, 32], [1, 1, 1, 32]),  # over W
        ([1, 64, 32, 32], None),
    ],
)
def test_valid_scales_and_biases_pre_validate(scale: list[int], bias: list[int] | None) -> None:
    extra = {} if bias is None else {"bias": _t(bias)}
    _node(_attrs(scale=scale, **extra)).pre_validate_node()


def test_degenerate_and_5d_shapes_pre_validate() -> None:
    _node(_attrs([2, 1, 1, 1], [1, 1, 1, 1], bias=_t([1, 1, 1, 1]))).pre_validate_node()
    _node(_attrs([2, 64, 8, 8, 8], [1, 64, 8, 8, 8])).pre_validate_node()
    _node(_attrs([1, 256, 1, 1], [1, 256, 1, 1], P.INFERENCE)).pre_validate_node()
    _node(_attrs(inv_rms=_t([2, 1, 1, 1]))).pre_validate_node()  # the right stats shape


def test_missing_tensors_in_hipdnns_order() -> None:
    a = hg.RMSNormAttributes()
    messages = []
    for setter in ("set_x", "set_scale", "set_y", "set_epsilon"):
        messages.append(_error(_node(a).pre_validate_node))
        getattr(a, setter)(_t())
    assert [(m.code, m.message) for m in messages] == [
        (E.ATTRIBUTE_NOT_SET, f"RMSNormNode missing {what} for pre-validation")
        for what in ("x", "scale", "y", "epsilon")
    ]


@pytest.mark.parametrize(
    ("attrs", "code", "message"),
    [
        (lambda: _attrs([64], [1, 64]), E.INVALID_VALUE,
         "Input tensor (x) must have at least 2 dimensions, but has 1"),
        (lambda: _attrs(scale=[64]), E.INVALID_VALUE,
         "Scale tensor must have at least 2 dimensions, but has 1"),
        (lambda: _attrs(epsilon=_t()), E.ATTRIBUTE_NOT_SET, "Epsilon dimensions are not set"),
        (lambda: _attrs(epsilon=_t([2]).set_is_pass_by_value(True)), E.INVALID_VALUE,
         "Epsilon must be a scalar (single element), but has 2 elements"),
        (lambda: _attrs(epsilon=_t([1])), E.INVALID_VALUE,
         "Epsilon must be a pass-by-value tensor"),
        (lambda: _attrs(y=_t([2, 64, 16, 16])), E.INVALID_VALUE,
         "Input tensor (x) and Output tensor (y) dimension mismatch at index 2: 32 vs 16"),
        (lambda: _attrs(y=_t([2, 64, 32])), E.INVALID_VALUE,
         "Input tensor (x) and Output tensor (y) must have the same number of dimensions: "
         "4 vs 3"),
        (lambda: _attrs(scale=[1, 64, 32]), E.INVALID_VALUE, "Scale tensor must match input rank"),
        (lambda: _attrs(scale=[2, 64, 32, 32]), E.INVALID_VALUE,
         "Scale tensor batch dimension (index 0) must be 1, got 2"),
        (lambda: _attrs(scale=[1, 64, 1, 1]), E.INVALID_VALUE,
         "Scale tensor has no trailing dims matching input — RMSNorm requires at least one "
         "normalized dim"),
        (lambda: _attrs(scale=[1, 1, 1, 1]), E.INVALID_VALUE,
         "Scale tensor has no trailing dims matching input — RMSNorm requires at least one "
         "normalized dim"),
        (lambda: _attrs(scale=[1, 128, 32, 32]), E.INVALID_VALUE,
         "Scale tensor dimension at index 1 must be 1 (leading region before normalized "
         "shape), got 128"),
        (lambda: _attrs(bias=_t([1, 128, 32, 32])), E.INVALID_VALUE,
         "Scale tensor and Bias tensor dimension mismatch at index 1: 64 vs 128"),
        (lambda: _attrs(phase=P.NOT_SET), E.ATTRIBUTE_NOT_SET,
         "RMSNormNode forward_phase must be set to TRAINING or INFERENCE"),
        (lambda: _attrs(inv_rms=_t([2, 1, 1])), E.INVALID_VALUE,
         "Inverse RMS tensor must have the same rank as input, expected 4 but got 3"),
        (lambda: _attrs(inv_rms=_t([2, 64, 1, 1])), E.INVALID_VALUE,
         "Inverse RMS tensor dimension at index 1 must be 1 (normalized axis, scale is "
         "non-1), got 64"),
        (lambda: _attrs(scale=[1, 1, 32, 32], inv_rms=_t([2, 8, 1, 1])), E.INVALID_VALUE,
         "Inverse RMS tensor dimension at index 1 must match input (64), got 8"),
    ],
)  # fmt: skip
def test_rules_codes_and_messages(
    attrs: Callable[[], hg.RMSNormAttributes], code: hg.ErrorCode, message: str
) -> None:
    err = _error(_node(attrs()).pre_validate_node)
    assert (err.code, err.message) == (code, message)


def test_named_tensors_are_named_in_messages_and_inference_phase_skips_stats() -> None:
    a = _attrs(scale=[1, 5, 32, 32])
    a.get_scale().set_name("gamma")
    assert _error(_node(a).pre_validate_node).message.startswith("gamma dimension at index 1")
    _node(_attrs(phase=P.INFERENCE, inv_rms=_t([9]))).pre_validate_node()  # not checked


def test_infer_y_and_strides_from_x() -> None:
    a = _attrs([1, 2, 3, 4], [1, 2, 3, 4], P.INFERENCE)
    a.get_x().set_stride([5, 6, 7, 8])
    _node(a).infer_properties_node()
    assert (a.get_y().get_dim(), a.get_y().get_stride()) == ([1, 2, 3, 4], [5, 6, 7, 8])


def test_infer_inv_rms_from_scale_and_x_layout() -> None:
    a = _attrs([2, 64, 8, 8], [1, 64, 1, 1], inv_rms=_t())
    _node(a).infer_properties_node()
    assert a.get_inv_rms().get_dim() == [2, 1, 8, 8]
    a = _attrs([2, 64, 4, 8, 8], [1, 1, 4, 8, 8], inv_rms=_t())
    _node(a).infer_properties_node()
    assert a.get_inv_rms().get_dim() == [2, 64, 1, 1, 1]
    a = _attrs([2, 64, 8, 8], [1, 1, 8, 8], inv_rms=_t())
    _node(a).infer_properties_node()
    assert (a.get_inv_rms().get_dim(), a.get_inv_rms().get_stride()) == (
        [2, 64, 1, 1], [64, 1, 1, 1],
    )  # fmt: skip
    a = _attrs([2, 64, 8, 8], [1, 64, 8, 8], inv_rms=_t([2, 1, 8, 8], [64, 64, 8, 1]))
    _node(a).infer_properties_node()  # set by the user: kept
    assert a.get_inv_rms().get_stride() == [64, 64, 8, 1]
    a = _attrs([2, 64, 8, 8], [1, 64, 1, 1], P.INFERENCE, inv_rms=_t())
    _node(a).infer_properties_node()  # inference: not inferred
    assert a.get_inv_rms().get_dim() == []


def test_infer_scale_strides_follow_channels_last_x_and_bias_takes_scale() -> None:
    a = _attrs([2, 64, 8, 8], None, P.INFERENCE, bias=_t())
    a.get_x().set_stride([4096, 1, 512, 64])
    a.get_scale().set_dim([1, 1, 8, 8])
    _node(a).infer_properties_node()
    assert a.get_scale().get_stride() == [64, 1, 8, 1]
    assert (a.get_bias().get_dim(), a.get_bias().get_stride()) == ([1, 1, 8, 8], [64, 1, 8, 1])


def test_infer_needs_x_y_and_scale() -> None:
    for drop, what in (("set_x", "x"), ("set_y", "y"), ("set_scale", "scale")):
        a = _attrs()
        getattr(a, drop)(None)
        err = _error(_node(a).infer_properties_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET, f"RMSNormNode missing {what} for setting properties",
        )  # fmt: skip


def test_stride_order_is_hipdnns() -> None:
    assert stride_order([8, 1, 4]) == [2, 0, 1]
    assert stride_order([1, 1, 1, 1]) == [3, 2, 1, 0]  # ties keep NC...W
    assert stride_order([4096, 1, 512, 64]) == [3, 0, 2, 1]  # channels-last
    assert ordered_strides([1, 2, 3, 4], [3, 0, 2, 1]) == [24, 1, 8, 2]


def _graph() -> hg.Graph:
    g = hg.Graph(name="rms", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    return g


def test_builder_training_and_inference() -> None:
    g = _graph()
    x, scale = g.tensor(dim=[2, 64, 32, 32]), g.tensor(dim=[1, 64, 32, 32])
    attrs = hg.RMSNormAttributes().set_epsilon(_eps()).set_forward_phase(P.TRAINING)
    y, inv_rms = g.rmsnorm(x, scale, attrs)
    assert inv_rms is not None and attrs.get_y() is None  # the caller's attributes are copied
    assert (y.get_name(), inv_rms.get_name(), x.get_name()) == (
        "RMSNorm_0::Y", "RMSNorm_0::INV_RMS", "",
    )  # fmt: skip
    y.set_output(True)
    inv_rms.set_output(True)
    g.validate()
    assert inv_rms.get_dim() == [2, 1, 1, 1] and y.get_stride() == x.get_stride()
    g = _graph()
    y, inv_rms = g.rmsnorm(
        g.tensor(dim=[4, 16]), g.tensor(dim=[1, 16]), epsilon=_eps(), name="norm",
        forward_phase=P.INFERENCE, bias=g.tensor(dim=[1, 16]),
    )  # fmt: skip
    assert inv_rms is None and y.get_name() == "norm::Y"
    y.set_output(True)
    g.validate()


@pytest.mark.parametrize(
    "call",
    [
        lambda g, x: g.rmsnorm(x, hg.RMSNormAttributes()),
        lambda g, x: g.rmsnorm(x, "scale", hg.RMSNormAttributes()),
        lambda g, x: g.rmsnorm(x, x, hg.ReductionAttributes()),
        lambda g, x: g.rmsnorm(x, x, colour=1),
        lambda g, x: g.rmsnorm(x, x, forward_phase=7),
    ],
)
def test_builder_refusals(call: Callable[[hg.Graph, hg.TensorAttributes], object]) -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[4, 8])
    assert _error(lambda: call(g, x)).code == E.INVALID_VALUE
    assert g.nodes == []

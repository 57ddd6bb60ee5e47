"""LayerNormNode: hipDNN's rules, messages and inference (LayerNormNode.hpp, the checks of
hipDNN's TestLayerNormNode.cpp) and the graph builder ``Graph.layernorm``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg

P = hg.NormFwdPhase
E = hg.ErrorCode


def _t(dim: list[int] | None = None, stride: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes(data_type=hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim).set_stride(stride or hg.generate_strides(dim))
    return t


def _attrs(
    x: list[int] = [2, 6, 4],  # noqa: B006
    affine: list[int] | None = [6, 4],  # noqa: B006
    phase: hg.NormFwdPhase = P.TRAINING,
    **slots: hg.TensorAttributes,
) -> hg.LayernormAttributes:
    a = hg.LayernormAttributes().set_forward_phase(phase).set_x(_t(x))
    a.set_y(slots.pop("y", _t())).set_epsilon(slots.pop("epsilon", _t().set_value(1e-5)))
    a.set_scale(slots.pop("scale", _t(affine))).set_bias(slots.pop("bias", _t(affine)))
    for name, tensor in slots.items():
        getattr(a, f"set_{name}")(tensor)
    return a


def _node(a: hg.LayernormAttributes) -> hg.LayerNormNode:
    return hg.LayerNormNode(a, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_valid_nodes_pre_validate() -> None:
    _node(_attrs()).pre_validate_node()  # reduced-rank scale and bias
    _node(_attrs([16, 64, 32, 32], [1, 64, 32, 32], P.INFERENCE)).pre_validate_node()
    _node(_attrs([8], [8])).pre_validate_node()  # rank 1


def test_phase_then_tensors_in_hipdnns_order() -> None:
    a = hg.LayernormAttributes()
    err = _error(_node(a).pre_validate_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "Forward phase not set of layernorm node.",
    )
    a.set_forward_phase(P.INFERENCE)
    messages = []
    for setter in ("set_x", "set_y", "set_epsilon", "set_scale", "set_bias"):
        messages.append(_error(_node(a).pre_validate_node))
        getattr(a, setter)(_t())
    assert [(m.code, m.message) for m in messages] == [
        (E.ATTRIBUTE_NOT_SET, f"LayerNormNode missing {what} for pre-validation")
        for what in ("x", "y", "epsilon", "scale", "bias")
    ]


@pytest.mark.parametrize(
    ("attrs", "code", "message"),
    [
        (lambda: _attrs(x=[]), E.INVALID_VALUE,
         "Input tensor (x) must have at least 1 dimensions, but has 0"),
        (lambda: _attrs(epsilon=_t()), E.ATTRIBUTE_NOT_SET, "Epsilon dimensions are not set"),
        (lambda: _attrs(epsilon=_t([1])), E.INVALID_VALUE,
         "Epsilon must be a pass-by-value tensor"),
        (lambda: _attrs(y=_t([2, 6, 5])), E.INVALID_VALUE,
         "Input tensor (x) and Output tensor (y) dimension mismatch at index 2: 4 vs 5"),
        (lambda: _attrs(scale=_t()), E.INVALID_VALUE,
         "Scale tensor must have at least 1 dimensions, but has 0"),
        (lambda: _attrs(bias=_t()), E.INVALID_VALUE,
         "Bias tensor must have at least 1 dimensions, but has 0"),
        (lambda: _attrs(bias=_t([6])), E.INVALID_VALUE,
         "Scale tensor and Bias tensor must have the same number of dimensions: 2 vs 1"),
        (lambda: _attrs(bias=_t([6, 5])), E.INVALID_VALUE,
         "Scale tensor and Bias tensor dimension mismatch at index 1: 4 vs 5"),
    ],
)  # fmt: skip
def test_rules_codes_and_messages(
    attrs: Callable[[], hg.LayernormAttributes], code: hg.ErrorCode, message: str
) -> None:
    err = _error(_node(attrs()).pre_validate_node)
    assert (err.code, err.message) == (code, message)


def test_infer_y_scale_bias_and_statistics() -> None:
    a = _attrs([2, 64, 8, 8], scale=_t(), bias=_t(), mean=_t(), inv_variance=_t())
    a.get_x().set_stride([4096, 1, 512, 64])  # channels-last
    _node(a).infer_properties_node()
    assert (a.get_y().get_dim(), a.get_y().get_stride()) == ([2, 64, 8, 8], [4096, 1, 512, 64])
    assert (a.get_scale().get_dim(), a.get_scale().get_stride()) == (
        [1, 64, 8, 8], [4096, 1, 512, 64],
    )  # fmt: skip
    assert a.get_bias().get_dim() == [1, 64, 8, 8]
    assert a.get_mean().get_dim() == [2, 1, 1, 1] == a.get_inv_variance().get_dim()
    # a reduced-rank scale: statistics keep X's batch dim, 1 elsewhere, packed strides
    a = _attrs([2, 6, 4], mean=_t(), inv_variance=_t())
    _node(a).infer_properties_node()
    assert (a.get_mean().get_dim(), a.get_mean().get_stride()) == ([2, 1, 1], [1, 1, 1])
    assert a.get_scale().get_stride() == [4, 1]
    # X without strides: Y gets packed strides
    a = _attrs([3, 5], [1, 5])
    a.get_x().stride = []
    _node(a).infer_properties_node()
    assert a.get_y().get_stride() == [5, 1]


def test_inference_phase_leaves_statistics_alone() -> None:
    a = _attrs(phase=P.INFERENCE, mean=_t(), inv_variance=_t())
    _node(a).infer_properties_node()
    assert a.get_mean().get_dim() == [] == a.get_inv_variance().get_dim()


def test_infer_needs_x_and_y() -> None:
    for drop, what in (("set_x", "x"), ("set_y", "y")):
        a = _attrs()
        getattr(a, drop)(None)
        err = _error(_node(a).infer_properties_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET, f"LayerNormNode missing {what} for setting properties",
        )  # fmt: skip


def _graph() -> hg.Graph:
    g = hg.Graph(name="ln", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    return g


def test_builder_names_and_outputs_by_phase() -> None:
    g = _graph()
    x, scale, bias = g.tensor(dim=[2, 6, 4]), g.tensor(dim=[6, 4]), g.tensor(dim=[6, 4])
    eps = hg.TensorAttributes().set_value(1e-5)
    attrs = hg.LayernormAttributes().set_epsilon(eps).set_forward_phase(P.INFERENCE)
    y, mean, inv_variance = g.layernorm(x, scale, bias, attrs)
    assert (mean, inv_variance) == (None, None) and attrs.get_y() is None
    assert [t.get_name() for t in (x, scale, bias, eps, y)] == [
        "Layernorm_0::X", "Layernorm_0::SCALE", "Layernorm_0::BIAS", "Layernorm_0::EPSILON",
        "Layernorm_0::Y",
    ]  # fmt: skip
    y.set_output(True)
    g.validate()
    g = _graph()
    y, mean, inv_variance = g.layernorm(
        g.tensor(name="x", dim=[4, 16]), g.tensor(dim=[1, 16]), g.tensor(dim=[1, 16]),
        epsilon=hg.TensorAttributes().set_value(1e-5), forward_phase=P.TRAINING, name="ln",
        normalized_dim_count=1,
    )  # fmt: skip
    assert mean is not None and inv_variance is not None
    assert (mean.get_name(), inv_variance.get_name()) == ("ln::MEAN", "ln::INV_VARIANCE")
    for t in (y, mean, inv_variance):
        t.set_output(True)
    g.validate()
    assert mean.get_dim() == [4, 1] and g.nodes[0].attributes.get_normalized_dim_count() == 1


def test_builder_makes_statistics_when_the_phase_is_not_set_and_validation_refuses() -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[4, 16])
    eps = hg.TensorAttributes().set_value(1e-5)
    _, mean, _ = g.layernorm(x, g.tensor(dim=[1, 16]), g.tensor(dim=[1, 16]), epsilon=eps)
    assert mean is not None  # hipDNN makes them unless the phase is INFERENCE
    assert _error(g.validate).message == "Forward phase not set of layernorm node."


@pytest.mark.parametrize(
    "call",
    [
        lambda g, x: g.layernorm(x, x, hg.LayernormAttributes()),
        lambda g, x: g.layernorm(x, x, x, hg.RMSNormAttributes()),
        lambda g, x: g.layernorm(x, x, x, normalized_dim_count="2"),
        lambda g, x: g.layernorm(x, x, x, normalized_dim_count=2**63),
        lambda g, x: g.layernorm(x, x, x, colour=1),
    ],
)
def test_builder_refusals(call: Callable[[hg.Graph, hg.TensorAttributes], object]) -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[4, 8])
    assert _error(lambda: call(g, x)).code == E.INVALID_VALUE
    assert g.nodes == [] and x.get_name() == "x"

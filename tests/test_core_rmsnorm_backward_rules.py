# ruff: noqa: E501
"""RMSNormBackwardNode: hipDNN's rules, messages and inference (RMSNormBackwardNode.hpp, its
tests TestRMSNormBackwardNode.cpp ported) and ``Graph.rmsnorm_backward``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg

E = hg.ErrorCode
L = "RMSNormBackwardNode"
X = [2, 64, 32, 32]
STRIDES = [65536, 1024, 32, 1]


def _t(dim: list[int] | None = None, stride: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes(data_type=hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim)
        if stride is not None:
            t.set_stride(stride)
    return t


S = [1, 64, 32, 32]


def _attrs(
    scale: list[int] = S, x: list[int] = X, **slots: list[int] | None
) -> hg.RMSNormBackwardAttributes:
    a = hg.RMSNormBackwardAttributes().set_x(_t(x, STRIDES)).set_dy(_t(slots.pop("dy", x), STRIDES))
    a.set_dx(_t(slots.pop("dx", x))).set_scale(_t(scale)).set_dscale(_t(slots.pop("dscale", scale)))
    for name, dims in slots.items():
        getattr(a, f"set_{name}")(_t(dims))
    return a


def _node(a: hg.RMSNormBackwardAttributes) -> hg.RMSNormBackwardNode:
    return hg.RMSNormBackwardNode(a, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_node_type() -> None:
    assert _node(hg.RMSNormBackwardAttributes()).node_type == hg.NodeType.RMS_NORM_BACKWARD
    assert int(hg.NodeType.RMS_NORM_BACKWARD) == 19


@pytest.mark.parametrize(
    "scale", [[1, 64, 32, 32], [1, 1, 32, 32], [1, 1, 1, 32]], ids=["axis1", "axis2", "axis3"]
)
def test_valid_nodes(scale: list[int]) -> None:
    """hipDNN's PreValidateNode, PreValidateNodeWithBiasNormAxis1-3."""
    _node(_attrs(scale)).pre_validate_node()


def test_inv_rms_shape() -> None:
    """hipDNN's PreValidateNodeWithValidInvRms and PreValidateNodeWithInvalidInvRms."""
    _node(_attrs([1, 1, 32, 32], inv_rms=[2, 64, 1, 1])).pre_validate_node()
    err = _error(_node(_attrs([1, 1, 32, 32], inv_rms=[2, 1, 1, 1])).pre_validate_node)
    assert (err.code, err.message) == (
        E.INVALID_VALUE,
        "Inverse RMS tensor dimension at index 1 must match input (64), got 1",
    )


def test_missing_tensors_in_hipdnns_order() -> None:
    a = hg.RMSNormBackwardAttributes()
    order = [
        ("dy", "input"),
        ("x", "input"),
        ("scale", "input"),
        ("dx", "output"),
        ("dscale", "output"),
    ]
    for name, side in order:
        err = _error(_node(a).pre_validate_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"{L} missing {name} ({side}) for pre-validation",
        )
        getattr(a, f"set_{name}")(_t([1, 4]) if name in ("dy", "x", "scale") else _t())
    _node(a).pre_validate_node()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"x": [3], "dy": [3]}, "Input tensor (x) must have at least 2 dimensions, but has 1"),
        ({"dy": [3]}, "Gradient input tensor (dy) must have at least 2 dimensions, but has 1"),
        ({"scale": [32]}, "Scale tensor must have at least 2 dimensions, but has 1"),
        (
            {"dy": [2, 2, 2, 2]},
            "Input tensor (x) and Gradient input tensor (dy) dimension mismatch at index 1: 64 vs 2",
        ),
        (
            {"dy": [2, 64, 32]},
            "Input tensor (x) and Gradient input tensor (dy) must have the same number of dimensions: 4 vs 3",
        ),
        (
            {"dx": [2, 2, 2, 2]},
            "Input tensor (x) and Gradient output tensor (dx) dimension mismatch at index 1: 64 vs 2",
        ),
        (
            {"scale": [1, 64, 1, 1]},
            "Scale tensor has no trailing dims matching input — RMSNorm requires at least one normalized dim",
        ),
        (
            {"scale": [1, 64, 1, 32]},
            "Scale tensor dimension at index 1 must be 1 (leading region before normalized shape), got 64",
        ),
        ({"scale": [2, 64, 32, 32]}, "Scale tensor batch dimension (index 0) must be 1, got 2"),
        ({"scale": [1, 32, 32]}, "Scale tensor must match input rank"),
        (
            {"scale": [1, 1, 1, 32], "dscale": [1, 1, 32, 32]},
            "Input tensor (x) and Gradient output tensor (dx) dimension mismatch at index 2: 1 vs 32",
        ),
        (
            {"inv_rms": [2, 64, 1]},
            "Inverse RMS tensor must have the same rank as input, expected 4 but got 3",
        ),
        (
            {"inv_rms": [2, 64, 32, 1]},
            "Inverse RMS tensor dimension at index 1 must be 1 (normalized axis, scale is non-1), got 64",
        ),
    ],
)
def test_rules_codes_and_messages(change: dict[str, list[int]], message: str) -> None:
    """hipDNN's PreValidateNodeInputShape, PreValidateNodeDxShape, PreValidateNodeWithScaleMismatch
    and every other check, with hipDNN's messages (the DSCALE check names X and DX, as hipDNN's
    does)."""
    scale = change.pop("scale", [1, 64, 32, 32])
    if change.get("x") is not None:
        x = change.pop("x")
        err = _error(_node(_attrs(scale, x, **change)).pre_validate_node)  # type: ignore[arg-type]
    else:
        err = _error(_node(_attrs(scale, **change)).pre_validate_node)  # type: ignore[arg-type]
    assert (err.code, err.message) == (E.INVALID_VALUE, message)


def test_named_tensors_in_messages() -> None:
    a = _attrs(dy=[2, 2, 2, 2])
    a.get_dy().set_name("grad")  # type: ignore[union-attr]
    err = _error(_node(a).pre_validate_node)
    assert err.message.startswith("Input tensor (x) and grad dimension mismatch")


def test_infer_properties() -> None:
    """hipDNN's InferPropertiesNode: DX takes DY's dims and strides; DSCALE and DBIAS SCALE's
    dims in SCALE's layout."""
    a = hg.RMSNormBackwardAttributes().set_x(_t())
    a.set_dy(_t([1, 2, 3, 4], [24, 12, 4, 1])).set_scale(_t([1, 2, 1, 1], [2, 1, 1, 1]))
    a.set_dx(_t()).set_dscale(_t()).set_dbias(_t())
    _node(a).infer_properties_node()
    dx, dscale, dbias = a.get_dx(), a.get_dscale(), a.get_dbias()
    assert dx is not None and dscale is not None and dbias is not None
    assert (dx.get_dim(), dx.get_stride()) == ([1, 2, 3, 4], [24, 12, 4, 1])
    assert (dscale.get_dim(), dscale.get_stride()) == ([1, 2, 1, 1], [2, 1, 1, 1])
    assert (dbias.get_dim(), dbias.get_stride()) == ([1, 2, 1, 1], [2, 1, 1, 1])


def test_infer_channels_last_layout_and_no_dbias() -> None:
    a = hg.RMSNormBackwardAttributes().set_x(_t()).set_dy(_t([2, 3, 4, 5], [60, 1, 15, 3]))
    a.set_scale(_t([1, 3, 4, 5], [60, 1, 15, 3])).set_dx(_t()).set_dscale(_t())
    _node(a).infer_properties_node()
    assert a.get_dscale().get_stride() == [60, 1, 15, 3]  # type: ignore[union-attr]
    assert a.get_dbias() is None


def test_infer_refuses_missing_tensors_in_order() -> None:
    a = hg.RMSNormBackwardAttributes()
    for name in ("dy", "x", "scale", "dx", "dscale"):
        err = _error(_node(a).infer_properties_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"{L} missing {name} for setting properties",
        )
        getattr(a, f"set_{name}")(_t())


def _graph() -> hg.Graph:
    return hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)


@pytest.mark.parametrize("with_dbias", [False, True])
def test_builder_validates_and_round_trips(with_dbias: bool) -> None:
    g = _graph()
    dy, x = g.tensor(name="dy", dim=[4, 6, 8]), g.tensor(name="x", dim=[4, 6, 8])
    scale, inv_rms = g.tensor(name="scale", dim=[1, 1, 8]), g.tensor(name="inv_rms", dim=[4, 6, 1])
    attrs = hg.RMSNormBackwardAttributes().set_name("rb").set_compute_dbias(with_dbias)
    dx, dscale, dbias = g.rmsnorm_backward(dy, x, scale, inv_rms, attrs)
    assert attrs.get_dx() is None
    assert (dx.get_name(), dscale.get_name()) == ("rb::DX", "rb::DSCALE")
    assert (dbias is not None) == with_dbias
    for t in (dx, dscale, dbias):
        if t is not None:
            t.set_output(True)
    g.validate()
    assert dscale.get_dim() == [1, 1, 8] and dx.get_dim() == [4, 6, 8]
    blob = g.serialize()
    assert hg.Graph.deserialize(blob).serialize() == blob
    assert hg.Graph.from_json(g.to_json()).serialize() == blob


def test_builder_keeps_input_names_and_refuses() -> None:
    g = _graph()
    dy, x, s, r = (
        g.tensor(dim=[2, 4]),
        g.tensor(dim=[2, 4]),
        g.tensor(dim=[1, 4]),
        g.tensor(dim=[2, 1]),
    )
    dx, _, dbias = g.rmsnorm_backward(dy, x, s, r)
    assert (dx.get_name(), dbias, dy.get_name()) == ("RMSNormBackward_0::DX", None, "")
    err = _error(lambda: g.rmsnorm_backward(dy, x, s, None))
    assert (
        err.message
        == "rmsnorm_backward() takes tensors dy, x, scale and inv_rms, then RMSNormBackwardAttributes"
    )
    err = _error(lambda: g.rmsnorm_backward(dy, x, s, r, compute_dbias="yes"))
    assert (err.code, err.message) == (
        E.INVALID_VALUE,
        "compute_dbias must be a bool (True or False), got str 'yes'",
    )
    err = _error(lambda: g.rmsnorm_backward(dy, x, s, r, hg.RMSNormAttributes()))
    assert (
        err.message
        == "rmsnorm_backward() expects RMSNormBackwardAttributes attributes, got RMSNormAttributes"
    )

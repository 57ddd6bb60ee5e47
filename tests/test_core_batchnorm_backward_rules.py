# ruff: noqa: E501
"""BatchnormBackwardNode: hipDNN's rules, messages and inference (BatchnormBackwardNode.hpp) and
``Graph.batchnorm_backward``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg

E = hg.ErrorCode
C = [1, 3, 1, 1]
L = "BatchnormBackwardNode"


def _t(dim: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes(data_type=hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim).set_stride(hg.generate_strides(dim))
    return t


def _attrs(
    x: list[int] = [4, 3, 8, 8],  # noqa: B006
    **slots: list[int] | None,
) -> hg.BatchnormBackwardAttributes:
    a = hg.BatchnormBackwardAttributes().set_x(_t(x)).set_dy(_t(slots.pop("dy", x)))
    a.set_scale(_t(slots.pop("scale", C)))
    for name in ("dx", "dscale", "dbias"):
        a._set_output(a.OutputNames[name.upper()], _t(slots.pop(name, None)))
    for name, dims in slots.items():
        getattr(a, f"set_{name}")(_t(dims))
    return a


def _node(a: hg.BatchnormBackwardAttributes) -> hg.BatchnormBackwardNode:
    return hg.BatchnormBackwardNode(a, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_valid_nodes_pre_validate() -> None:
    _node(_attrs()).pre_validate_node()
    _node(_attrs(mean=C, inv_variance=C)).pre_validate_node()


def test_missing_tensors_in_hipdnns_order() -> None:
    a = hg.BatchnormBackwardAttributes()
    for name in ("dy", "x", "scale", "dx", "dscale", "dbias"):
        err = _error(_node(a).pre_validate_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"{L} missing {name} for pre-validation",
        )
        dims = {"dy": [2, 3, 4, 4], "x": [2, 3, 4, 4], "scale": C}.get(name)
        getattr(a, f"set_{name}")(_t(dims))
    _node(a).pre_validate_node()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"x": [3], "dy": [3, 4]}, "Input tensor (x) must have at least 2 dimensions, but has 1"),
        ({"dy": [3]}, "Gradient input tensor (dy) must have at least 2 dimensions, but has 1"),
        ({"scale": [3]}, "Scale tensor must have at least 2 dimensions, but has 1"),
        (
            {"x": [4, 3, 0, 8]},
            f"{L}: Input tensor (x) dimensions and strides must be set and positive",
        ),
        (
            {"dy": [4, 3, 8, 0]},
            f"{L}: Gradient input tensor (dy) dimensions and strides must be set and positive",
        ),
        (
            {"dy": [4, 3, 8, 7]},
            "Input tensor (x) and Gradient input tensor (dy) dimension mismatch at index 3: 8 vs 7",
        ),
        (
            {"dx": [4, 3, 8]},
            "Input tensor (x) and Gradient output tensor (dx) must have the same number of dimensions: 4 vs 3",
        ),
        ({"scale": [1, 2, 1, 1]}, "Scale tensor channel dimension (index 1) must be 3, got 2"),
        (
            {"dscale": [2, 3, 1, 1]},
            "Scale gradient tensor (dscale) batch dimension (index 0) must be 1, got 2",
        ),
        (
            {"dbias": [1, 3, 8, 1]},
            "Bias gradient tensor (dbias) spatial dimension at index 2 must be 1 for spatial batch normalization, got 8",
        ),
        (
            {"mean": [1, 4, 1, 1], "inv_variance": C},
            "Mean tensor channel dimension (index 1) must be 3, got 4",
        ),
        (
            {"mean": C, "inv_variance": [1, 3, 1, 2]},
            "Inverse variance tensor spatial dimension at index 3 must be 1 for spatial batch normalization, got 2",
        ),
        ({"mean": C}, f"{L} requires both mean and inv_variance to be set, or neither"),
        ({"inv_variance": None}, f"{L} requires both mean and inv_variance to be set, or neither"),
        (
            {"x": [1, 3, 1, 1]},
            "Batch normalization backward (spatial mode) requires more than 1 value per channel. N * spatial_dimensions must be > 1. Got N=1",
        ),
    ],
)
def test_rules_codes_and_messages(change: dict[str, list[int] | None], message: str) -> None:
    x = change.pop("x", [4, 3, 8, 8])
    if "dy" not in change:
        change["dy"] = x
    err = _error(_node(_attrs(x, **change)).pre_validate_node)  # type: ignore[arg-type]
    assert (err.code, err.message) == (E.INVALID_VALUE, message)


def test_infer_properties() -> None:
    a = _attrs([1, 2, 3, 4], scale=[1, 2, 1, 1])
    a.get_x().set_stride([5, 6, 7, 8])  # type: ignore[union-attr]
    _node(a).infer_properties_node()
    dx, dscale, dbias = a.get_dx(), a.get_dscale(), a.get_dbias()
    assert dx is not None and (dx.get_dim(), dx.get_stride()) == ([1, 2, 3, 4], [5, 6, 7, 8])
    assert dscale is not None and dbias is not None
    assert (dscale.get_dim(), dbias.get_stride()) == ([1, 2, 1, 1], [2, 1, 2, 2])
    a = hg.BatchnormBackwardAttributes()
    for name in ("x", "dx", "dscale", "dbias"):
        err = _error(_node(a).infer_properties_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"{L} missing {name} for setting properties",
        )
        getattr(a, f"set_{name}")(_t([2, 3]) if name == "x" else _t())


def test_builder_validates_round_trips_and_refuses_peer_stats() -> None:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    dy, x = g.tensor(name="dy", dim=[4, 3, 8, 8]), g.tensor(name="x", dim=[4, 3, 8, 8])
    scale = g.tensor(name="scale", dim=C)
    mean, inv_var = g.tensor(name="mean", dim=C), g.tensor(name="inv_var", dim=C)
    attrs = (
        hg.BatchnormBackwardAttributes()
        .set_name("bnb")
        .set_saved_mean_and_inv_variance(mean, inv_var)
    )
    outs = g.batchnorm_backward(dy, x, scale, attrs)
    assert attrs.get_dx() is None
    assert [t.get_name() for t in outs] == ["bnb::DX", "bnb::DSCALE", "bnb::DBIAS"]
    for t in outs:
        t.set_output(True)
    g.validate()
    blob = g.serialize()
    assert hg.Graph.deserialize(blob).serialize() == blob
    assert hg.Graph.from_json(g.to_json()).serialize() == blob
    node = g.nodes[0]
    node.attributes.set_peer_stats([hg.TensorAttributes(name="peer").set_uid(77)])
    err = _error(g.serialize)
    assert err.message == (
        "Node bnb: BatchnormBackwardAttributes.peer_stats_tensor_uid = (77,) is not supported by this version"
    )
    err = _error(g.validate)
    assert (err.code, err.message) == (
        E.GRAPH_NOT_SUPPORTED,
        f"{L}: peer statistics (multi-GPU batch normalization) are not supported by hipdnn-graph",
    )
    err = _error(lambda: g.batchnorm_backward(dy, x, None))
    assert (
        err.message
        == "batchnorm_backward() takes tensors dy, x and scale, then BatchnormBackwardAttributes"
    )

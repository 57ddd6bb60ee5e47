# ruff: noqa: E501
"""LayernormBackwardNode: hipDNN's rules, messages and inference (LayernormBackwardNode.hpp,
its tests TestLayernormBackwardNode.cpp ported) and ``Graph.layernorm_backward``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg
from hipdnn_graph.nodes.norm_rules import infer_normalized_dim_count

E = hg.ErrorCode
L = "LayernormBackwardNode"
X = [16, 64, 32, 32]
S = [1, 64, 32, 32]
STRIDES = [65536, 1024, 32, 1]


def _t(dim: list[int] | None = None, stride: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes(data_type=hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim).set_stride(stride if stride is not None else STRIDES)
    return t


def _valid(minimal: bool = False) -> hg.LayernormBackwardAttributes:
    """hipDNN's createValidAttributes (createMinimalAttributes: outputs without dims)."""
    a = hg.LayernormBackwardAttributes().set_dy(_t(X)).set_x(_t(X)).set_scale(_t(S))
    if minimal:
        return a.set_dx(_t()).set_dscale(_t()).set_dbias(_t())
    return a.set_dx(_t(X)).set_dscale(_t(S)).set_dbias(_t(S))


def _node(a: hg.LayernormBackwardAttributes) -> hg.LayernormBackwardNode:
    return hg.LayernormBackwardNode(a, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_node_type_and_valid_node() -> None:
    assert _node(hg.LayernormBackwardAttributes()).node_type == hg.NodeType.LAYERNORM_BACKWARD
    assert int(hg.NodeType.LAYERNORM_BACKWARD) == 20
    _node(_valid()).pre_validate_node()


@pytest.mark.parametrize(
    ("missing", "side"),
    [
        ("dy", "input"),
        ("x", "input"),
        ("scale", "input"),
        ("dx", "output"),
        ("dscale", "output"),
        ("dbias", "output"),
    ],
)
def test_each_missing_tensor_is_named(missing: str, side: str) -> None:
    """hipDNN's PreValidateNodeMissing<Tensor>Tensor: each tensor alone missing."""
    a = _valid()
    getattr(a, f"set_{missing}")(None)
    err = _error(_node(a).pre_validate_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        f"{L} missing {missing} ({side}) for pre-validation",
    )


def test_missing_tensors_in_hipdnns_order() -> None:
    a = hg.LayernormBackwardAttributes()
    order = [
        ("dy", "input"),
        ("x", "input"),
        ("scale", "input"),
        ("dx", "output"),
        ("dscale", "output"),
        ("dbias", "output"),
    ]
    for name, side in order:
        err = _error(_node(a).pre_validate_node)
        assert err.message == f"{L} missing {name} ({side}) for pre-validation"
        getattr(a, f"set_{name}")(_t())
    _node(a).pre_validate_node()


def test_no_shape_rules() -> None:
    """hipDNN's node checks presence only: mismatched shapes pass pre-validation."""
    a = _valid().set_dy(_t([2, 2])).set_dx(_t([3])).set_mean(_t([7, 7, 7]))
    _node(a).pre_validate_node()


def test_infer_properties_all_values_set() -> None:
    """hipDNN's InferPropertiesNode: nothing to infer but the normalized dim count (3)."""
    a = _valid()
    _node(a).infer_properties_node()
    assert a.get_normalized_dim_count() == 3
    assert a.get_compute_data_type() == hg.DataType.NOT_SET


def test_infer_minimal_properties() -> None:
    """hipDNN's InferMinimalPropertiesNode: DX takes X's dims and strides, DSCALE and DBIAS
    SCALE's."""
    a = _valid(minimal=True)
    a.get_scale().set_stride([2048, 32, 1, 1])  # type: ignore[union-attr]
    _node(a).infer_properties_node()
    dx, dscale, dbias = a.get_dx(), a.get_dscale(), a.get_dbias()
    assert dx is not None and dscale is not None and dbias is not None
    assert (dx.get_dim(), dx.get_stride()) == (X, STRIDES)
    assert (dscale.get_dim(), dscale.get_stride()) == (S, [2048, 32, 1, 1])
    assert (dbias.get_dim(), dbias.get_stride()) == (S, [2048, 32, 1, 1])
    assert a.get_normalized_dim_count() == 3


def test_strides_copied_even_when_empty_and_count_kept_when_set() -> None:
    a = hg.LayernormBackwardAttributes().set_dy(_t()).set_x(hg.TensorAttributes(dim=[2, 3]))
    a.set_scale(hg.TensorAttributes(dim=[1, 3])).set_dx(_t()).set_dscale(_t()).set_dbias(_t())
    a.set_normalized_dim_count(5)
    _node(a).infer_properties_node()
    assert a.get_dx().get_stride() == [] and a.get_dbias().get_stride() == []  # type: ignore[union-attr]
    assert a.get_normalized_dim_count() == 5


@pytest.mark.parametrize(
    ("x", "scale", "count"),
    [
        (X, S, 3),
        (X, [1, 1, 32, 32], 2),
        (X, [1, 1, 1, 32], 1),
        (X, [1, 1, 1, 1], 1),
        (X, [64, 32, 32], 3),
        ([4, 8], [8], 1),
        ([], [], 1),
        (X, [1, 64, 1, 32], 1),
    ],
)
def test_normalized_dim_count_inference(x: list[int], scale: list[int], count: int) -> None:
    assert infer_normalized_dim_count(x, scale) == count


def test_infer_refuses_missing_tensors_in_order() -> None:
    a = hg.LayernormBackwardAttributes()
    for name in ("dy", "x", "scale", "dx", "dscale", "dbias"):
        err = _error(_node(a).infer_properties_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"{L} missing {name} for setting properties",
        )
        getattr(a, f"set_{name}")(_t())


def test_attribute_setters() -> None:
    a = hg.LayernormBackwardAttributes()
    m, v, e = _t([2, 1]), _t([2, 1]), hg.TensorAttributes().set_value(1e-5)
    assert a.set_saved_mean_and_inv_variance(m, v) is a
    assert a.set_epsilon(e).get_epsilon() is e
    assert (a.get_mean(), a.get_inv_variance()) == (m, v)
    err = _error(lambda: a.set_normalized_dim_count(2**63))
    assert err.code == E.INVALID_VALUE
    err = _error(lambda: a.set_normalized_dim_count("2"))  # type: ignore[arg-type]
    assert err.code == E.INVALID_VALUE


def _graph() -> hg.Graph:
    return hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)


def test_builder_names_validates_and_round_trips() -> None:
    g = _graph()
    dy, x, scale = (
        g.tensor(dim=[4, 6, 8]),
        g.tensor(name="x", dim=[4, 6, 8]),
        g.tensor(dim=[1, 6, 8]),
    )
    mean, inv_var = g.tensor(dim=[4, 1, 1]), g.tensor(dim=[4, 1, 1])
    eps = g.tensor(name="eps").set_value(1e-5)
    attrs = (
        hg.LayernormBackwardAttributes()
        .set_saved_mean_and_inv_variance(mean, inv_var)
        .set_epsilon(eps)
    )
    outs = g.layernorm_backward(dy, x, scale, attrs)
    assert attrs.get_dx() is None and attrs.get_dy() is None
    n = "LayernormBackward_0"
    assert [t.get_name() for t in outs] == [f"{n}::DX", f"{n}::DSCALE", f"{n}::DBIAS"]
    assert [t.get_name() for t in (dy, x, scale, mean, inv_var, eps)] == [
        f"{n}::DY",
        "x",
        f"{n}::SCALE",
        f"{n}::MEAN",
        f"{n}::INV_VARIANCE",
        "eps",
    ]
    for t in outs:
        t.set_output(True)
    g.validate()
    node = g.nodes[0]
    assert node.attributes.get_normalized_dim_count() == 2
    assert outs[1].get_dim() == [1, 6, 8] and outs[0].get_dim() == [4, 6, 8]
    blob = g.serialize()
    assert hg.Graph.deserialize(blob).serialize() == blob
    assert hg.Graph.from_json(g.to_json()).serialize() == blob


def test_builder_keywords_and_refusals() -> None:
    g = _graph()
    dy, x, scale = g.tensor(dim=[4, 8]), g.tensor(dim=[4, 8]), g.tensor(dim=[1, 8])
    dx, _, _ = g.layernorm_backward(dy, x, scale, name="lnb", normalized_dim_count=1)
    assert dx.get_name() == "lnb::DX"
    assert g.nodes[0].attributes.get_normalized_dim_count() == 1
    err = _error(lambda: g.layernorm_backward(dy, x, None))
    assert (
        err.message
        == "layernorm_backward() takes tensors dy, x and scale, then LayernormBackwardAttributes"
    )
    err = _error(lambda: g.layernorm_backward(dy, x, scale, hg.LayernormAttributes()))
    assert (
        err.message
        == "layernorm_backward() expects LayernormBackwardAttributes attributes, got LayernormAttributes"
    )
    err = _error(lambda: g.layernorm_backward(dy, x, scale, forward_phase=1))
    assert err.message == "layernorm_backward() got an unknown keyword 'forward_phase'"

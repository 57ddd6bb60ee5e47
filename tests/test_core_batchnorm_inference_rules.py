# ruff: noqa: E501
"""BatchnormInferenceNode: hipDNN's rules, messages and inference (BatchnormInferenceNode.hpp,
the checks of hipDNN's TestBatchnormInferenceNode.cpp) and ``Graph.batchnorm_inference``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg

E = hg.ErrorCode
C = [1, 3, 1, 1]


def _t(dim: list[int] | None = None, stride: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes(data_type=hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim).set_stride(stride or hg.generate_strides(dim))
    return t


def _attrs(x: list[int] = [4, 3, 8, 8], **slots: list[int]) -> hg.BatchnormInferenceAttributes:  # noqa: B006
    a = hg.BatchnormInferenceAttributes().set_x(_t(x)).set_y(_t(slots.pop("y", None)))
    for name in ("mean", "inv_variance", "scale", "bias"):
        getattr(a, f"set_{name}")(_t(slots.pop(name, C)))
    return a


def _node(a: hg.BatchnormInferenceAttributes) -> hg.BatchnormInferenceNode:
    return hg.BatchnormInferenceNode(a, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_valid_nodes_pre_validate() -> None:
    _node(_attrs()).pre_validate_node()
    _node(_attrs([1, 3, 1, 1])).pre_validate_node()  # one value per channel: fine in inference
    _node(
        _attrs([2, 5], mean=[1, 5], inv_variance=[1, 5], scale=[1, 5], bias=[1, 5])
    ).pre_validate_node()


def test_missing_tensors_in_hipdnns_order() -> None:
    a = hg.BatchnormInferenceAttributes()
    for name in ("x", "scale", "bias", "y", "mean", "inv_variance"):
        err = _error(_node(a).pre_validate_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"BatchnormInferenceNode missing {name} for pre-validation",
        )
        dims = {"x": [2, 3, 4, 4], "y": None}.get(name, C)
        getattr(a, f"set_{name}")(_t(dims))
    _node(a).pre_validate_node()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"x": [3]}, "Input tensor (x) must have at least 2 dimensions, but has 1"),
        ({"scale": [3]}, "Scale tensor must have at least 2 dimensions, but has 1"),
        ({"bias": [3]}, "Bias tensor must have at least 2 dimensions, but has 1"),
        ({"mean": [3]}, "Mean tensor must have at least 2 dimensions, but has 1"),
        (
            {"inv_variance": [3]},
            "Inverse variance tensor must have at least 2 dimensions, but has 1",
        ),
        (
            {"x": [4, 3, 0, 8]},
            "BatchnormInferenceNode: Input tensor (x) dimensions and strides must be set and positive",
        ),
        (
            {"y": [4, 3, 8, 7]},
            "Input tensor (x) and Output tensor (y) dimension mismatch at index 3: 8 vs 7",
        ),
        ({"scale": [1, 4, 1, 1]}, "Scale tensor channel dimension (index 1) must be 3, got 4"),
        ({"bias": [2, 3, 1, 1]}, "Bias tensor batch dimension (index 0) must be 1, got 2"),
        (
            {"mean": [1, 3, 8, 1]},
            "Mean tensor spatial dimension at index 2 must be 1 for spatial batch normalization, got 8",
        ),
        (
            {"inv_variance": [1, 2, 1, 1]},
            "Inverse variance tensor channel dimension (index 1) must be 3, got 2",
        ),
    ],
)
def test_rules_codes_and_messages(change: dict[str, list[int]], message: str) -> None:
    x = change.pop("x", [4, 3, 8, 8])
    err = _error(_node(_attrs(x, **change)).pre_validate_node)
    assert (err.code, err.message) == (E.INVALID_VALUE, message)


def test_infer_properties() -> None:
    a = _attrs(
        [1, 2, 3, 4],
        mean=[1, 2, 1, 1],
        inv_variance=[1, 2, 1, 1],
        scale=[1, 2, 1, 1],
        bias=[1, 2, 1, 1],
    )
    a.get_x().set_stride([5, 6, 7, 8])  # type: ignore[union-attr]
    _node(a).infer_properties_node()
    y = a.get_y()
    assert y is not None and (y.get_dim(), y.get_stride()) == ([1, 2, 3, 4], [5, 6, 7, 8])
    err = _error(_node(hg.BatchnormInferenceAttributes()).infer_properties_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "BatchnormInferenceNode missing x for setting properties",
    )
    err = _error(_node(hg.BatchnormInferenceAttributes().set_x(_t([2, 3]))).infer_properties_node)
    assert err.message == "BatchnormInferenceNode missing y for setting properties"


def test_builder_validates_and_round_trips() -> None:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[4, 3, 8, 8], stride=[192, 1, 24, 3])
    stats = [g.tensor(name=n, dim=C) for n in ("mean", "inv_var", "gamma", "beta")]
    attrs = hg.BatchnormInferenceAttributes().set_name("bn")
    y = g.batchnorm_inference(x, *stats, attrs)
    assert attrs.get_y() is None and y.get_name() == "bn::Y"
    y.set_output(True)
    g.validate()
    assert y.get_stride() == [192, 1, 24, 3]
    blob = g.serialize()
    assert hg.Graph.deserialize(blob).serialize() == blob
    assert hg.Graph.from_json(g.to_json()).serialize() == blob
    err = _error(lambda: g.batchnorm_inference(x, *stats[:3], None))
    assert err.message.startswith("batchnorm_inference() takes tensors x, mean, inv_variance")
    err = _error(lambda: g.batchnorm_inference(x, *stats, hg.BatchnormAttributes()))
    assert err.message == (
        "batchnorm_inference() expects BatchnormInferenceAttributes attributes, got BatchnormAttributes"
    )

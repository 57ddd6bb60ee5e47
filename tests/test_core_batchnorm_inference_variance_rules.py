# ruff: noqa: E501
"""BatchnormInferenceVarianceNode: hipDNN's rules, messages and inference
(BatchnormInferenceNodeVarianceExt.hpp) and ``Graph.batchnorm_inference_variance_ext``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg

E = hg.ErrorCode
C = [1, 3, 1, 1]
L = "BatchnormInferenceNodeVarianceExt"


def _t(dim: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes(data_type=hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim).set_stride(hg.generate_strides(dim))
    return t


def _attrs(
    x: list[int] = [4, 3, 8, 8],  # noqa: B006
    **slots: list[int],
) -> hg.BatchnormInferenceAttributesVarianceExt:
    a = hg.BatchnormInferenceAttributesVarianceExt().set_x(_t(x)).set_y(_t(slots.pop("y", None)))
    for name in ("mean", "variance", "scale", "bias"):
        getattr(a, f"set_{name}")(_t(slots.pop(name, C)))
    return a.set_epsilon(_t().set_value(1e-5))


def _node(a: hg.BatchnormInferenceAttributesVarianceExt) -> hg.BatchnormInferenceVarianceNode:
    return hg.BatchnormInferenceVarianceNode(a, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_valid_nodes_pre_validate() -> None:
    _node(_attrs()).pre_validate_node()
    _node(_attrs([1, 3, 1, 1])).pre_validate_node()


def test_missing_tensors_in_hipdnns_order() -> None:
    a = hg.BatchnormInferenceAttributesVarianceExt()
    for name in ("x", "scale", "bias", "y", "mean", "variance", "epsilon"):
        err = _error(_node(a).pre_validate_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"{L} missing {name} for pre-validation",
        )
        dims = {"x": [2, 3, 4, 4], "y": None, "epsilon": [1]}.get(name, C)
        getattr(a, f"set_{name}")(_t(dims))
    _node(a).pre_validate_node()  # hipDNN checks epsilon only for presence


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"x": [3]}, "Input tensor (x) must have at least 2 dimensions, but has 1"),
        ({"scale": [3]}, "Scale tensor must have at least 2 dimensions, but has 1"),
        ({"bias": [3]}, "Bias tensor must have at least 2 dimensions, but has 1"),
        ({"mean": [3]}, "Mean tensor must have at least 2 dimensions, but has 1"),
        ({"variance": [3]}, "Variance tensor must have at least 2 dimensions, but has 1"),
        (
            {"y": [4, 3, 8]},
            "Input tensor (x) and Output tensor (y) must have the same number of dimensions: 4 vs 3",
        ),
        ({"scale": [1, 4, 1, 1]}, "Scale tensor channel dimension (index 1) must be 3, got 4"),
        (
            {"bias": [1, 3, 1, 8]},
            "Bias tensor spatial dimension at index 3 must be 1 for spatial batch normalization, got 8",
        ),
        ({"mean": [2, 3, 1, 1]}, "Mean tensor batch dimension (index 0) must be 1, got 2"),
        (
            {"variance": [1, 1, 1, 1]},
            "Variance tensor channel dimension (index 1) must be 3, got 1",
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
        variance=[1, 2, 1, 1],
        scale=[1, 2, 1, 1],
        bias=[1, 2, 1, 1],
    )
    a.get_x().set_stride([5, 6, 7, 8])  # type: ignore[union-attr]
    _node(a).infer_properties_node()
    y = a.get_y()
    assert y is not None and (y.get_dim(), y.get_stride()) == ([1, 2, 3, 4], [5, 6, 7, 8])
    err = _error(_node(hg.BatchnormInferenceAttributesVarianceExt()).infer_properties_node)
    assert (err.code, err.message) == (E.ATTRIBUTE_NOT_SET, f"{L} missing x for setting properties")
    err = _error(
        _node(hg.BatchnormInferenceAttributesVarianceExt().set_x(_t([2, 3]))).infer_properties_node
    )
    assert err.message == f"{L} missing y for setting properties"


def test_builder_validates_and_round_trips() -> None:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[4, 3, 8, 8])
    stats = [g.tensor(name=n, dim=C) for n in ("mean", "var", "gamma", "beta")]
    eps = g.tensor(name="eps").set_value(1e-5)
    attrs = hg.BatchnormInferenceAttributesVarianceExt()
    y = g.batchnorm_inference_variance_ext(x, *stats, eps, attrs)
    assert attrs.get_y() is None and y.get_name() == "BatchnormInferenceVarianceExt_0::Y"
    y.set_output(True)
    g.validate()
    blob = g.serialize()
    assert hg.Graph.deserialize(blob).serialize() == blob
    assert hg.Graph.from_json(g.to_json()).serialize() == blob
    err = _error(lambda: g.batchnorm_inference_variance_ext(x, *stats, None))
    assert err.message.startswith(
        "batchnorm_inference_variance_ext() takes tensors x, mean, variance"
    )
    err = _error(
        lambda: g.batchnorm_inference_variance_ext(
            x, *stats, eps, hg.BatchnormInferenceAttributes()
        )
    )
    assert err.message == (
        "batchnorm_inference_variance_ext() expects BatchnormInferenceAttributesVarianceExt "
        "attributes, got BatchnormInferenceAttributes"
    )

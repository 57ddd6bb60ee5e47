# ruff: noqa: E501
"""BatchnormNode: hipDNN's rules, messages and inference (BatchnormNode.hpp, the checks of
hipDNN's TestBatchnormNode.cpp) and the graph builder ``Graph.batchnorm``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg

E = hg.ErrorCode


def _t(dim: list[int] | None = None, stride: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes(data_type=hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim).set_stride(stride or hg.generate_strides(dim))
    return t


def _attrs(
    x: list[int] = [4, 3, 8, 8],  # noqa: B006
    affine: list[int] = [1, 3, 1, 1],  # noqa: B006
    **slots: hg.TensorAttributes,
) -> hg.BatchnormAttributes:
    a = hg.BatchnormAttributes().set_x(_t(x)).set_y(slots.pop("y", _t()))
    a.set_epsilon(slots.pop("epsilon", _t().set_value(1e-5)))
    a.set_scale(slots.pop("scale", _t(affine))).set_bias(slots.pop("bias", _t(affine)))
    for name, tensor in slots.items():
        getattr(a, f"set_{name}")(tensor)
    return a


def _node(a: hg.BatchnormAttributes) -> hg.BatchnormNode:
    return hg.BatchnormNode(a, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def _running() -> dict[str, hg.TensorAttributes]:
    names = ("prev_running_mean", "prev_running_variance", "next_running_mean")
    return {n: _t() for n in (*names, "next_running_variance")}


def test_valid_nodes_pre_validate() -> None:
    _node(_attrs()).pre_validate_node()
    _node(_attrs([2, 5, 3], [1, 5, 1], mean=_t([1, 5, 1]), **_running())).pre_validate_node()
    _node(_attrs([2, 4], [1, 4])).pre_validate_node()  # rank 2: N alone must exceed 1


def test_missing_tensors_in_hipdnns_order() -> None:
    a = hg.BatchnormAttributes()
    order = [("x", _t([2, 3])), ("scale", _t()), ("bias", _t()), ("y", _t()), ("epsilon", None)]
    for name, tensor in order:
        err = _error(_node(a).pre_validate_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"BatchnormNode missing {name} for pre-validation",
        )
        if tensor is not None:
            getattr(a, f"set_{name}")(tensor)


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        ({"x": [3]}, E.INVALID_VALUE, "Input tensor (x) must have at least 2 dimensions, but has 1"),
        ({"affine": [3]}, E.INVALID_VALUE, "Scale tensor must have at least 2 dimensions, but has 1"),
        ({"bias": [5]}, E.INVALID_VALUE, "Bias tensor must have at least 2 dimensions, but has 1"),
        ({"epsilon": "dims"}, E.ATTRIBUTE_NOT_SET, "Epsilon dimensions are not set"),
        ({"epsilon": [2]}, E.INVALID_VALUE, "Epsilon must be a scalar (single element), but has 2 elements"),
        ({"epsilon": [1]}, E.INVALID_VALUE, "Epsilon must be a pass-by-value tensor"),
        ({"x": [4, 0, 8, 8]}, E.INVALID_VALUE, "BatchnormNode: Input tensor (x) dimensions and strides must be set and positive"),
        ({"y": [4, 3, 8]}, E.INVALID_VALUE, "Input tensor (x) and Output tensor (y) must have the same number of dimensions: 4 vs 3"),
        ({"y": [4, 3, 8, 9]}, E.INVALID_VALUE, "Input tensor (x) and Output tensor (y) dimension mismatch at index 3: 8 vs 9"),
        ({"affine": [2, 3, 1, 1]}, E.INVALID_VALUE, "Scale tensor batch dimension (index 0) must be 1, got 2"),
        ({"affine": [1, 4, 1, 1]}, E.INVALID_VALUE, "Scale tensor channel dimension (index 1) must be 3, got 4"),
        ({"bias": [1, 3, 8, 1]}, E.INVALID_VALUE, "Bias tensor spatial dimension at index 2 must be 1 for spatial batch normalization, got 8"),
        ({"mean": [1, 2, 1, 1]}, E.INVALID_VALUE, "Mean tensor channel dimension (index 1) must be 3, got 2"),
        ({"inv_variance": [1, 3, 1, 2]}, E.INVALID_VALUE, "Inverse variance tensor spatial dimension at index 3 must be 1 for spatial batch normalization, got 2"),
        ({"x": [1, 3, 1, 1]}, E.INVALID_VALUE, "Batch normalization training (spatial mode) requires more than 1 value per channel. N * spatial_dimensions must be > 1. Got N=1"),
    ],
)  # fmt: skip
def test_rules_codes_and_messages(
    change: dict[str, object], code: hg.ErrorCode, message: str
) -> None:
    x = change.pop("x", [4, 3, 8, 8])
    affine = change.pop("affine", [1, 3, 1, 1])
    slots: dict[str, hg.TensorAttributes] = {}
    for name, dims in change.items():
        if dims == "dims":
            slots[name] = _t().set_value(1e-5).set_dim([])
        elif name == "epsilon" and dims == [1]:
            slots[name] = _t([1])  # one element, but not pass-by-value
        else:
            slots[name] = _t(dims)  # type: ignore[arg-type]
            if name == "epsilon":
                slots[name].set_is_pass_by_value(True)
    err = _error(_node(_attrs(x, affine, **slots)).pre_validate_node)  # type: ignore[arg-type]
    assert (err.code, err.message) == (code, message)


def test_named_tensors_are_named_in_messages() -> None:
    scale = _t([1, 4, 1, 1]).set_name("gamma")
    err = _error(_node(_attrs(scale=scale)).pre_validate_node)
    assert err.message == "gamma channel dimension (index 1) must be 3, got 4"


def test_running_statistics_all_or_none() -> None:
    for missing in _running():
        slots = _running()
        del slots[missing]
        err = _error(_node(_attrs(**slots)).pre_validate_node)
        assert (err.code, err.message) == (
            E.INVALID_VALUE,
            "BatchnormNode: If any running statistics are provided, all running statistics "
            "(prev_running_mean, prev_running_variance, next_running_mean, "
            "next_running_variance) must be provided",
        )
    slots = _running()
    slots["prev_running_variance"] = _t([1, 3, 2, 1])
    err = _error(_node(_attrs(**slots)).pre_validate_node)
    assert err.message == (
        "Previous running variance tensor spatial dimension at index 2 must be 1 for spatial "
        "batch normalization, got 2"
    )
    slots = _running()
    slots["next_running_mean"] = _t([1, 1, 1, 1])
    err = _error(_node(_attrs(**slots)).pre_validate_node)
    assert err.message == "Next running mean tensor channel dimension (index 1) must be 3, got 1"


def test_spatial_count_is_checked_last() -> None:
    # N=1 with spatial 1x1 is refused only once every shape rule passed
    a = _attrs([1, 3, 1, 1], mean=_t([1, 3, 1, 1]))
    err = _error(_node(a).pre_validate_node)
    assert err.message.startswith("Batch normalization training (spatial mode)")
    _node(_attrs([1, 3, 2, 1])).pre_validate_node()  # N * H * W = 2


def test_infer_properties_hipdnns_cases() -> None:
    # TestBatchnormNode.InferPropertiesNode: Y takes X's dims and strides as they are
    a = _attrs([1, 2, 3, 4], [1, 2, 1, 1])
    a.get_x().set_stride([5, 6, 7, 8])  # type: ignore[union-attr]
    _node(a).infer_properties_node()
    y = a.get_y()
    assert y is not None and (y.get_dim(), y.get_stride()) == ([1, 2, 3, 4], [5, 6, 7, 8])
    # InferPropertiesNodeWithStats: every statistic [1, C, 1, 1], channels-last packed strides
    stats = {"mean": _t(), "inv_variance": _t(), **_running()}
    a = _attrs([1, 2, 3, 4], [1, 2, 1, 1], **stats)
    _node(a).infer_properties_node()
    for name in ("mean", "inv_variance", "next_running_mean", "next_running_variance"):
        tensor = getattr(a, f"get_{name}")()
        assert (tensor.get_dim(), tensor.get_stride()) == ([1, 2, 1, 1], [2, 1, 2, 2]), name
    assert a.get_prev_running_mean().get_dim() == []  # type: ignore[union-attr]  # inputs untouched


def test_next_running_stats_inferred_only_with_all_four() -> None:
    a = _attrs(next_running_mean=_t(), next_running_variance=_t())
    _node(a).infer_properties_node()
    assert a.get_next_running_mean().get_dim() == []  # type: ignore[union-attr]


def test_infer_needs_x_and_y() -> None:
    err = _error(_node(hg.BatchnormAttributes()).infer_properties_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "BatchnormNode missing x for setting properties",
    )
    err = _error(_node(hg.BatchnormAttributes().set_x(_t([2, 3]))).infer_properties_node)
    assert err.message == "BatchnormNode missing y for setting properties"


def _graph() -> tuple[hg.Graph, hg.TensorAttributes, hg.TensorAttributes, hg.TensorAttributes]:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[4, 3, 8, 8])
    scale = g.tensor(name="scale", dim=[1, 3, 1, 1])
    bias = g.tensor(name="bias", dim=[1, 3, 1, 1])
    return g, x, scale, bias


def test_builder_returns_five_and_validates() -> None:
    g, x, scale, bias = _graph()
    eps = g.tensor(name="eps", dim=[1]).set_value(1e-5)
    attrs = hg.BatchnormAttributes().set_name("bn").set_epsilon(eps)
    y, mean, inv_var, nm, nv = g.batchnorm(x, scale, bias, attrs)
    assert attrs.get_y() is None  # the caller's attributes stay as they were
    assert (y.get_name(), mean.get_name(), inv_var.get_name()) == (
        "bn::Y",
        "bn::MEAN",
        "bn::INV_VARIANCE",
    )
    assert nm is None and nv is None
    for t in (y, mean, inv_var):
        t.set_output(True)
    g.validate()
    assert (y.get_dim(), mean.get_dim(), mean.get_stride()) == (
        [4, 3, 8, 8],
        [1, 3, 1, 1],
        [3, 1, 3, 3],
    )


def test_builder_with_running_statistics() -> None:
    g, x, scale, bias = _graph()
    rm, rv = g.tensor(name="rm", dim=[1, 3, 1, 1]), g.tensor(name="rv", dim=[1, 3, 1, 1])
    momentum = g.tensor(name="momentum", dim=[1]).set_value(0.1)
    eps = g.tensor(name="eps", dim=[1]).set_value(1e-5)
    attrs = hg.BatchnormAttributes().set_previous_running_stats(rm, rv, momentum)
    outs = g.batchnorm(x, scale, bias, attrs, epsilon=eps)
    nm, nv = outs[3], outs[4]
    assert nm is not None and nv is not None
    assert (nm.get_name(), nv.get_name()) == (
        "Batchnorm_0::NEXT_RUNNING_MEAN",
        "Batchnorm_0::NEXT_RUNNING_VARIANCE",
    )
    for t in outs:
        assert t is not None
        t.set_output(True)
    g.validate()
    assert nv.get_dim() == [1, 3, 1, 1]


def test_builder_refuses_wrong_arguments() -> None:
    g, x, scale, bias = _graph()
    err = _error(lambda: g.batchnorm(x, scale, None))
    assert (err.code, err.message) == (
        E.INVALID_VALUE,
        "batchnorm() takes tensors x, scale and bias, then BatchnormAttributes",
    )
    err = _error(lambda: g.batchnorm(x, scale, bias, hg.LayernormAttributes()))
    assert (
        err.message == "batchnorm() expects BatchnormAttributes attributes, got LayernormAttributes"
    )
    err = _error(lambda: g.batchnorm(x, scale, bias, forward_phase=1))
    assert err.message == "batchnorm() got an unknown keyword 'forward_phase'"


def _built() -> hg.Graph:
    g, x, scale, bias = _graph()
    eps = g.tensor(name="eps", dim=[1]).set_value(1e-5)
    for t in g.batchnorm(x, scale, bias, epsilon=eps)[:3]:
        assert t is not None
        t.set_output(True)
    g.validate()
    return g


def test_wire_round_trips_and_peer_stats_are_refused_by_name() -> None:
    import json

    g = _built()
    blob = g.serialize()
    assert hg.Graph.deserialize(blob).serialize() == blob
    text = g.to_json()
    assert hg.Graph.from_json(text).serialize() == blob
    doc = json.loads(text)
    node = doc["nodes"][0]
    assert node["inputs"]["peer_stats_tensor_uid"] == []  # hipDNN writes the array, even empty
    assert node["outputs"]["next_running_mean_tensor_uid"] is None
    node["inputs"]["peer_stats_tensor_uid"] = [1, 2]
    err = _error(lambda: hg.Graph.from_json(json.dumps(doc)))
    assert (err.code, err.message) == (
        E.UNSUPPORTED_GRAPH_FORMAT,
        'hipDNN node "Batchnorm_0": BatchnormAttributes.peer_stats_tensor_uid = (1, 2) is not '
        "supported by this version",
    )
    del node["inputs"]["peer_stats_tensor_uid"]
    err = _error(lambda: hg.Graph.from_json(json.dumps(doc)))
    assert err.code == E.UNSUPPORTED_GRAPH_FORMAT and "peer_stats_tensor_uid" in err.message


def test_peer_stats_are_held_but_refused_by_validation_and_the_writers() -> None:
    g = _built()
    g.serialize()  # every tensor has its uid now
    node = g.nodes[0]
    peers = [hg.TensorAttributes(name="peer", dim=[1, 3, 1, 1]).set_uid(99)]
    node.attributes.set_peer_stats(peers)
    assert node.attributes.get_peer_stats() == peers
    assert node.attributes.copy_for_node().get_peer_stats() == peers
    for write in (g.serialize, g.to_json):  # uids set: written without validating again
        err = _error(write)
        assert (err.code, err.message) == (
            E.UNSUPPORTED_GRAPH_FORMAT,
            "Node Batchnorm_0: BatchnormAttributes.peer_stats_tensor_uid = (99,) is not "
            "supported by this version",
        )
    err = _error(g.validate)
    assert (err.code, err.message) == (
        E.GRAPH_NOT_SUPPORTED,
        "BatchnormNode: peer statistics (multi-GPU batch normalization) are not supported by "
        "hipdnn-graph",
    )
    err = _error(lambda: node.attributes.set_peer_stats(["x"]))  # type: ignore[list-item]
    assert (err.code, err.message) == (E.INVALID_VALUE, "peer_stats holds tensors, got str")
    node.attributes.set_peer_stats([])
    g.validate()
    assert hg.Graph.deserialize(g.serialize()).serialize() == g.serialize()

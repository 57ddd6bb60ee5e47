"""ReductionNode: hipDNN's rules, messages and inference (ports of hipDNN's
TestReductionNode.cpp, plus the exact messages and codes of ReductionNode.hpp), and the graph
builder ``Graph.reduction``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg

M = hg.ReductionMode
E = hg.ErrorCode


def _t(dim: list[int] | None = None, name: str = "") -> hg.TensorAttributes:
    t = hg.TensorAttributes(name=name, data_type=hg.DataType.FLOAT)
    if dim is not None:
        t.set_dim(dim).set_stride(hg.generate_strides(dim))
    return t


def _node(
    x: hg.TensorAttributes | None,
    y: hg.TensorAttributes | None,
    mode: hg.ReductionMode | None = M.ADD,
) -> hg.ReductionNode:
    attrs = hg.ReductionAttributes()
    if mode is not None:
        attrs.set_mode(mode)
    if x is not None:
        attrs.set_x(x)
    if y is not None:
        attrs.set_y(y)
    return hg.ReductionNode(attrs, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_valid_node_pre_validates_and_infers() -> None:
    node = _node(_t([4, 8]), _t([1, 8]))
    node.pre_validate_node()
    node.infer_properties_node()
    assert node.attributes.get_y().get_dim() == [1, 8]


@pytest.mark.parametrize("mode", [m for m in M if m is not M.NOT_SET])
def test_every_mode_is_valid(mode: hg.ReductionMode) -> None:
    _node(_t([4, 8]), _t([1, 8]), mode).pre_validate_node()


@pytest.mark.parametrize(
    ("x", "y", "mode", "message"),
    [
        (None, _t(), M.ADD, "ReductionNode missing input X for pre-validation"),
        (_t(), None, M.ADD, "ReductionNode missing output Y for pre-validation"),
        (_t(), _t(), None, "ReductionNode missing mode for pre-validation"),
        (_t(), _t(), M.NOT_SET, "ReductionNode missing mode for pre-validation"),
        (None, None, None, "ReductionNode missing input X for pre-validation"),  # X first
        (_t(), None, None, "ReductionNode missing output Y for pre-validation"),  # then Y
    ],
)
def test_missing_tensor_or_mode(
    x: hg.TensorAttributes | None,
    y: hg.TensorAttributes | None,
    mode: hg.ReductionMode | None,
    message: str,
) -> None:
    err = _error(_node(x, y, mode).pre_validate_node)
    assert (err.code, err.message) == (E.ATTRIBUTE_NOT_SET, message)


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        ([4, 8, 16], [1, 8], "ReductionNode: X and Y must have the same rank. X rank=3, Y rank=2"),
        ([4, 8], [1, 16], "ReductionNode: Y dim[1]=16 exceeds X dim[1]=8"),
        ([4, 8], [4, 8], "ReductionNode: Y dims must be strictly smaller than X dims in at "
         "least one dimension"),
        ([4, 8], [2, 8], "ReductionNode: Y dim[0]=2 is less than X dim[0]=4 but is not 1"),
        # the first offending index is named, scanning from the left
        ([4, 8], [5, 2], "ReductionNode: Y dim[0]=5 exceeds X dim[0]=4"),
    ],
)  # fmt: skip
def test_shape_rules(x: list[int], y: list[int], message: str) -> None:
    err = _error(_node(_t(x), _t(y)).pre_validate_node)
    assert (err.code, err.message) == (E.INVALID_VALUE, message)


def test_partial_reduction_and_no_dims_are_valid() -> None:
    _node(_t([2, 8, 16, 64]), _t([2, 8, 1, 1])).pre_validate_node()
    _node(_t(), _t()).pre_validate_node()  # no dims: the shape rules are skipped
    _node(_t([4, 8]), _t()).pre_validate_node()  # Y without dims: skipped too


def test_mode_and_flag_values_are_checked() -> None:
    a = hg.ReductionAttributes()
    assert a.set_mode(4).get_mode() is M.MAX
    for bad in (10, True, "ADD", None):
        assert _error(lambda bad=bad: a.set_mode(bad)).code == E.INVALID_VALUE
    assert _error(lambda: a.set_is_deterministic(1)).code == E.INVALID_VALUE
    assert a.get_mode() is M.MAX and a.get_is_deterministic() is False  # untouched


def _graph() -> hg.Graph:
    g = hg.Graph(name="red", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    g.set_intermediate_data_type(hg.DataType.FLOAT)
    return g


def test_builder_without_output_names_y_and_leaves_its_dims_to_the_caller() -> None:
    g = _graph()
    x = g.tensor(dim=[4, 8])
    attrs = hg.ReductionAttributes().set_mode(M.AMAX)
    y = g.reduction(x, attrs)
    assert (y.get_name(), x.get_name(), y.get_is_virtual()) == (
        "Reduction_0::Y", "Reduction_0::X", True,
    )  # fmt: skip
    assert attrs.get_y() is None  # the caller's attributes are copied, not changed
    err = _error(g.validate)  # hipDNN infers no dims for Y
    assert err.code != E.OK
    y.set_dim([1, 8]).set_stride([8, 1]).set_output(True)
    g.validate()
    node = g.nodes[0]
    assert node.attributes.get_mode() is M.AMAX and node.attributes.get_y() is y


def test_builder_with_output_returns_it() -> None:
    g = _graph()
    unnamed = g.tensor(dim=[1, 8])
    assert g.reduction(g.tensor(dim=[4, 8]), unnamed, mode=M.MIN) is unnamed
    assert unnamed.get_name() == "Reduction_0::Y"  # hipDNN names an unnamed Y too
    g = _graph()
    x = g.tensor(name="x", dim=[4, 8])
    y = g.tensor(name="y", dim=[1, 8]).set_output(True)
    assert g.reduction(x, y, mode=M.ADD, name="sum", is_deterministic=True) is y
    g.validate()
    assert g.nodes[0].name == "sum" and g.nodes[0].attributes.get_is_deterministic()


@pytest.mark.parametrize(
    "call",
    [
        lambda g, x: g.reduction(),
        lambda g, x: g.reduction(x, x, x, hg.ReductionAttributes()),
        lambda g, x: g.reduction("x", hg.ReductionAttributes()),
        lambda g, x: g.reduction(x, hg.MatmulAttributes()),
        lambda g, x: g.reduction(x, hg.ReductionAttributes(), attributes=hg.ReductionAttributes()),
        lambda g, x: g.reduction(x, colour=1),
    ],
)
def test_builder_refusals(call: Callable[[hg.Graph, hg.TensorAttributes], object]) -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[4, 8])
    assert _error(lambda: call(g, x)).code == E.INVALID_VALUE
    assert g.nodes == []

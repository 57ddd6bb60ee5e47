"""MatmulNode: hipDNN's rules, messages and inference (ports of hipDNN's TestMatmulNode.cpp,
plus the exact messages and codes of MatmulNode.hpp)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg
from hipdnn_graph.nodes.matmul import check_batch_dims


def _t(dim: list[int] | None = None, name: str = "") -> hg.TensorAttributes:
    t = hg.TensorAttributes(name=name)
    if dim is not None:
        t.set_dim(dim).set_stride(hg.generate_strides(dim))
    return t


def _node(
    a: hg.TensorAttributes | None, b: hg.TensorAttributes | None, c: hg.TensorAttributes | None
) -> hg.MatmulNode:
    attrs = hg.MatmulAttributes()
    for setter, tensor in ((attrs.set_a, a), (attrs.set_b, b), (attrs.set_c, c)):
        if tensor is not None:
            setter(tensor)
    return hg.MatmulNode(attrs, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_pre_validate_succeeds_2d_and_broadcast_batch() -> None:
    _node(_t([4, 8]), _t([8, 5]), _t()).pre_validate_node()
    _node(_t([2, 4, 8]), _t([1, 8, 5]), _t()).pre_validate_node()
    _node(_t([6, 4, 8]), _t([3, 8, 5]), _t()).pre_validate_node()  # 3 divides 6


@pytest.mark.parametrize(
    ("slots", "message"),
    [
        ((None, _t(), _t()), "MatmulNode missing A input"),
        ((_t(), None, _t()), "MatmulNode missing B input"),
        ((_t(), _t(), None), "MatmulNode missing C output"),
        ((None, None, None), "MatmulNode missing A input"),
    ],
)
def test_missing_tensors_in_pre_validation_and_inference(
    slots: tuple[hg.TensorAttributes | None, ...], message: str
) -> None:
    node = _node(*slots)
    for step in (node.pre_validate_node, node.infer_properties_node):
        err = _error(step)
        assert (err.code, err.message) == (hg.ErrorCode.ATTRIBUTE_NOT_SET, message)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        (_t([8]), _t([8, 5]), "Input tensor A must have at least 2 dimensions, but has 1"),
        (_t([8], "x"), _t([8, 5]), "x must have at least 2 dimensions, but has 1"),
        (_t([4, 8]), _t(), "Input tensor B must have at least 2 dimensions, but has 0"),
        (
            _t([2, 4, 8]),
            _t([8, 5]),
            "Matmul input tensors A and B must have the same rank: A has rank=3, B has rank=2",
        ),
        (
            _t([4, 7]),
            _t([8, 5]),
            "MatmulNode: Inner dimensions must match (a[...,K] vs b[...,K,...]). Got 7 vs 8",
        ),
        (
            _t([2, 4, 8]),
            _t([3, 8, 5]),
            "Matmul input tensors A and B have incompatible batch dimensions for broadcasting "
            "at index 0: A has dim=2, B has dim=3",
        ),
        (
            _t([2, 4, 4, 8]),
            _t([2, 6, 8, 5]),
            "Matmul input tensors A and B have incompatible batch dimensions for broadcasting "
            "at index 1: A has dim=4, B has dim=6",
        ),
    ],
)
def test_shape_rules_in_hipdnns_order(
    a: hg.TensorAttributes, b: hg.TensorAttributes, message: str
) -> None:
    err = _error(_node(a, b, _t()).pre_validate_node)
    assert (err.code, err.message) == (hg.ErrorCode.INVALID_VALUE, message)


def test_infer_2d_and_batched_dims_and_packed_strides() -> None:
    c = _t()
    _node(_t([4, 8]), _t([8, 5]), c).infer_properties_node()
    assert (c.get_dim(), c.get_stride()) == ([4, 5], [5, 1])
    c = _t()
    _node(_t([2, 4, 8]), _t([1, 8, 5]), c).infer_properties_node()
    assert (c.get_dim(), c.get_stride()) == ([2, 4, 5], [20, 5, 1])


def test_inference_keeps_given_dims_and_strides() -> None:
    c = hg.TensorAttributes().set_dim([4, 5]).set_stride([1, 4])
    _node(_t([4, 8]), _t([8, 5]), c).infer_properties_node()
    assert (c.get_dim(), c.get_stride()) == ([4, 5], [1, 4])


def test_zero_batch_dims_never_divide() -> None:
    """hipDNN's C++ would divide by zero; here a zero dim is only ever a dividend (so it is
    compatible with any dim; graph validation refuses zero dims before any node rule)."""
    for a, b in ((0, 3), (3, 0), (0, 0)):
        check_batch_dims([a, 4, 8], [b, 8, 5], 1)
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    c = g.matmul(g.tensor(name="a", dim=[0, 4, 8]), g.tensor(name="b", dim=[3, 8, 5]))
    c.set_output(True)
    err = _error(g.validate)
    assert err.message == "Tensor a must have only positive dimensions"


def test_node_type() -> None:
    assert hg.MatmulNode(hg.MatmulAttributes()).get_node_type() == hg.NodeType.MATMUL == 9


def test_graph_builder_names_and_validates() -> None:
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    a, b = hg.TensorAttributes().set_dim([3, 16, 32]), hg.TensorAttributes().set_dim([3, 32, 8])
    for t in (a, b):
        t.set_stride(hg.generate_strides(t.get_dim()))
    c = g.matmul(a, b, hg.MatmulAttributes())
    c.set_output(True)
    g.validate()
    assert (a.get_name(), b.get_name(), c.get_name()) == (
        "Matmul_0::A",
        "Matmul_0::B",
        "Matmul_0::C",
    )
    assert (c.get_dim(), c.get_stride(), c.get_data_type()) == (
        [3, 16, 8],
        [128, 8, 1],
        hg.DataType.BFLOAT16,
    )
    assert g.nodes[0].get_node_type() == hg.NodeType.MATMUL


def test_graph_builder_refusals_and_keywords() -> None:
    g = hg.Graph()
    x = g.tensor(name="x", dim=[2, 2])
    for call, message in (
        (lambda: g.matmul(x), "matmul() takes tensors A and B"),
        (lambda: g.matmul(x, "b"), "matmul() takes tensors A and B"),
        (lambda: g.matmul(x, x, hg.PointwiseAttributes()), "expects MatmulAttributes"),
        (lambda: g.matmul(x, x, mode=1), "unknown keyword 'mode'"),
    ):
        err = _error(call)
        assert err.code == hg.ErrorCode.INVALID_VALUE and message in err.message
    assert len(g.nodes) == 0
    c = g.matmul(x, x, name="mm", compute_data_type=hg.DataType.DOUBLE)
    assert (
        c.get_name() == "mm::C"
        and g.nodes[0].attributes.get_compute_data_type() == hg.DataType.DOUBLE
    )

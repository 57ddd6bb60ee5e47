"""BlockScaleQuantizeNode and BlockScaleDequantizeNode: hipDNN's rules, messages and inference
(BlockScaleQuantizeNode.hpp @ f8bc0a0e, BlockScaleDequantizeNode.hpp @ 083f7882; the checks of
hipDNN's TestBlockScaleQuantizeNode.cpp and TestBlockScaleDequantizeNode.cpp), the attributes'
setters and the ``Graph`` builders."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg

E = hg.ErrorCode
X4 = [2, 64, 32, 32]
S4 = [65536, 1024, 32, 1]
XY = "Input tensor (x) and Output tensor (y)"


def _t(dim: list[int] | None = None, stride: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes()
    if dim is not None:
        t.set_dim(dim)
    if stride is not None:
        t.set_stride(stride)
    return t


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def _q(
    x: hg.TensorAttributes | None = None, block: int | None = 32, **members: object
) -> hg.BlockScaleQuantizeNode:
    a = hg.BlockScaleQuantizeAttributes().set_x(x or _t(X4, S4)).set_y(_t()).set_scale(_t())
    if block is not None:
        a.set_block_size(block)
    for key, value in members.items():
        getattr(a, f"set_{key}")(value)
    return hg.BlockScaleQuantizeNode(a, hg.GraphAttributes())


def _dq(
    x: hg.TensorAttributes | None = None, blocks: list[int] | None = None
) -> hg.BlockScaleDequantizeNode:
    a = hg.BlockScaleDequantizeAttributes().set_x(x or _t(X4, S4)).set_scale(_t([2, 2, 32, 32]))
    a.set_y(_t()).set_block_size([32] if blocks is None else blocks)
    return hg.BlockScaleDequantizeNode(a, hg.GraphAttributes())


# ----- quantize: pre-validation -----------------------------------------------------------------
def test_quantize_valid_nodes() -> None:
    _q().pre_validate_node()
    _q(axis=1).pre_validate_node()
    _q(block=8).pre_validate_node()  # default axis: the last dim, 32 % 8 == 0
    _q(_t()).pre_validate_node()  # X without dims: the dim checks wait
    _q(_t(), axis=100).pre_validate_node()
    _q(_t([2, 0], [1, 1]), block=7).pre_validate_node()  # a dim of 0 is divisible


def test_quantize_missing_tensors_in_hipdnns_order() -> None:
    a = hg.BlockScaleQuantizeAttributes().set_block_size(32)
    for name in ("x", "y", "scale"):
        err = _error(hg.BlockScaleQuantizeNode(a, hg.GraphAttributes()).pre_validate_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"BlockScaleQuantizeNode missing {name} for pre-validation",
        )
        getattr(a, f"set_{name}")(_t())


@pytest.mark.parametrize(
    ("block", "members", "code", "message"),
    [
        (None, {}, E.ATTRIBUTE_NOT_SET, "BlockScaleQuantizeNode block_size not set"),
        (0, {}, E.INVALID_VALUE, "BlockScaleQuantizeNode block_size must be positive, got 0"),
        (-1, {}, E.INVALID_VALUE, "BlockScaleQuantizeNode block_size must be positive, got -1"),
        (
            32,
            {"axis": -1},
            E.INVALID_VALUE,
            "BlockScaleQuantizeNode axis must be non-negative, got -1",
        ),
        (
            32,
            {"axis": 4},
            E.INVALID_VALUE,
            "BlockScaleQuantizeNode axis 4 exceeds input tensor rank 4",
        ),
        (
            30,
            {"axis": 1},
            E.INVALID_VALUE,
            "BlockScaleQuantizeNode dimension at axis 1 (64) must be divisible by block_size (30)",
        ),
        (
            7,
            {},
            E.INVALID_VALUE,
            "BlockScaleQuantizeNode dimension at axis 3 (32) must be divisible by block_size (7)",
        ),
    ],
)
def test_quantize_member_rules(
    block: int | None, members: dict[str, int], code: hg.ErrorCode, message: str
) -> None:
    err = _error(_q(block=block, **members).pre_validate_node)
    assert (err.code, err.message) == (code, message)


def test_quantize_block_size_is_checked_before_x_dims() -> None:
    err = _error(_q(_t(), block=0).pre_validate_node)  # X has no dims: still refused
    assert err.message == "BlockScaleQuantizeNode block_size must be positive, got 0"


@pytest.mark.parametrize(
    ("y", "message"),
    [
        ([2, 64, 16, 16], f"{XY} dimension mismatch at index 2: 32 vs 16"),
        ([2, 64, 32], f"{XY} must have the same number of dimensions: 4 vs 3"),
    ],
)
def test_quantize_y_takes_xs_shape(y: list[int], message: str) -> None:
    node = _q()
    node.attributes.set_y(_t(y))
    err = _error(node.pre_validate_node)
    assert (err.code, err.message) == (E.INVALID_VALUE, message)


# ----- quantize: inference ----------------------------------------------------------------------
def test_quantize_infers_y_like_x_and_scale_dims() -> None:
    node = _q(_t([1, 2, 3, 64], [5, 6, 7, 8]))  # hipDNN's InferPropertiesNode: Y copies X
    node.infer_properties_node()
    a = node.attributes
    assert (a.get_y().get_dim(), a.get_y().get_stride()) == ([1, 2, 3, 64], [5, 6, 7, 8])
    # SCALE: X's dims with the block dim divided, laid out in X's stride order
    assert a.get_scale().get_dim() == [1, 2, 3, 2]
    # X's strides [5, 6, 7, 8] put dim 0 innermost, dim 3 outermost
    assert a.get_scale().get_stride() == [1, 1, 2, 6]
    nhwc = _q(_t([2, 64, 4, 4], [1024, 1, 256, 64]), axis=1)
    nhwc.infer_properties_node()
    scale = nhwc.attributes.get_scale()
    assert (scale.get_dim(), scale.get_stride()) == ([2, 2, 4, 4], [32, 1, 8, 2])


def test_quantize_packed_strides_without_x_strides() -> None:
    node = _q(_t([4, 64]))
    node.infer_properties_node()
    a = node.attributes
    assert a.get_y().get_stride() == [64, 1]
    assert (a.get_scale().get_dim(), a.get_scale().get_stride()) == ([4, 2], [2, 1])


def test_quantize_transpose_puts_the_block_axis_innermost() -> None:
    # X's order from innermost: dims 2, 1, 0; rotated to start at the axis: 1, 0, 2
    node = _q(_t([4, 64, 8], [512, 8, 1]), axis=1, transpose=True)
    node.infer_properties_node()
    a = node.attributes
    assert a.get_y().get_stride() == [64, 1, 256]
    assert (a.get_scale().get_dim(), a.get_scale().get_stride()) == ([4, 2, 8], [2, 1, 8])
    # without an axis: X's own order (innermost last dim); singleton dims sort innermost on ties
    plain = _q(_t([4, 1, 64], [64, 64, 1]), transpose=True)
    plain.infer_properties_node()
    assert plain.attributes.get_y().get_stride() == [64, 64, 1]


def test_quantize_keeps_what_the_caller_set() -> None:
    node = _q(_t([4, 64], [64, 1]))
    node.attributes.get_scale().set_dim([4, 2]).set_stride([1, 4])
    node.attributes.get_y().set_stride([1, 4])
    node.infer_properties_node()
    assert node.attributes.get_scale().get_stride() == [1, 4]
    assert node.attributes.get_y().get_stride() == [1, 4]


def test_quantize_refuses_layouts_of_another_rank() -> None:
    node = _q(_t([4, 64], [64, 1]))
    node.attributes.get_scale().set_dim([4, 2, 1])
    err = _error(node.infer_properties_node)
    assert err.code == E.INVALID_VALUE and "cannot infer the strides" in err.message


def test_quantize_infer_missing_tensors() -> None:
    for present, missing in (((), "x"), (("x",), "y"), (("x", "y"), "scale")):
        a = hg.BlockScaleQuantizeAttributes()
        for name in present:
            getattr(a, f"set_{name}")(_t())
        err = _error(hg.BlockScaleQuantizeNode(a, hg.GraphAttributes()).infer_properties_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"BlockScaleQuantizeNode missing {missing} for setting properties",
        )


# ----- dequantize: pre-validation ---------------------------------------------------------------
def test_dequantize_valid_nodes() -> None:
    _dq().pre_validate_node()
    _dq(blocks=[2, 64, 32, 32]).pre_validate_node()  # as many entries as X has dims
    _dq(_t(), blocks=[32, 16, 8]).pre_validate_node()  # X without dims: the checks wait


def test_dequantize_missing_tensors_in_hipdnns_order() -> None:
    a = hg.BlockScaleDequantizeAttributes().set_block_size([32])
    for name in ("x", "scale", "y"):
        err = _error(hg.BlockScaleDequantizeNode(a, hg.GraphAttributes()).pre_validate_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            f"BlockScaleDequantizeNode missing {name} for pre-validation",
        )
        getattr(a, f"set_{name}")(_t())
    a.set_block_size([])
    err = _error(hg.BlockScaleDequantizeNode(a, hg.GraphAttributes()).pre_validate_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "BlockScaleDequantizeNode block_size must not be empty",
    )


@pytest.mark.parametrize(
    ("x", "blocks", "message"),
    [
        (X4, [0], "BlockScaleDequantizeNode block_size[0] must be positive, got 0"),
        (X4, [32, -1], "BlockScaleDequantizeNode block_size[1] must be positive, got -1"),
        (
            [2, 64],
            [32, 16, 8],
            "BlockScaleDequantizeNode block_size has 3 entries but input tensor has only 2 "
            "dimensions",
        ),
        ([2, 64], [0, 16, 8], "BlockScaleDequantizeNode block_size[0] must be positive, got 0"),
    ],
)
def test_dequantize_block_size_rules(x: list[int], blocks: list[int], message: str) -> None:
    err = _error(_dq(_t(x), blocks).pre_validate_node)
    assert (err.code, err.message) == (E.INVALID_VALUE, message)


def test_dequantize_y_shape_is_checked_before_the_block_sizes() -> None:
    node = _dq(blocks=[0])
    node.attributes.set_y(_t([2, 64, 32]))
    err = _error(node.pre_validate_node)
    assert err.message == (
        "Input tensor (x) and Output tensor (y) must have the same number of dimensions: 4 vs 3"
    )
    node.attributes.set_y(_t([2, 64, 16, 16]))
    assert "dimension mismatch at index 2: 32 vs 16" in _error(node.pre_validate_node).message


# ----- dequantize: inference --------------------------------------------------------------------
def test_dequantize_infers_y_like_x() -> None:
    node = _dq(_t([1, 2, 3, 4], [5, 6, 7, 8]))
    node.infer_properties_node()
    y = node.attributes.get_y()
    assert (y.get_dim(), y.get_stride()) == ([1, 2, 3, 4], [5, 6, 7, 8])
    bare = _dq(_t([4, 64]))
    bare.infer_properties_node()
    assert bare.attributes.get_y().get_stride() == []  # nothing to copy: left for the graph


def test_dequantize_infer_missing_tensors() -> None:
    a = hg.BlockScaleDequantizeAttributes()
    err = _error(hg.BlockScaleDequantizeNode(a, hg.GraphAttributes()).infer_properties_node)
    assert err.message == "BlockScaleDequantizeNode missing x for setting properties"
    a.set_x(_t())
    err = _error(hg.BlockScaleDequantizeNode(a, hg.GraphAttributes()).infer_properties_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "BlockScaleDequantizeNode missing y for setting properties",
    )


# ----- attributes -------------------------------------------------------------------------------
def test_quantize_attributes() -> None:
    a = hg.BlockScaleQuantizeAttributes()
    assert (a.get_block_size(), a.get_axis(), a.get_transpose()) == (None, None, False)
    a.set_block_size(64).set_axis(2).set_transpose(True)
    assert (a.get_block_size(), a.get_axis(), a.get_transpose()) == (64, 2, True)
    for bad, call in (
        (2**31, lambda: a.set_block_size(2**31)),
        ("32", lambda: a.set_block_size("32")),  # type: ignore[arg-type]
        (1.0, lambda: a.set_axis(1.0)),  # type: ignore[arg-type]
        (1, lambda: a.set_transpose(1)),  # type: ignore[arg-type]
    ):
        err = _error(call)
        assert err.code == E.INVALID_VALUE, bad
    assert (a.get_block_size(), a.get_axis(), a.get_transpose()) == (64, 2, True)


def test_dequantize_attributes_setters_as_hipdnns() -> None:
    a = hg.BlockScaleDequantizeAttributes()
    assert (a.get_block_size(), a.get_is_negative_scale()) == ([], False)
    assert a.set_block_size(32, 2).get_block_size() == [1, 1, 32]  # padded with 1
    assert a.set_block_size(16).get_block_size() == [16, 1, 32]
    assert a.set_block_size(8, -1).get_block_size() == [16, 1, 32]  # a negative idx: no change
    assert a.set_block_size([4, 8]).get_block_size() == [4, 8]
    assert a.set_is_negative_scale(True).get_is_negative_scale() is True
    for call in (
        lambda: a.set_block_size([2**31]),
        lambda: a.set_block_size(["4"]),  # type: ignore[list-item]
        lambda: a.set_is_negative_scale("yes"),  # type: ignore[arg-type]
    ):
        assert _error(call).code == E.INVALID_VALUE
    assert a.get_block_size() == [4, 8]


# ----- Graph builders ---------------------------------------------------------------------------
def _graph() -> hg.Graph:
    f32 = hg.DataType.FLOAT
    return hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)


def test_graph_quantize_then_dequantize() -> None:
    g = _graph()
    x = g.tensor(dim=[4, 64])
    attrs = hg.BlockScaleQuantizeAttributes().set_block_size(32)
    y, scale = g.block_scale_quantize(x, attrs)
    y.set_data_type(hg.DataType.FP8_E4M3)
    scale.set_data_type(hg.DataType.FP8_E8M0)
    out = g.block_scale_dequantize(y, scale, block_size=[32], name="dq")
    out.set_output(True)
    g.validate()
    assert attrs.get_name() == ""  # the caller's attributes are copied, not renamed
    assert (x.get_name(), y.get_name(), scale.get_name()) == (
        "BlockScaleQuantize_0::X",
        "BlockScaleQuantize_0::Y",
        "BlockScaleQuantize_0::SCALE",
    )
    assert (scale.get_dim(), out.get_name(), out.get_dim()) == ([4, 2], "dq::Y", [4, 64])


def test_graph_builders_refuse_bad_arguments() -> None:
    g = _graph()
    x = g.tensor(dim=[4, 64])
    for call, text in (
        (lambda: g.block_scale_quantize("x"), "takes tensor x"),
        (lambda: g.block_scale_dequantize(x, None), "takes tensors x and scale"),
        (
            lambda: g.block_scale_quantize(x, hg.BlockScaleDequantizeAttributes()),
            "expects BlockScaleQuantizeAttributes",
        ),
        (lambda: g.block_scale_quantize(x, bogus=1), "unknown keyword 'bogus'"),
    ):
        err = _error(call)
        assert err.code == E.INVALID_VALUE and text in err.message

"""ConvolutionFpropNode: hipDNN's checks in order, codes and messages, and Y's dim/stride
inference (from ConvolutionFpropNode.hpp)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg
from hipdnn_graph.nodes.conv_rules import c_div, c_mod

E = hg.ErrorCode
L = "ConvolutionFpropNode"


def _t(dim: list[int] | None = None, stride: list[int] | None = None) -> hg.TensorAttributes:
    t = hg.TensorAttributes()
    if dim is not None:
        t.set_dim(dim).set_stride(stride if stride is not None else hg.generate_strides(dim))
    return t


def _attrs(
    x: list[int] | None = (1, 4, 8, 8),  # type: ignore[assignment]
    w: list[int] | None = (6, 4, 3, 3),  # type: ignore[assignment]
    y: list[int] | None = None,
    pad: list[int] | None = (1, 1),  # type: ignore[assignment]
    stride: list[int] | None = (1, 1),  # type: ignore[assignment]
    dilation: list[int] | None = (1, 1),  # type: ignore[assignment]
) -> hg.ConvFpropAttributes:
    a = hg.ConvFpropAttributes()
    if x is not None:
        a.set_x(_t(list(x)))
    if w is not None:
        a.set_w(_t(list(w)))
    a.set_y(_t(list(y)) if y is not None else hg.TensorAttributes())
    if pad is not None:
        a.set_padding(list(pad))
    if stride is not None:
        a.set_stride(list(stride))
    if dilation is not None:
        a.set_dilation(list(dilation))
    return a


def _node(a: hg.ConvFpropAttributes) -> hg.ConvolutionFpropNode:
    return hg.ConvolutionFpropNode(a, hg.GraphAttributes())


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def test_valid_convolutions_pass_and_infer_y() -> None:
    a = _attrs()
    node = _node(a)
    node.pre_validate_node()
    node.infer_properties_node()
    y = a.get_y()
    assert y is not None and (y.dim, y.stride) == ([1, 6, 8, 8], [384, 64, 8, 1])
    # strided, dilated, asymmetric padding; grouped (C=4, W's C=2: two groups)
    a = _attrs(x=[2, 4, 9, 7], w=[6, 2, 3, 2], pad=None, stride=[2, 3], dilation=[2, 1])
    a.set_pre_padding([1, 0]).set_post_padding([0, 2])
    _node(a).pre_validate_node()
    _node(a).infer_properties_node()
    y = a.get_y()
    assert y is not None and y.dim == [2, 6, (9 + 1 - 5) // 2 + 1, (7 + 2 - 2) // 3 + 1]
    _node(_attrs(y=[1, 6, 8, 8])).pre_validate_node()


def test_y_strides_follow_xs_memory_order() -> None:
    a = _attrs(pad=[0, 0])
    x = a.get_x()
    assert x is not None
    x.set_stride([256, 1, 32, 4])  # channels-last
    _node(a).infer_properties_node()
    y = a.get_y()
    assert y is not None and (y.dim, y.stride) == ([1, 6, 6, 6], [216, 1, 36, 6])


CASES: list[tuple[Callable[[], hg.ConvFpropAttributes], hg.ErrorCode, str]] = [
    (lambda: _attrs(x=None), E.ATTRIBUTE_NOT_SET, f"{L} missing x (input) for pre-validation"),
    (lambda: _attrs(w=None), E.ATTRIBUTE_NOT_SET, f"{L} missing w (weights) for pre-validation"),
    (lambda: _attrs(pad=None), E.ATTRIBUTE_NOT_SET, f"{L} missing pre_padding for pre-validation"),
    (
        lambda: _attrs(pad=None).set_pre_padding([0, 0]),
        E.ATTRIBUTE_NOT_SET,
        f"{L} missing post_padding for pre-validation",
    ),
    (lambda: _attrs(stride=None), E.ATTRIBUTE_NOT_SET, f"{L} missing stride for pre-validation"),
    (
        lambda: _attrs(dilation=None),
        E.ATTRIBUTE_NOT_SET,
        f"{L} missing dilation for pre-validation",
    ),
    (
        lambda: _attrs(x=[1, 4, 0, 8]),
        E.INVALID_VALUE,
        f"{L}: Input tensor dimensions and strides must be set and positive",
    ),
    (
        lambda: _attrs(x=[1, 4]),
        E.INVALID_VALUE,
        f"{L}: Input tensor must have at least 3 dimensions (N, C, spatial)",
    ),
    (
        lambda: _attrs(w=[6, -4, 3, 3]),
        E.INVALID_VALUE,
        f"{L}: Weight tensor dimensions and strides must be set and positive",
    ),
    (
        lambda: _attrs(w=[6, 4, 3]),
        E.INVALID_VALUE,
        f"{L}: Weight tensor dimension count must match input tensor dimension count",
    ),
    (
        lambda: _attrs(w=[6, 3, 3, 3]),
        E.INVALID_VALUE,
        f"{L}: Input tensor channels must match weight tensor input channels or be divisible "
        "by them for grouped convolution",
    ),
    (
        lambda: _attrs(w=[5, 2, 3, 3]),
        E.INVALID_VALUE,
        f"{L}: Weight tensor output channels must be divisible by the number of groups",
    ),
    (
        lambda: _attrs(y=[1, 6, 8]),
        E.INVALID_VALUE,
        f"{L}: Output tensor dimension count must match input tensor dimension count",
    ),
    (
        lambda: _attrs(y=[2, 6, 8, 8]),
        E.INVALID_VALUE,
        f"{L}: Output tensor batch size must match input tensor batch size",
    ),
    (
        lambda: _attrs(y=[1, 5, 8, 8]),
        E.INVALID_VALUE,
        f"{L}: Output tensor channels must match weight tensor output channels",
    ),
    (
        lambda: _attrs(y=[1, 6, 0, 8]),
        E.INVALID_VALUE,
        f"{L}: Output tensor dimensions must be set and positive",
    ),
    (
        lambda: _attrs(pad=[1]),
        E.INVALID_VALUE,
        f"{L}: pre_padding parameter count must match spatial dimension count",
    ),
    (
        lambda: _attrs(pad=[1, 1]).set_post_padding([1, 1, 1]),
        E.INVALID_VALUE,
        f"{L}: post_padding parameter count must match spatial dimension count",
    ),
    (
        lambda: _attrs(stride=[1]),
        E.INVALID_VALUE,
        f"{L}: stride parameter count must match spatial dimension count",
    ),
    (
        lambda: _attrs(dilation=[1, 1, 1]),
        E.INVALID_VALUE,
        f"{L}: dilation parameter count must match spatial dimension count",
    ),
    (lambda: _attrs(stride=[1, 0]), E.INVALID_VALUE, f"{L}: Stride must be > 0"),
    (lambda: _attrs(dilation=[0, 1]), E.INVALID_VALUE, f"{L}: Dilation must > 0"),
    (
        lambda: _attrs(pad=[1, 1]).set_pre_padding([-1, 0]),
        E.INVALID_VALUE,
        f"{L}: Pre-padding must be non-negative",
    ),
    (
        lambda: _attrs(pad=[1, 1]).set_post_padding([0, -1]),
        E.INVALID_VALUE,
        f"{L}: Post-padding must be non-negative",
    ),
    (
        lambda: _attrs(x=[1, 4, 2, 8], y=[1, 6, 1, 8], pad=[0, 0], dilation=[2, 1]),
        E.INVALID_VALUE,
        f"{L}: Input spatial dimension at index 0 (2) is too small for the kernel size (3) and "
        "dilation (2)",
    ),
    (
        lambda: _attrs(y=[1, 6, 8, 7]),
        E.INVALID_VALUE,
        f"{L}: Output tensor spatial dimension at index 1 (7) does not match expected dimension "
        "(8) given input dimensions, kernel size, padding, stride, and dilation",
    ),
]


@pytest.mark.parametrize(("make", "code", "message"), CASES)
def test_pre_validation_checks_in_hipdnns_order(
    make: Callable[[], hg.ConvFpropAttributes], code: hg.ErrorCode, message: str
) -> None:
    err = _error(_node(make()).pre_validate_node)
    assert (err.code, err.message) == (code, message)


def test_missing_y_and_y_strides_that_are_not_positive() -> None:
    a = hg.ConvFpropAttributes().set_x(_t([1, 4, 8, 8])).set_w(_t([6, 4, 3, 3]))
    err = _error(_node(a).pre_validate_node)
    assert err.message == f"{L} missing y (output) for pre-validation"
    a = _attrs()
    y = a.get_y()
    assert y is not None
    y.set_stride([1, 1, 1, 1])  # strides without dims
    err = _error(_node(a).pre_validate_node)
    assert err.message == f"{L}: Output tensor dimensions and strides must be set and positive"


def test_inference_messages() -> None:
    for make, message in (
        (lambda: _attrs(x=None), f"{L} missing x for setting properties"),
        (lambda: _attrs(w=None), f"{L} missing w for setting properties"),
        (
            lambda: _attrs(stride=[1]),
            f"{L}: Insufficient padding/stride/dilation parameters for spatial dimensions",
        ),
        (lambda: _attrs(stride=[1, 0]), f"{L}: Stride must be positive"),
        (lambda: _attrs(dilation=[1, -1]), f"{L}: Dilation must be positive"),
        (
            lambda: _attrs(x=[1, 4, 2, 2], pad=[0, 0]),
            f"{L}: Invalid convolution parameters result in negative output size",
        ),
    ):
        err = _error(_node(make()).infer_properties_node)
        assert (err.code, err.message) == (E.INVALID_VALUE, message) or (
            err.code is E.ATTRIBUTE_NOT_SET and message == err.message
        )
    a = _attrs()
    x = a.get_x()
    assert x is not None
    x.stride = []
    err = _error(_node(a).infer_properties_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        f"{L}: Cannot infer output strides - missing input strides",
    )


def test_attribute_members_and_defaults() -> None:
    a = hg.ConvFpropAttributes()
    assert a.get_convolution_mode() is hg.ConvolutionMode.CROSS_CORRELATION
    assert (a.get_pre_padding(), a.get_stride()) == ([], [])
    a.set_convolution_mode(hg.ConvolutionMode.CONVOLUTION).set_padding([2, 3])
    assert (a.get_pre_padding(), a.get_post_padding()) == ([2, 3], [2, 3])
    assert [m.name for m in hg.ConvolutionMode] == ["NOT_SET", "CROSS_CORRELATION", "CONVOLUTION"]
    for bad in (lambda: a.set_stride([1.5]), lambda: a.set_convolution_mode(7)):
        assert _error(bad).code is E.INVALID_VALUE
    assert (c_mod(-7, 2), c_div(-7, 2)) == (-1, -3)


def test_graph_builder_names_and_copies() -> None:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(dim=[1, 4, 8, 8])
    w = g.tensor(name="w", dim=[6, 4, 3, 3])
    attrs = hg.ConvFpropAttributes().set_padding([1, 1]).set_stride([1, 1])
    y = g.conv_fprop(x, w, attrs, dilation=[1, 1])
    assert attrs.get_dilation() == [] and attrs.get_name() == ""
    y.set_output(True)
    g.validate()
    assert (x.get_name(), w.get_name(), y.get_name()) == (
        "ConvolutionFprop_0::X",
        "w",
        "ConvolutionFprop_0::Y",
    )
    assert y.get_dim() == [1, 6, 8, 8]
    assert _error(lambda: g.conv_fprop(x, attrs)).code is E.INVALID_VALUE
    assert _error(lambda: g.conv_fprop(x, w, hg.MatmulAttributes())).code is E.INVALID_VALUE


def test_hipdnns_inference_cases() -> None:
    """Ported from hipDNN's TestConvolutionNode: 2D and 3D inference (W without strides), and
    the stride inference failures (all ATTRIBUTE_NOT_SET)."""
    for x, w, pad, y in (
        ([1, 3, 32, 32], [64, 3, 3, 3], [1, 1], [1, 64, 32, 32]),
        ([2, 16, 8, 16, 16], [32, 16, 3, 3, 3], [0, 1, 1], [2, 32, 6, 16, 16]),
    ):
        a = _attrs(x=x, w=None, pad=pad, stride=[1] * len(pad), dilation=[1] * len(pad))
        a.set_w(hg.TensorAttributes(dim=w))
        _node(a).infer_properties_node()
        assert a.get_y() is not None and a.get_y().dim == y  # type: ignore[union-attr]
    for x_stride, y_dim, message in (
        ([], [1, 64, 32, 32], "Cannot infer output strides - missing input strides"),
        ([3072, 1024, 32, 1], [1], "Stride dimension mismatch between input and output tensors"),
        ([3072, 1024, 32], [1, 64, 32, 32], "Stride dimension mismatch between input and output"),
    ):
        a = _attrs(x=[1, 3, 32, 32], w=[64, 3, 3, 3])
        x_t, y_t = a.get_x(), a.get_y()
        assert x_t is not None and y_t is not None
        x_t.stride, y_t.dim = x_stride, y_dim
        err = _error(_node(a).infer_properties_node)
        assert err.code is E.ATTRIBUTE_NOT_SET and err.message.startswith(f"{L}: {message}")

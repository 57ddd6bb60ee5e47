"""ConvolutionDgradNode: hipDNN's checks in order, codes and messages, and DX's dim/stride
inference (from ConvolutionDgradNode.hpp)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

import hipdnn_graph as hg

E = hg.ErrorCode
L = "ConvolutionDgradNode"


def _t(dim: Sequence[int] | None) -> hg.TensorAttributes:
    t = hg.TensorAttributes()
    if dim is not None:
        t.set_dim(list(dim)).set_stride(hg.generate_strides(list(dim)))
    return t


def _attrs(
    dy: Sequence[int] | None = (1, 6, 8, 8),
    w: Sequence[int] | None = (6, 4, 3, 3),
    dx: Sequence[int] | None = None,
    pad: Sequence[int] | None = (1, 1),
    stride: Sequence[int] | None = (1, 1),
    dilation: Sequence[int] | None = (1, 1),
) -> hg.ConvDgradAttributes:
    a = hg.ConvDgradAttributes()
    if dy is not None:
        a.set_dy(_t(dy))
    if w is not None:
        a.set_w(_t(w))
    a.set_dx(_t(dx) if dx is not None else hg.TensorAttributes())
    for setter, values in (
        (a.set_padding, pad),
        (a.set_stride, stride),
        (a.set_dilation, dilation),
    ):
        if values is not None:
            setter(list(values))
    return a


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def _node(a: hg.ConvDgradAttributes) -> hg.ConvolutionDgradNode:
    return hg.ConvolutionDgradNode(a, hg.GraphAttributes())


def test_valid_gradients_pass_and_infer_dx() -> None:
    a = _attrs()
    _node(a).pre_validate_node()
    _node(a).infer_properties_node()
    dx = a.get_dx()
    assert dx is not None and (dx.dim, dx.stride) == ([1, 4, 8, 8], [256, 64, 8, 1])
    # grouped: DX has 8 channels, W's C is 4 (two groups), given dims pass
    _node(_attrs(dx=[1, 8, 8, 8])).pre_validate_node()
    # strided: DY 4x4 from an 8x8 input (pad 1, stride 2, kernel 3): the inferred DX is 7x7
    a = _attrs(dy=[1, 6, 4, 4], stride=[2, 2])
    _node(a).infer_properties_node()
    assert a.get_dx() is not None and a.get_dx().dim == [1, 4, 7, 7]  # type: ignore[union-attr]
    _node(_attrs(dy=[1, 6, 4, 4], dx=[1, 4, 8, 8], stride=[2, 2])).pre_validate_node()


CASES: list[tuple[Callable[[], hg.ConvDgradAttributes], hg.ErrorCode, str]] = [
    (lambda: _attrs(dy=None), E.ATTRIBUTE_NOT_SET,
     f"{L} missing dy (gradient of output) for pre-validation"),
    (lambda: _attrs(w=None), E.ATTRIBUTE_NOT_SET, f"{L} missing w (weights) for pre-validation"),
    (lambda: _attrs(pad=None), E.ATTRIBUTE_NOT_SET, f"{L} missing pre_padding for pre-validation"),
    (lambda: _attrs(stride=None), E.ATTRIBUTE_NOT_SET, f"{L} missing stride for pre-validation"),
    (lambda: _attrs(dilation=None), E.ATTRIBUTE_NOT_SET,
     f"{L} missing dilation for pre-validation"),
    (lambda: _attrs(dy=[1, 6, 0, 8]), E.INVALID_VALUE,
     f"{L}: dy tensor dimensions and strides must be set and positive"),
    (lambda: _attrs(dy=[1, 6]), E.INVALID_VALUE,
     f"{L}: dy tensor must have at least 3 dimensions (N, C, spatial)"),
    (lambda: _attrs(w=[6, 0, 3, 3]), E.INVALID_VALUE,
     f"{L}: Weight tensor dimensions and strides must be set and positive"),
    (lambda: _attrs(w=[6, 4, 3]), E.INVALID_VALUE,
     f"{L}: Weight tensor dimension count must match dy tensor dimension count"),
    (lambda: _attrs(w=[5, 4, 3, 3]), E.INVALID_VALUE,
     f"{L}: dy tensor channels must match weight tensor output channels"),
    (lambda: _attrs(dx=[1, 4, 8]), E.INVALID_VALUE,
     f"{L}: dx tensor dimension count must match dy tensor dimension count"),
    (lambda: _attrs(dx=[2, 4, 8, 8]), E.INVALID_VALUE,
     f"{L}: dx tensor batch size must match dy tensor batch size"),
    (lambda: _attrs(dx=[1, 6, 8, 8]), E.INVALID_VALUE,
     f"{L}: dx tensor channels must be divisible by weight tensor input channels"),
    (lambda: _attrs(dx=[1, 16, 8, 8]), E.INVALID_VALUE,  # 4 groups do not divide K=6
     f"{L}: Weight tensor output channels must be divisible by the number of groups"),
    (lambda: _attrs(dx=[1, 4, 0, 8]), E.INVALID_VALUE,
     f"{L}: dx tensor dimensions must be set and positive"),
    (lambda: _attrs(dx=[1, 0, 8, 8]), E.INVALID_VALUE,  # group count 0: hipDNN divides by it
     f"{L}: dx tensor dimensions must be set and positive"),
    (lambda: _attrs(pad=[1]), E.INVALID_VALUE,
     f"{L}: pre_padding parameter count must match spatial dimension count"),
    (lambda: _attrs(dilation=[1]), E.INVALID_VALUE,
     f"{L}: dilation parameter count must match spatial dimension count"),
    (lambda: _attrs(stride=[0, 1]), E.INVALID_VALUE, f"{L}: Stride must be > 0"),
    (lambda: _attrs(dilation=[1, 0]), E.INVALID_VALUE, f"{L}: Dilation must > 0"),
    (lambda: _attrs(pad=[-1, 0]), E.INVALID_VALUE, f"{L}: Pre-padding must be non-negative"),
    (lambda: _attrs(dy=[1, 6, 1, 8], dx=[1, 4, 2, 8], pad=[0, 1], dilation=[2, 1]),
     E.INVALID_VALUE,
     f"{L}: Input spatial dimension at index 0 (2) is too small for the kernel size (3) and "
     "dilation (2)"),
    (lambda: _attrs(dx=[1, 4, 8, 9]), E.INVALID_VALUE,
     f"{L}: dy tensor spatial dimension at index 1 (8) does not match expected dimension (9) "
     "given dx dimensions, kernel size, padding, stride, and dilation"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "code", "message"), CASES)
def test_pre_validation_checks_in_hipdnns_order(
    make: Callable[[], hg.ConvDgradAttributes], code: hg.ErrorCode, message: str
) -> None:
    err = _error(_node(make()).pre_validate_node)
    assert (err.code, err.message) == (code, message)


def test_missing_dx_and_dx_strides() -> None:
    a = hg.ConvDgradAttributes().set_dy(_t([1, 6, 8, 8])).set_w(_t([6, 4, 3, 3]))
    assert _error(_node(a).pre_validate_node).message == (
        f"{L} missing dx (gradient of input) for pre-validation"
    )
    a = _attrs()
    dx = a.get_dx()
    assert dx is not None
    dx.set_stride([1, 1, 1, 1])
    assert _error(_node(a).pre_validate_node).message == (
        f"{L}: dx tensor dimensions and strides must be set and positive"
    )


def test_inference_messages() -> None:
    for make, code, message in (
        (lambda: _attrs(w=None), E.ATTRIBUTE_NOT_SET, f"{L} missing w for setting properties"),
        (lambda: _attrs(pad=[1]), E.INVALID_VALUE,
         f"{L}: Insufficient padding/stride/dilation parameters for spatial dimensions"),
        (lambda: _attrs(stride=[-1, 1]), E.INVALID_VALUE, f"{L}: Stride must be positive"),
        (lambda: _attrs(dy=[1, 6, 1, 1], pad=[2, 2]), E.INVALID_VALUE,
         f"{L}: Inferred input spatial dimension at index 2 (-1) is non-positive. Check "
         "padding, stride, and dilation parameters."),
    ):  # fmt: skip
        err = _error(_node(make()).infer_properties_node)
        assert (err.code, err.message) == (code, message)
    a = _attrs()
    dy = a.get_dy()
    assert dy is not None
    dy.stride = []
    err = _error(_node(a).infer_properties_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        f"{L}: Cannot infer dx strides - missing dy strides",
    )


def test_graph_builder_names_and_infers() -> None:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    dy = g.tensor(dim=[2, 6, 8, 8])
    w = g.tensor(name="w", dim=[6, 4, 3, 3])
    dx = g.conv_dgrad(dy, w, pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1],
                      dilation=[1, 1])  # fmt: skip
    dx.set_output(True)
    g.validate()
    assert (dy.get_name(), dx.get_name(), dx.get_dim()) == (
        "ConvolutionDgrad_0::DY", "ConvolutionDgrad_0::DX", [2, 4, 8, 8],
    )  # fmt: skip
    assert _error(lambda: g.conv_dgrad(dy, w, hg.ConvFpropAttributes())).code is E.INVALID_VALUE


@pytest.mark.parametrize(
    ("dy", "w", "pad", "stride", "dilation", "dx", "dx_stride"),
    [  # hipDNN's TestConvolutionDgradNode inference cases (W without strides)
        ([1, 64, 32, 32], [64, 3, 3, 3], [1, 1], [1, 1], [1, 1], [1, 3, 32, 32], None),
        ([2, 32, 6, 16, 16], [32, 16, 3, 3, 3], [0, 1, 1], [1, 1, 1], [1, 1, 1],
         [2, 16, 8, 16, 16], None),
        ([1, 64, 16, 16], [64, 3, 3, 3], [1, 1], [2, 2], [1, 1], [1, 3, 31, 31],
         [2883, 961, 31, 1]),
        ([1, 32, 20, 20], [32, 16, 3, 3], [2, 2], [1, 1], [2, 2], [1, 16, 20, 20], None),
    ],
)  # fmt: skip
def test_hipdnns_inference_cases(
    dy: list[int], w: list[int], pad: list[int], stride: list[int], dilation: list[int],
    dx: list[int], dx_stride: list[int] | None,
) -> None:  # fmt: skip
    a = _attrs(dy=dy, w=None, pad=pad, stride=stride, dilation=dilation)
    a.set_w(hg.TensorAttributes(dim=w))
    _node(a).infer_properties_node()
    out = a.get_dx()
    assert out is not None and out.dim == dx
    assert dx_stride is None or out.stride == dx_stride

"""ConvolutionWgradNode: hipDNN's checks in order, codes and messages, and DW's dim/stride
inference (from ConvolutionWgradNode.hpp)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

import hipdnn_graph as hg

E = hg.ErrorCode
L = "ConvolutionWgradNode"


def _t(dim: Sequence[int] | None) -> hg.TensorAttributes:
    t = hg.TensorAttributes()
    if dim is not None:
        t.set_dim(list(dim)).set_stride(hg.generate_strides(list(dim)))
    return t


def _attrs(
    x: Sequence[int] | None = (1, 4, 8, 8),
    dy: Sequence[int] | None = (1, 6, 8, 8),
    dw: Sequence[int] | None = None,
    pad: Sequence[int] | None = (1, 1),
    stride: Sequence[int] | None = (1, 1),
    dilation: Sequence[int] | None = (1, 1),
) -> hg.ConvWgradAttributes:
    a = hg.ConvWgradAttributes()
    if x is not None:
        a.set_x(_t(x))
    if dy is not None:
        a.set_dy(_t(dy))
    a.set_dw(_t(dw) if dw is not None else hg.TensorAttributes())
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


def _node(a: hg.ConvWgradAttributes) -> hg.ConvolutionWgradNode:
    return hg.ConvolutionWgradNode(a, hg.GraphAttributes())


def test_valid_gradients_pass_and_infer_dw() -> None:
    a = _attrs()
    _node(a).pre_validate_node()
    _node(a).infer_properties_node()
    dw = a.get_dw()
    assert dw is not None and (dw.dim, dw.stride) == ([6, 4, 3, 3], [36, 9, 3, 1])
    _node(_attrs(dw=[6, 4, 3, 3])).pre_validate_node()
    _node(_attrs(x=[1, 8, 8, 8], dw=[6, 4, 3, 3])).pre_validate_node()  # two groups
    # dilation 2: the kernel the remainder rule gives
    a = _attrs(pad=[0, 0], dilation=[2, 2], dy=[1, 6, 4, 4])
    _node(a).infer_properties_node()
    assert a.get_dw() is not None and a.get_dw().dim == [6, 4, 3, 3]  # type: ignore[union-attr]


CASES: list[tuple[Callable[[], hg.ConvWgradAttributes], hg.ErrorCode, str]] = [
    (lambda: _attrs(x=None), E.ATTRIBUTE_NOT_SET, f"{L} missing x (input) for pre-validation"),
    (lambda: _attrs(dy=None), E.ATTRIBUTE_NOT_SET,
     f"{L} missing dy (gradient of output) for pre-validation"),
    (lambda: _attrs(pad=None), E.ATTRIBUTE_NOT_SET, f"{L} missing pre_padding for pre-validation"),
    (lambda: _attrs(dilation=None), E.ATTRIBUTE_NOT_SET,
     f"{L} missing dilation for pre-validation"),
    (lambda: _attrs(x=[1, 4, -8, 8]), E.INVALID_VALUE,
     f"{L}: x tensor dimensions and strides must be set and positive"),
    (lambda: _attrs(x=[1, 4]), E.INVALID_VALUE,
     f"{L}: x tensor must have at least 3 dimensions (N, C, spatial)"),
    (lambda: _attrs(dy=[1, 6, 0, 8]), E.INVALID_VALUE,
     f"{L}: dy tensor dimensions and strides must be set and positive"),
    (lambda: _attrs(dy=[1, 6, 8]), E.INVALID_VALUE,
     f"{L}: dy tensor dimension count must match x tensor dimension count"),
    (lambda: _attrs(dy=[2, 6, 8, 8]), E.INVALID_VALUE,
     f"{L}: x tensor batch size must match dy tensor batch size"),
    (lambda: _attrs(dw=[6, 4, 3]), E.INVALID_VALUE,
     f"{L}: dw tensor dimension count must match dy tensor dimension count"),
    (lambda: _attrs(dw=[5, 4, 3, 3]), E.INVALID_VALUE,
     f"{L}: dy tensor channels must match dw tensor output channels"),
    (lambda: _attrs(dw=[6, 3, 3, 3]), E.INVALID_VALUE,
     f"{L}: x tensor channels must be divisible by dw tensor input channels"),
    (lambda: _attrs(x=[1, 16, 8, 8], dw=[6, 4, 3, 3]), E.INVALID_VALUE,  # 4 groups, K=6
     f"{L}: dw tensor output channels must be divisible by the number of groups"),
    (lambda: _attrs(dw=[6, 4, 0, 3]), E.INVALID_VALUE,
     f"{L}: dw tensor dimensions must be set and positive"),
    (lambda: _attrs(dw=[6, 0, 3, 3]), E.INVALID_VALUE,  # hipDNN divides by DW's channels
     f"{L}: dw tensor dimensions must be set and positive"),
    (lambda: _attrs(x=[1, 4, 2, 8], dy=[1, 6, 1, 8], dw=[6, 4, 3, 3], pad=[0, 1],
                    dilation=[2, 1]), E.INVALID_VALUE,
     f"{L}: Input spatial dimension at index 0 (2) is too small for the kernel size (3) and "
     "dilation (2)"),
    (lambda: _attrs(dw=[6, 4, 3, 2]), E.INVALID_VALUE,
     f"{L}: dy tensor spatial dimension at index 1 (8) does not match expected dimension (9) "
     "given x dimensions, kernel size, padding, stride, and dilation"),
    (lambda: _attrs(dw=[6, 4, 3, 3], stride=[1]), E.INVALID_VALUE,  # read past: the count rule
     f"{L}: stride parameter count must match spatial dimension count"),
    (lambda: _attrs(dw=[6, 4, 3, 3], stride=[0, 1]), E.INVALID_VALUE, f"{L}: Stride must be > 0"),
    (lambda: _attrs(dw=[1, 1, 1, 1], dy=[1, 1, 8, 8]), E.INVALID_VALUE,  # 4 groups, K=1
     f"{L}: dw tensor output channels must be divisible by the number of groups"),
    (lambda: _attrs(pad=[1, 1, 1]), E.INVALID_VALUE,
     f"{L}: pre_padding parameter count must match spatial dimension count"),
    (lambda: _attrs(stride=[1, 0]), E.INVALID_VALUE, f"{L}: Stride must be > 0"),
    (lambda: _attrs(dilation=[0, 1]), E.INVALID_VALUE, f"{L}: Dilation must > 0"),
    (lambda: _attrs(pad=[0, 0]).set_post_padding([0, -1]), E.INVALID_VALUE,
     f"{L}: Post-padding must be non-negative"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "code", "message"), CASES)
def test_pre_validation_checks_in_hipdnns_order(
    make: Callable[[], hg.ConvWgradAttributes], code: hg.ErrorCode, message: str
) -> None:
    err = _error(_node(make()).pre_validate_node)
    assert (err.code, err.message) == (code, message)


def test_inference_messages() -> None:
    for make, code, message in (
        (lambda: _attrs(dy=None), E.ATTRIBUTE_NOT_SET, f"{L} missing dy for setting properties"),
        (lambda: _attrs(dilation=[1]), E.INVALID_VALUE,
         f"{L}: Insufficient padding/stride/dilation parameters for spatial dimensions"),
        (lambda: _attrs(dilation=[0, 1]), E.INVALID_VALUE, f"{L}: Dilation must be positive"),
        (lambda: _attrs(dy=[1, 6, 16, 8], pad=[0, 0]), E.INVALID_VALUE,
         f"{L}: Invalid spatial dimensions for kernel size inference"),
        (lambda: _attrs(dy=[1, 6, 4, 4], pad=[0, 0], dilation=[3, 3]), E.INVALID_VALUE,
         f"{L}: Spatial dimensions incompatible with dilation and stride parameters for kernel "
         "size inference"),
    ):  # fmt: skip
        err = _error(_node(make()).infer_properties_node)
        assert (err.code, err.message) == (code, message)
    a = _attrs()
    x = a.get_x()
    assert x is not None
    x.stride = []
    err = _error(_node(a).infer_properties_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        f"{L}: Cannot infer dw strides - missing x strides",
    )


def test_graph_builder_takes_dy_then_x() -> None:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    dy = g.tensor(name="dy", dim=[2, 6, 8, 8])
    x = g.tensor(dim=[2, 4, 8, 8])
    dw = g.conv_wgrad(dy, x, pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1],
                      dilation=[1, 1])  # fmt: skip
    dw.set_output(True)
    g.validate()
    assert (x.get_name(), dw.get_name(), dw.get_dim()) == (
        "ConvolutionWgrad_0::X", "ConvolutionWgrad_0::DW", [6, 4, 3, 3],
    )  # fmt: skip
    assert _error(lambda: g.conv_wgrad(dy, x, hg.ConvDgradAttributes())).code is E.INVALID_VALUE


@pytest.mark.parametrize(
    ("x", "dy", "pad", "stride", "dilation", "dw"),
    [  # hipDNN's TestConvolutionWgradNode inference cases
        ([1, 3, 32, 32], [1, 64, 32, 32], [1, 1], [1, 1], [1, 1], [64, 3, 3, 3]),
        ([2, 16, 8, 16, 16], [2, 32, 6, 16, 16], [0, 1, 1], [1, 1, 1], [1, 1, 1],
         [32, 16, 3, 3, 3]),
        ([1, 3, 31, 31], [1, 64, 16, 16], [1, 1], [2, 2], [1, 1], [64, 3, 3, 3]),
        ([1, 16, 20, 20], [1, 32, 20, 20], [2, 2], [1, 1], [2, 2], [32, 16, 3, 3]),
    ],
)  # fmt: skip
def test_hipdnns_inference_cases(
    x: list[int], dy: list[int], pad: list[int], stride: list[int], dilation: list[int],
    dw: list[int],
) -> None:  # fmt: skip
    a = _attrs(x=x, dy=dy, pad=pad, stride=stride, dilation=dilation)
    node = _node(a)
    node.pre_validate_node()
    node.infer_properties_node()
    assert a.get_dw() is not None and a.get_dw().dim == dw  # type: ignore[union-attr]
    node.pre_validate_node()  # the inferred DW satisfies the rules

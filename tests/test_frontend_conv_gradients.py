"""hipDNN's Python-binding tests of the gradient convolutions
(``frontend_wheel_package/tests/test_conv_dgrad.py`` and ``test_conv_wgrad.py``), ported as the
SDPA ones were: the same calls on ``hipdnn_graph.frontend``; hipDNN's GPU tests build the
operation graph here and their execution runs on the torch family engines."""

from __future__ import annotations

import numpy as np
from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn

F = hipdnn.DataType.FLOAT


def _out(size: int, pad: int, dil: int, kernel: int, stride: int) -> int:
    return (size + 2 * pad - dil * (kernel - 1) - 1) // stride + 1


def build_conv_dgrad_graph(
    n: int = 16, c: int = 16, h: int = 16, w: int = 16, k: int = 16, r: int = 3, s: int = 3,
    stride: int = 1, pad: int = 1, dil: int = 1,
) -> tuple[hipdnn.Graph, hipdnn.Tensor, hipdnn.Tensor, hipdnn.Tensor]:  # fmt: skip
    """hipDNN's builder: a conv_dgrad graph returning (graph, dy, weight, dx)."""
    graph = float_graph()
    graph.set_name("conv_dgrad_test")
    dy = hipdnn.Tensor.create([n, k, _out(h, pad, dil, r, stride), _out(w, pad, dil, s, stride)], F)
    dy.set_name("output_gradient_dy")
    weight = hipdnn.Tensor.create([k, c, r, s], F)
    weight.set_name("weight")
    conv_attrs = hipdnn.ConvDgradAttributes()
    conv_attrs.set_name("conv_dgrad_node")
    conv_attrs.set_pre_padding([pad, pad])
    conv_attrs.set_post_padding([pad, pad])
    conv_attrs.set_stride([stride, stride])
    conv_attrs.set_dilation([dil, dil])
    dx = graph.conv_dgrad(dy, weight, conv_attrs)
    dx.set_dim([n, c, h, w])
    dx.set_name("input_gradient_dx")
    dx.set_output(True)
    return graph, dy, weight, dx


def build_conv_wgrad_graph(
    n: int = 16, c: int = 16, h: int = 16, w: int = 16, k: int = 16, r: int = 3, s: int = 3,
    stride: int = 1, pad: int = 1, dil: int = 1,
) -> tuple[hipdnn.Graph, hipdnn.Tensor, hipdnn.Tensor, hipdnn.Tensor]:  # fmt: skip
    """hipDNN's builder: a conv_wgrad graph returning (graph, dy, x, dw)."""
    graph = float_graph()
    graph.set_name("conv_wgrad_test")
    dy = hipdnn.Tensor.create([n, k, _out(h, pad, dil, r, stride), _out(w, pad, dil, s, stride)], F)
    dy.set_name("output_gradient_dy")
    x = hipdnn.Tensor.create([n, c, h, w], F)
    x.set_name("input_x")
    conv_attrs = hipdnn.ConvWgradAttributes()
    conv_attrs.set_name("conv_wgrad_node")
    conv_attrs.set_pre_padding([pad, pad])
    conv_attrs.set_post_padding([pad, pad])
    conv_attrs.set_stride([stride, stride])
    conv_attrs.set_dilation([dil, dil])
    dw = graph.conv_wgrad(dy, x, conv_attrs)
    dw.set_dim([k, c, r, s])
    dw.set_name("weight_gradient_dw")
    dw.set_output(True)
    return graph, dy, x, dw


def _planned(graph: hipdnn.Graph, kind: str, node: str) -> None:
    """hipDNN's tests build plans and execute; here the torch family engines plan it."""
    handle = hipdnn.create_handle()
    assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
    error = graph.create_execution_plans()
    if error.is_good():
        error = graph.check_support()
    assert error.is_good(), error.get_message()  # a torch family engine (issue 25)


class TestConvDgrad:
    def test_builds_and_plans_on_a_family_engine(self) -> None:
        graph, _, _, dx = build_conv_dgrad_graph(stride=2)
        _planned(graph, "CONVOLUTION_DGRAD", "conv_dgrad_node")
        assert dx.get_stride() == [4096, 256, 16, 1]  # inferred from DY's order

    def test_serialization_round_trips_and_rules_return_errors(self) -> None:
        graph, *_ = build_conv_dgrad_graph(dil=2)
        assert graph.validate().is_good()
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_binary(np.frombuffer(blob, np.uint8).tobytes()).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        assert '"type":"ConvolutionBwdAttributes"' in text and '"dilation":[2,2]' in text
        bad, _, _, dx = build_conv_dgrad_graph()
        dx.set_dim([16, 16, 16, 15])
        error = bad.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message().startswith(
            "ConvolutionDgradNode: dy tensor spatial dimension at index 1 (16) does not match "
            "expected dimension (15)"
        )

    def test_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        t = hipdnn.Tensor.create([1, 4, 8, 8], F)
        for args in ((t, t, hipdnn.ConvFpropAttributes()), (t, hipdnn.ConvDgradAttributes())):
            try:
                graph.conv_dgrad(*args)
            except TypeError:
                continue
            raise AssertionError(f"conv_dgrad{args} did not raise TypeError")


class TestConvWgrad:
    def test_builds_and_plans_on_a_family_engine(self) -> None:
        graph, *_ = build_conv_wgrad_graph()
        _planned(graph, "CONVOLUTION_WGRAD", "conv_wgrad_node")

    def test_serialization_round_trips_and_rules_return_errors(self) -> None:
        graph, *_ = build_conv_wgrad_graph(stride=2)
        assert graph.validate().is_good()
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_binary(np.frombuffer(blob, np.uint8).tobytes()).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        assert '"type":"ConvolutionWrwAttributes"' in text and '"dw_tensor_uid"' in text
        bad, _, _, dw = build_conv_wgrad_graph()
        dw.set_dim([16, 5, 3, 3])
        error = bad.validate()
        assert error.get_message() == (
            "ConvolutionWgradNode: x tensor channels must be divisible by dw tensor input channels"
        )

    def test_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        t = hipdnn.Tensor.create([1, 4, 8, 8], F)
        for args in ((t, t, hipdnn.ConvDgradAttributes()), (t, hipdnn.ConvWgradAttributes())):
            try:
                graph.conv_wgrad(*args)
            except TypeError:
                continue
            raise AssertionError(f"conv_wgrad{args} did not raise TypeError")


class TestConvGradientAttributeBindings:
    def test_alias_identity(self) -> None:
        assert hipdnn.ConvDgradAttributes is hipdnn.ConvolutionDgradAttributes
        assert hipdnn.ConvWgradAttributes is hipdnn.ConvolutionWgradAttributes

    def test_dgrad_methods_are_callable(self) -> None:
        dy, w, dx = (hipdnn.Tensor.create([1], F) for _ in range(3))
        call_attribute_methods(
            hipdnn.ConvDgradAttributes(),
            (
                ("set_name", ("conv_dgrad",), "get_name", "conv_dgrad"),
                ("set_compute_data_type", (F,), "get_compute_data_type", F),
                ("set_dy", (dy,), "get_dy", dy),
                ("set_w", (w,), "get_w", w),
                ("set_dx", (dx,), "get_dx", dx),
                ("set_pre_padding", ([1],), "get_pre_padding", [1]),
                ("set_post_padding", ([2],), "get_post_padding", [2]),
                ("set_stride", ([3],), "get_stride", [3]),
                ("set_dilation", ([4],), "get_dilation", [4]),
                ("set_padding", ([5],), "get_pre_padding", [5]),
                ("set_padding", ([5],), "get_post_padding", [5]),
                ("set_convolution_mode", (hipdnn.ConvolutionMode.CROSS_CORRELATION,),
                 "get_convolution_mode", hipdnn.ConvolutionMode.CROSS_CORRELATION),
            ),
        )  # fmt: skip

    def test_wgrad_methods_are_callable(self) -> None:
        x, dy, dw = (hipdnn.Tensor.create([1], F) for _ in range(3))
        call_attribute_methods(
            hipdnn.ConvWgradAttributes(),
            (
                ("set_name", ("conv_wgrad",), "get_name", "conv_wgrad"),
                ("set_compute_data_type", (F,), "get_compute_data_type", F),
                ("set_x", (x,), "get_x", x),
                ("set_dy", (dy,), "get_dy", dy),
                ("set_dw", (dw,), "get_dw", dw),
                ("set_padding", ([9],), "get_pre_padding", [9]),
                ("set_padding", ([9],), "get_post_padding", [9]),
                ("set_pre_padding", ([1],), "get_pre_padding", [1]),
                ("set_post_padding", ([2],), "get_post_padding", [2]),
                ("set_stride", ([3],), "get_stride", [3]),
                ("set_dilation", ([4],), "get_dilation", [4]),
                ("set_convolution_mode", (hipdnn.ConvolutionMode.CONVOLUTION,),
                 "get_convolution_mode", hipdnn.ConvolutionMode.CONVOLUTION),
            ),
        )  # fmt: skip

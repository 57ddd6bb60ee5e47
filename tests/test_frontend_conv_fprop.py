"""hipDNN's Python-binding tests of the forward convolution
(``frontend_wheel_package/tests/test_conv_fprop.py``), ported as the SDPA ones were: the same
calls on ``hipdnn_graph.frontend``; hipDNN's GPU test builds the operation graph here and its
execution runs on the torch family engines."""

from __future__ import annotations

import numpy as np
from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def build_conv_fprop_graph(
    n: int = 16, c: int = 16, h: int = 16, w: int = 16, k: int = 16, r: int = 3, s: int = 3,
    stride: int = 1, pad: int = 1, dil: int = 1,
) -> tuple[hipdnn.Graph, hipdnn.Tensor, hipdnn.Tensor, hipdnn.Tensor]:  # fmt: skip
    """hipDNN's builder: a conv_fprop graph returning (graph, x, weight, y)."""
    graph = float_graph()
    graph.set_name("conv_fprop_test")
    x = hipdnn.Tensor.create([n, c, h, w], hipdnn.DataType.FLOAT)
    x.set_name("input_x")
    weight = hipdnn.Tensor.create([k, c, r, s], hipdnn.DataType.FLOAT)
    weight.set_name("weight")
    conv_attrs = hipdnn.ConvFpropAttributes()
    conv_attrs.set_name("conv_fprop_node")
    conv_attrs.set_padding([pad, pad])
    conv_attrs.set_stride([stride, stride])
    conv_attrs.set_dilation([dil, dil])
    y = graph.conv_fprop(x, weight, conv_attrs)
    y.set_name("output_y")
    y.set_output(True)
    return graph, x, weight, y


class TestConvFprop:
    def test_builds_and_plans_on_a_family_engine(self) -> None:
        """hipDNN's GPU test builds plans and executes; here the torch family engines plan it."""
        graph, _, _, y = build_conv_fprop_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert y.get_dim() == [16, 16, 16, 16]
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()  # a torch family engine (issue 25)

    def test_serialization_round_trips_and_rules_return_errors(self) -> None:
        graph, *_ = build_conv_fprop_graph(stride=2, dil=2)
        assert graph.validate().is_good()
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_binary(np.frombuffer(blob, np.uint8).tobytes()).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        assert '"type":"ConvolutionFwdAttributes"' in text
        assert '"stride":[2,2]' in text and '"conv_mode":"CROSS_CORRELATION"' in text
        bad = float_graph()
        x = hipdnn.Tensor.create([1, 4, 8, 8], hipdnn.DataType.FLOAT)
        w = hipdnn.Tensor.create([6, 3, 3, 3], hipdnn.DataType.FLOAT)
        bad.conv_fprop(x, w, hipdnn.ConvFpropAttributes().set_padding([1, 1]).set_stride([1, 1]))
        error = bad.validate()
        assert error.get_code() == hipdnn.ErrorCode.ATTRIBUTE_NOT_SET
        assert error.get_message() == "ConvolutionFpropNode missing dilation for pre-validation"

    def test_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([1, 4, 8, 8], hipdnn.DataType.FLOAT)
        for args in ((x, x, hipdnn.MatmulAttributes()), (x, hipdnn.ConvFpropAttributes())):
            try:
                graph.conv_fprop(*args)
            except TypeError:
                continue
            raise AssertionError(f"conv_fprop{args} did not raise TypeError")


class TestConvFpropAttributeBindings:
    """Every forward-convolution attribute binding round-trips through its getter."""

    def test_alias_identity(self) -> None:
        assert hipdnn.ConvFpropAttributes is hipdnn.ConvolutionFpropAttributes

    def test_methods_are_callable(self) -> None:
        x = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        w = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        y = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        call_attribute_methods(
            hipdnn.ConvFpropAttributes(),
            (
                ("set_name", ("conv_fprop",), "get_name", "conv_fprop"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_x", (x,), "get_x", x),
                ("set_w", (w,), "get_w", w),
                ("set_y", (y,), "get_y", y),
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

    def test_mode_members_are_hipdnns(self) -> None:
        assert [m.name for m in hipdnn.ConvolutionMode] == [
            "NOT_SET", "CROSS_CORRELATION", "CONVOLUTION",
        ]  # fmt: skip

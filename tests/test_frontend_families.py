"""hipDNN's Python-binding tests of pointwise and matmul (``frontend_wheel_package/tests/`` and
``hipdnn_frontend/test/``: ``test_pointwise.py``, ``test_matmul.py``), ported as the SDPA ones
were: the same calls on ``hipdnn_graph.frontend``; their GPU tests' execution runs here on the
best-ranked engine for these families (a torch family engine, or ``NUMPY_REFERENCE_ENGINE``
without torch) and is checked against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
from frontend_cases import build_all, float_graph

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn


def build_pointwise_add_graph(
    n: int = 16, c: int = 16, h: int = 16, w: int = 16
) -> tuple[Any, ...]:
    """Build an elementwise-add pointwise graph returning (graph, a, b, out)."""
    graph = float_graph()
    graph.set_name("pointwise_add_test")
    a = hipdnn.Tensor.create([n, c, h, w], hipdnn.DataType.FLOAT)
    a.set_name("a")
    b = hipdnn.Tensor.create([n, c, h, w], hipdnn.DataType.FLOAT)
    b.set_name("b")
    attrs = hipdnn.PointwiseAttributes()
    attrs.set_name("pointwise_add_node")
    attrs.set_mode(hipdnn.PointwiseMode.ADD)
    out = graph.pointwise(a, b, attrs)
    out.set_name("out")
    out.set_output(True)
    return graph, a, b, out


def call_attribute_methods(
    attributes: Any, calls: tuple[tuple[str, tuple[Any, ...], str, Any], ...]
) -> None:
    """Each setter returns the object and its getter gives the value back."""
    for setter, args, getter, expected in calls:
        assert getattr(attributes, setter)(*args) is attributes, setter
        got = getattr(attributes, getter)()
        assert got is expected if isinstance(expected, hipdnn.Tensor) else got == expected, getter


class TestPointwiseAttributeBindings:
    def test_methods_are_callable(self) -> None:
        in0, in1, in2, out0 = (hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT) for _ in range(4))
        call_attribute_methods(
            hipdnn.PointwiseAttributes(),
            (
                ("set_name", ("pointwise",), "get_name", "pointwise"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_mode", (hipdnn.PointwiseMode.ADD,), "get_mode", hipdnn.PointwiseMode.ADD),
                ("set_relu_lower_clip", (0.0,), "get_relu_lower_clip", 0.0),
                ("set_relu_upper_clip", (1.0,), "get_relu_upper_clip", 1.0),
                ("set_relu_lower_clip_slope", (0.25,), "get_relu_lower_clip_slope", 0.25),
                ("set_swish_beta", (0.5,), "get_swish_beta", 0.5),
                ("set_elu_alpha", (2.0,), "get_elu_alpha", 2.0),
                ("set_softplus_beta", (4.0,), "get_softplus_beta", 4.0),
                ("set_axis", (0,), "get_axis", 0),
                ("set_input_0", (in0,), "get_input_0", in0),
                ("set_input_1", (in1,), "get_input_1", in1),
                ("set_input_2", (in2,), "get_input_2", in2),
                ("set_output_0", (out0,), "get_output_0", out0),
            ),
        )  # fmt: skip

    def test_mode_enum_is_hipdnns(self) -> None:
        assert hipdnn.PointwiseMode.NOT_SET == 0 and hipdnn.PointwiseMode.TANH_FWD == 47
        assert len(hipdnn.PointwiseMode.__members__) == 48


class TestPointwiseAdd:
    def test_graph_validates_successfully(self) -> None:
        graph, _, _, out = build_pointwise_add_graph()
        result = graph.validate()
        assert result.is_good(), f"Validation failed: {result.get_message()}"
        assert isinstance(out, hipdnn.Tensor) and out.get_dim() == [16, 16, 16, 16]

    def test_builds_operation_graph(self) -> None:
        graph, *_ = build_pointwise_add_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good()
        assert graph.build_operation_graph(handle).is_good()

    def test_executes_on_the_best_engine(self) -> None:
        """hipDNN's GPU test executes the graph and compares with a + b."""
        graph, a, b, out = build_pointwise_add_graph(2, 2, 2, 2)
        handle = build_all(graph)
        rng = np.random.default_rng(0)
        xa, xb = (rng.standard_normal([2, 2, 2, 2]).astype(np.float32) for _ in range(2))
        result = np.zeros([2, 2, 2, 2], np.float32)
        assert graph.execute(handle, {a: xa, b: xb, out: result}).is_good()
        np.testing.assert_array_equal(result, xa + xb)

    def test_serialization_round_trips(self) -> None:
        graph, *_ = build_pointwise_add_graph(2, 3, 4, 5)
        assert graph.validate().is_good()
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        again = hipdnn.Graph()
        assert again.from_binary(blob).is_good() and again.to_json() == text
        node = again.core_graph.nodes[0]
        assert (
            isinstance(node, hg.PointwiseNode)
            and node.attributes.get_mode() == hg.PointwiseMode.ADD
        )

    def test_one_and_three_inputs(self) -> None:
        graph = float_graph()
        x, y, z = (hipdnn.Tensor.create([4, 4], hipdnn.DataType.FLOAT) for _ in range(3))
        r = graph.pointwise(x, hipdnn.PointwiseAttributes().set_mode(hipdnn.PointwiseMode.RELU_FWD))
        s = graph.pointwise(
            y, r, z, hipdnn.PointwiseAttributes().set_mode(hipdnn.PointwiseMode.BINARY_SELECT)
        )
        s.set_output(True)
        assert graph.validate().is_good()
        assert (r.get_name(), s.get_name()) == ("Pointwise_0::OUT_0", "Pointwise_1::OUT_0")
        assert np.array_equal(np.array(s.get_stride()), [4, 1])

    def test_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([4], hipdnn.DataType.FLOAT)
        for args in (
            (x,),
            (x, "attrs"),
            (x, hipdnn.SdpaAttributes()),
            ("x", hipdnn.PointwiseAttributes()),
        ):
            try:
                graph.pointwise(*args)
            except TypeError:
                continue
            raise AssertionError(f"pointwise{args} did not raise TypeError")

    def test_a_rule_failure_is_returned_as_an_error(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([4], hipdnn.DataType.FLOAT)
        graph.pointwise(x, x, hipdnn.PointwiseAttributes().set_mode(hipdnn.PointwiseMode.EXP))
        error = graph.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message() == "PointwiseNode with two inputs must have a binary operation"


# ----- matmul (hipDNN's frontend_wheel_package/tests/test_matmul.py and
# ----- hipdnn_frontend/test/test_matmul.py, ported the same way) -----


def build_matmul_graph(m: int = 4, k: int = 3, n: int = 5) -> tuple[Any, ...]:
    """Build a matmul graph (A [M, K] x B [K, N] -> C [M, N])."""
    graph = float_graph()
    graph.set_name("matmul_test")
    a = hipdnn.Tensor.create([m, k], hipdnn.DataType.FLOAT)
    a.set_name("A")
    b = hipdnn.Tensor.create([k, n], hipdnn.DataType.FLOAT)
    b.set_name("B")
    attrs = hipdnn.MatmulAttributes()
    attrs.set_name("matmul_node")
    c = graph.matmul(a, b, attrs)
    c.set_name("C")
    c.set_output(True)
    return graph, a, b, c


class TestMatmulAttributeBindings:
    def test_methods_are_callable(self) -> None:
        a, b, c = (hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT) for _ in range(3))
        call_attribute_methods(
            hipdnn.MatmulAttributes(),
            (
                ("set_name", ("matmul",), "get_name", "matmul"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_a", (a,), "get_a", a),
                ("set_b", (b,), "get_b", b),
                ("set_c", (c,), "get_c", c),
            ),
        )  # fmt: skip


class TestMatmul:
    def test_graph_validates(self) -> None:
        graph, *_, c = build_matmul_graph()
        result = graph.validate()
        assert result.is_good(), f"Validation failed: {result.get_message()}"
        assert isinstance(c, hipdnn.Tensor) and (c.get_dim(), c.get_stride()) == ([4, 5], [5, 1])

    def test_builds_operation_graph(self) -> None:
        graph, *_ = build_matmul_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()

    def test_executes_on_the_best_engine(self) -> None:
        graph, a, b, c = build_matmul_graph()
        handle = build_all(graph)
        rng = np.random.default_rng(1)
        xa = rng.standard_normal([4, 3]).astype(np.float32)
        xb = rng.standard_normal([3, 5]).astype(np.float32)
        result = np.zeros([4, 5], np.float32)
        assert graph.execute(handle, {a: xa, b: xb, c: result}).is_good()
        np.testing.assert_allclose(result, xa.astype(np.float64) @ xb, rtol=1e-5, atol=1e-6)

    def test_serialization_round_trips_and_rules_return_errors(self) -> None:
        graph, *_ = build_matmul_graph()
        assert graph.validate().is_good()
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        bad = float_graph()
        x = hipdnn.Tensor.create([4, 3], hipdnn.DataType.FLOAT)
        bad.matmul(x, x, hipdnn.MatmulAttributes())
        error = bad.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message() == (
            "MatmulNode: Inner dimensions must match (a[...,K] vs b[...,K,...]). Got 3 vs 4"
        )

    def test_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([4, 4], hipdnn.DataType.FLOAT)
        for args in ((x, x, hipdnn.PointwiseAttributes()), (x, "b", hipdnn.MatmulAttributes())):
            try:
                graph.matmul(*args)
            except TypeError:
                continue
            raise AssertionError(f"matmul{args} did not raise TypeError")

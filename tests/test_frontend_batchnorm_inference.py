"""hipDNN's Python-binding tests of batch-norm inference (``frontend_wheel_package/tests/
test_normalization.py``), ported as the SDPA ones were: the same calls on
``hipdnn_graph.frontend``; hipDNN's GPU test builds the operation graph here and its execution
runs on the torch family engines. (The variance-extension tests wait
for that family.)"""

from __future__ import annotations

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def _create(dims: list[int]) -> hipdnn.Tensor:
    return hipdnn.Tensor.create(dims, hipdnn.DataType.FLOAT)


def build_batchnorm_inference_graph(
    n: int = 4, c: int = 8, h: int = 8, w: int = 8
) -> tuple[hipdnn.Graph, hipdnn.Tensor]:
    """hipDNN's helper of the same name (returning the graph and y here)."""
    graph = float_graph()
    graph.set_name("batchnorm_inference_test")
    x = _create([n, c, h, w])
    x.set_name("x")
    stats = []
    for name in ("mean", "inv_variance", "scale", "bias"):
        tensor = _create([1, c, 1, 1])
        tensor.set_name(name)
        stats.append(tensor)
    attrs = hipdnn.BatchnormInferenceAttributes()
    attrs.set_name("batchnorm_inference_node")
    y = graph.batchnorm_inference(x, *stats, attrs)
    y.set_name("y")
    y.set_output(True)
    return graph, y


class TestBatchnormInference:
    def test_graph_builds_and_plans(self) -> None:
        """hipDNN's GPU test_execution_succeeds: the operation graph builds here; the torch
        family engines plan it."""
        graph, y = build_batchnorm_inference_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert isinstance(y, hipdnn.Tensor) and y.get_dim() == [4, 8, 8, 8]
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()  # a torch family engine (issue 25)

    def test_round_trip_rules_and_type_errors(self) -> None:
        graph, _ = build_batchnorm_inference_graph(2, 3, 2, 2)
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        bad = float_graph()
        x, wrong = _create([2, 3, 2, 2]), _create([1, 4, 1, 1])
        good = [_create([1, 3, 1, 1]) for _ in range(3)]
        bad.batchnorm_inference(x, wrong, *good, hipdnn.BatchnormInferenceAttributes())
        error = bad.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message() == "Mean tensor channel dimension (index 1) must be 3, got 4"
        for args in (
            (x, *good, wrong, hipdnn.BatchnormAttributes()),
            (x, *good, "bias", hipdnn.BatchnormInferenceAttributes()),
        ):
            try:
                bad.batchnorm_inference(*args)
            except TypeError:
                continue
            raise AssertionError(f"batchnorm_inference{args} did not raise TypeError")


class TestBatchnormInferenceAttributeBindings:
    def test_inference_methods_are_callable(self) -> None:
        x, mean, inv_variance, scale, bias, y = (_create([1]) for _ in range(6))
        call_attribute_methods(
            hipdnn.BatchnormInferenceAttributes(),
            (
                ("set_name", ("batchnorm_inference",), "get_name", "batchnorm_inference"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_x", (x,), "get_x", x),
                ("set_mean", (mean,), "get_mean", mean),
                ("set_inv_variance", (inv_variance,), "get_inv_variance", inv_variance),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_bias", (bias,), "get_bias", bias),
                ("set_y", (y,), "get_y", y),
            ),
        )  # fmt: skip


def build_batchnorm_inference_variance_graph(
    n: int = 4, c: int = 8, h: int = 8, w: int = 8
) -> tuple[hipdnn.Graph, hipdnn.Tensor]:
    """hipDNN's helper of the same name (returning the graph and y here)."""
    graph = float_graph()
    graph.set_name("batchnorm_inference_variance_test")
    x = _create([n, c, h, w])
    mean, variance, scale, bias = (_create([1, c, 1, 1]) for _ in range(4))
    epsilon = hipdnn.Tensor()
    epsilon.set_value(1e-5)
    y = graph.batchnorm_inference_variance_ext(
        x, mean, variance, scale, bias, epsilon, hipdnn.BatchnormInferenceAttributesVarianceExt()
    )
    y.set_output(True)
    return graph, y


class TestBatchnormInferenceVariance:
    def test_graph_builds_and_plans(self) -> None:
        """hipDNN's GPU test_execution_succeeds: the operation graph builds; planning is refused
        naming the family."""
        graph, y = build_batchnorm_inference_variance_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert isinstance(y, hipdnn.Tensor) and y.get_dim() == [4, 8, 8, 8]
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()  # a torch family engine (issue 25)
        text = graph.to_json()
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good() and restored.to_binary() == graph.to_binary()
        try:
            graph.batchnorm_inference_variance_ext(
                y, y, y, y, y, y, hipdnn.BatchnormInferenceAttributes()
            )
        except TypeError:
            return
        raise AssertionError("wrong attributes did not raise TypeError")

    def test_variance_extension_methods_are_callable(self) -> None:
        x, mean, variance, scale, bias, epsilon, y = (_create([1]) for _ in range(7))
        call_attribute_methods(
            hipdnn.BatchnormInferenceAttributesVarianceExt(),
            (
                ("set_name", ("batchnorm_inference_variance",), "get_name",
                 "batchnorm_inference_variance"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_x", (x,), "get_x", x),
                ("set_mean", (mean,), "get_mean", mean),
                ("set_variance", (variance,), "get_variance", variance),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_bias", (bias,), "get_bias", bias),
                ("set_epsilon", (epsilon,), "get_epsilon", epsilon),
                ("set_y", (y,), "get_y", y),
            ),
        )  # fmt: skip

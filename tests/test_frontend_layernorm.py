"""hipDNN's Python-binding tests of layer norm forward (``frontend_wheel_package/tests/
test_layernorm.py``), ported as the SDPA ones were: the same calls on ``hipdnn_graph.frontend``;
hipDNN's GPU test builds the operation graph here and its execution runs on the torch
family engines. (Its backward tests: test_frontend_layernorm_backward.py.)"""

from __future__ import annotations

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def _scalar() -> hipdnn.Tensor:
    tensor = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
    tensor.set_value(1e-5)
    return tensor


class TestLayernormAttributeBindings:
    def test_forward_methods_are_callable(self) -> None:
        x, scale, bias, epsilon, y, mean, inv_variance = (
            hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT) for _ in range(7)
        )
        call_attribute_methods(
            hipdnn.LayernormAttributes(),
            (
                ("set_name", ("layernorm",), "get_name", "layernorm"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_x", (x,), "get_x", x),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_bias", (bias,), "get_bias", bias),
                ("set_epsilon", (epsilon,), "get_epsilon", epsilon),
                ("set_y", (y,), "get_y", y),
                ("set_mean", (mean,), "get_mean", mean),
                ("set_inv_variance", (inv_variance,), "get_inv_variance", inv_variance),
                ("set_forward_phase", (hipdnn.NormFwdPhase.INFERENCE,), "get_forward_phase",
                 hipdnn.NormFwdPhase.INFERENCE),
            ),
        )  # fmt: skip


class TestLayernorm:
    def test_inference_graph_builds_and_plans(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([2, 6, 4], hipdnn.DataType.FLOAT)
        scale = hipdnn.Tensor.create([6, 4], hipdnn.DataType.FLOAT)
        bias = hipdnn.Tensor.create([6, 4], hipdnn.DataType.FLOAT)
        outputs = graph.layernorm(
            x,
            scale,
            bias,
            hipdnn.LayernormAttributes()
            .set_epsilon(_scalar())
            .set_forward_phase(hipdnn.NormFwdPhase.INFERENCE),
        )
        assert isinstance(outputs, tuple)
        assert outputs[0] is not None
        assert outputs[1:] == (None, None)
        y = outputs[0]
        assert isinstance(y, hipdnn.Tensor)
        y.set_output(True)
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()  # a torch family engine (issue 25)

    def test_training_returns_statistics_and_round_trips(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([4, 16, 32], hipdnn.DataType.FLOAT)
        scale = hipdnn.Tensor.create([1, 16, 32], hipdnn.DataType.FLOAT)
        bias = hipdnn.Tensor.create([1, 16, 32], hipdnn.DataType.FLOAT)
        attrs = hipdnn.LayernormAttributes().set_epsilon(_scalar()).set_name("ln")
        y, mean, inv_variance = graph.layernorm(
            x, scale, bias, attrs.set_forward_phase(hipdnn.NormFwdPhase.TRAINING)
        )
        for t in (y, mean, inv_variance):
            assert isinstance(t, hipdnn.Tensor)
            t.set_output(True)
        assert graph.validate().is_good()
        assert mean.get_dim() == [4, 1, 1] and x.get_name() == "ln::X"
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        assert '"forward_phase":2' in text and '"normalized_dim_count":0' in text

    def test_rules_return_errors_and_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([2, 6, 4], hipdnn.DataType.FLOAT)
        scale = hipdnn.Tensor.create([6, 4], hipdnn.DataType.FLOAT)
        bias = hipdnn.Tensor.create([6, 5], hipdnn.DataType.FLOAT)
        attrs = hipdnn.LayernormAttributes().set_epsilon(_scalar())
        graph.layernorm(x, scale, bias, attrs.set_forward_phase(hipdnn.NormFwdPhase.INFERENCE))
        error = graph.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message().endswith("dimension mismatch at index 1: 4 vs 5")
        for args in ((x, scale, bias, hipdnn.MatmulAttributes()), (x, scale, "bias", attrs)):
            try:
                graph.layernorm(*args)
            except TypeError:
                continue
            raise AssertionError(f"layernorm{args} did not raise TypeError")

"""hipDNN's Python-binding tests of RMSNorm forward (``frontend_wheel_package/tests/
test_rmsnorm.py``), ported as the SDPA ones were: the same calls on ``hipdnn_graph.frontend``;
hipDNN's GPU test builds the operation graph here and its execution runs on the torch
family engines. (Its backward tests are in test_frontend_rmsnorm_backward.py.)"""

from __future__ import annotations

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def _scalar() -> hipdnn.Tensor:
    tensor = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
    tensor.set_value(1e-5)
    return tensor


class TestRMSNormAttributeBindings:
    def test_forward_methods_are_callable(self) -> None:
        x, scale, epsilon, bias, y, inv_rms = (
            hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT) for _ in range(6)
        )
        call_attribute_methods(
            hipdnn.RMSNormAttributes(),
            (
                ("set_name", ("rmsnorm",), "get_name", "rmsnorm"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_x", (x,), "get_x", x),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_epsilon", (epsilon,), "get_epsilon", epsilon),
                ("set_bias", (bias,), "get_bias", bias),
                ("set_y", (y,), "get_y", y),
                ("set_inv_rms", (inv_rms,), "get_inv_rms", inv_rms),
                ("set_forward_phase", (hipdnn.NormFwdPhase.TRAINING,), "get_forward_phase",
                 hipdnn.NormFwdPhase.TRAINING),
            ),
        )  # fmt: skip

    def test_phase_members_are_hipdnns(self) -> None:
        assert [m.name for m in hipdnn.NormFwdPhase] == ["NOT_SET", "INFERENCE", "TRAINING"]


class TestRMSNorm:
    def test_plans_on_a_family_engine(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([2, 64, 32, 32], hipdnn.DataType.FLOAT)
        scale = hipdnn.Tensor.create([1, 64, 32, 32], hipdnn.DataType.FLOAT)
        outputs = graph.rmsnorm(
            x,
            scale,
            hipdnn.RMSNormAttributes()
            .set_epsilon(_scalar())
            .set_forward_phase(hipdnn.NormFwdPhase.TRAINING),
        )
        assert isinstance(outputs, tuple)
        assert len(outputs) == 2
        for output in outputs:
            assert isinstance(output, hipdnn.Tensor)
            output.set_output(True)
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert outputs[1].get_dim() == [2, 1, 1, 1]
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()  # a torch family engine (issue 25)

    def test_inference_returns_no_inv_rms_and_round_trips(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([4, 8, 16], hipdnn.DataType.FLOAT)
        scale = hipdnn.Tensor.create([1, 1, 16], hipdnn.DataType.FLOAT)
        attrs = hipdnn.RMSNormAttributes().set_epsilon(_scalar()).set_name("norm")
        y, inv_rms = graph.rmsnorm(x, scale, attrs.set_forward_phase(hipdnn.NormFwdPhase.INFERENCE))
        assert inv_rms is None and y.get_name() == "norm::Y"
        y.set_output(True)
        assert graph.validate().is_good()
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_binary(blob).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        assert '"forward_phase":"INFERENCE"' in text and "inv_rms_tensor_uid" not in text

    def test_rules_return_errors_and_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([2, 64, 32, 32], hipdnn.DataType.FLOAT)
        scale = hipdnn.Tensor.create([1, 64, 1, 1], hipdnn.DataType.FLOAT)
        attrs = hipdnn.RMSNormAttributes().set_epsilon(_scalar())
        graph.rmsnorm(x, scale, attrs.set_forward_phase(hipdnn.NormFwdPhase.TRAINING))
        error = graph.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert "has no trailing dims matching input" in error.get_message()
        for args in ((x, scale, hipdnn.MatmulAttributes()), (x, "scale", attrs)):
            try:
                graph.rmsnorm(*args)
            except TypeError:
                continue
            raise AssertionError(f"rmsnorm{args} did not raise TypeError")

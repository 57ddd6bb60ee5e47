"""hipDNN's Python-binding tests of RMSNorm backward (``frontend_wheel_package/tests/
test_rmsnorm.py``: ``TestRMSNormBackward`` and ``test_backward_methods_are_callable``), ported
as the SDPA ones were: the same calls on ``hipdnn_graph.frontend``; hipDNN's GPU test builds the
operation graph here and plans it on a family engine."""

from __future__ import annotations

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def _create(dims: list[int]) -> hipdnn.Tensor:
    return hipdnn.Tensor.create(dims, hipdnn.DataType.FLOAT)


class TestRMSNormBackward:
    def test_graph_builds_and_plans(self) -> None:
        """hipDNN's GPU test_execution_succeeds: the operation graph builds here (dbias absent
        without set_compute_dbias); it plans on the NumPy reference."""
        graph = float_graph()
        dy, x = _create([1, 64, 32, 32]), _create([1, 64, 32, 32])
        scale, inv_rms = _create([1, 64, 32, 32]), _create([1, 1, 1, 1])
        outputs = graph.rmsnorm_backward(dy, x, scale, inv_rms, hipdnn.RMSNormBackwardAttributes())
        assert isinstance(outputs, tuple) and len(outputs) == 3
        dx, dscale, dbias = outputs
        assert dbias is None
        dx.set_output(True)
        dscale.set_output(True)
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert dscale.get_dim() == [1, 64, 32, 32]
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()
        assert graph.build_plans().is_good()
        assert graph.get_plan_name() in ("TORCH_EAGER_ENGINE", "NUMPY_REFERENCE_ENGINE")

    def test_dbias_rules_round_trip_and_type_errors(self) -> None:
        graph = float_graph()
        dy, x = _create([4, 16, 64]), _create([4, 16, 64])
        scale, inv_rms = _create([1, 1, 64]), _create([4, 16, 1])
        attrs = hipdnn.RMSNormBackwardAttributes().has_dbias(True)
        dx, dscale, dbias = graph.rmsnorm_backward(dy, x, scale, inv_rms, attrs)
        assert isinstance(dbias, hipdnn.Tensor) and dbias.get_name() == "RMSNormBackward_0::DBIAS"
        for t in (dx, dscale, dbias):
            t.set_output(True)
        assert graph.validate().is_good() and dbias.get_dim() == [1, 1, 64]
        text, blob = graph.to_json(), graph.to_binary()
        assert '"dbias_tensor_uid"' in text
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good() and restored.to_binary() == blob
        bad = float_graph()
        bad.rmsnorm_backward(dy, x, scale, _create([4, 1, 1]), hipdnn.RMSNormBackwardAttributes())
        error = bad.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message() == (
            "Inverse RMS tensor dimension at index 1 must match input (16), got 1"
        )
        for args in (
            (dy, x, scale, inv_rms, hipdnn.RMSNormAttributes()),
            (dy, x, scale, None, attrs),
        ):
            try:
                graph.rmsnorm_backward(*args)
            except TypeError:
                continue
            raise AssertionError(f"rmsnorm_backward{args} did not raise TypeError")

    def test_backward_methods_are_callable(self) -> None:
        dy, x, scale, inv_rms, dx, dscale, dbias = (_create([1]) for _ in range(7))
        call_attribute_methods(
            hipdnn.RMSNormBackwardAttributes(),
            (
                ("set_name", ("rmsnorm_backward",), "get_name", "rmsnorm_backward"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_dy", (dy,), "get_dy", dy),
                ("set_x", (x,), "get_x", x),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_inv_rms", (inv_rms,), "get_inv_rms", inv_rms),
                ("set_dx", (dx,), "get_dx", dx),
                ("set_dscale", (dscale,), "get_dscale", dscale),
                ("set_dbias", (dbias,), "get_dbias", dbias),
                # set_compute_dbias and its fluent alias has_dbias set the same member
                ("set_compute_dbias", (False,), "get_compute_dbias", False),
                ("has_dbias", (True,), "get_compute_dbias", True),
            ),
        )  # fmt: skip

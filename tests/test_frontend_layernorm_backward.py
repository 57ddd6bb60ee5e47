"""hipDNN's Python-binding tests of layer-norm backward (``frontend_wheel_package/tests/
test_layernorm.py``: ``TestLayernormBackward`` and ``test_backward_methods_are_callable``),
ported as the SDPA ones were: the same calls on ``hipdnn_graph.frontend``; hipDNN's GPU test
builds the operation graph here and plans it on a family engine."""

from __future__ import annotations

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def _create(dims: list[int]) -> hipdnn.Tensor:
    return hipdnn.Tensor.create(dims, hipdnn.DataType.FLOAT)


def _scalar() -> hipdnn.Tensor:
    tensor = _create([1])
    tensor.set_value(1e-5)
    return tensor


class TestLayernormBackward:
    def test_graph_builds_and_plans(self) -> None:
        """hipDNN's GPU test_execution_succeeds: the operation graph builds here; it plans on a
        family engine (torch eager, or the NumPy reference without torch)."""
        graph = float_graph()
        dy, x = _create([16, 64, 32, 32]), _create([16, 64, 32, 32])
        scale = _create([1, 64, 32, 32])
        attrs = (
            hipdnn.LayernormBackwardAttributes()
            .set_mean(_create([16, 1, 1, 1]))
            .set_inv_variance(_create([16, 1, 1, 1]))
            .set_epsilon(_scalar())
        )
        outputs = graph.layernorm_backward(dy, x, scale, attrs)
        assert isinstance(outputs, tuple) and len(outputs) == 3
        for output in outputs:
            assert isinstance(output, hipdnn.Tensor)
            output.set_output(True)
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        dx, _, dbias = outputs
        assert dx.get_dim() == [16, 64, 32, 32] and dbias.get_dim() == [1, 64, 32, 32]
        assert attrs.get_dx() is None  # the graph works on a copy of the attributes
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()
        assert graph.build_plans().is_good()
        assert graph.get_plan_name() in ("TORCH_EAGER_ENGINE", "NUMPY_REFERENCE_ENGINE")

    def test_names_round_trip_and_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        dy, x, scale = _create([4, 16, 32]), _create([4, 16, 32]), _create([1, 16, 32])
        attrs = hipdnn.LayernormBackwardAttributes().set_name("lnb")
        for output in graph.layernorm_backward(dy, x, scale, attrs):
            output.set_output(True)
        assert graph.validate().is_good()
        assert (dy.get_name(), scale.get_name()) == ("lnb::DY", "lnb::SCALE")
        text, blob = graph.to_json(), graph.to_binary()
        assert '"normalized_dim_count":2' in text and '"type":"LayernormBackwardAttributes"' in text
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        for args in ((dy, x, scale, hipdnn.LayernormAttributes()), (dy, "x", scale, attrs)):
            try:
                graph.layernorm_backward(*args)
            except TypeError:
                continue
            raise AssertionError(f"layernorm_backward{args} did not raise TypeError")

    def test_backward_methods_are_callable(self) -> None:
        (dy, x, scale, mean, inv_variance, epsilon, dx, dscale, dbias, saved_mean,
         saved_inv_variance) = (_create([1]) for _ in range(11))  # fmt: skip
        saved = (saved_mean, saved_inv_variance)
        call_attribute_methods(
            hipdnn.LayernormBackwardAttributes(),
            (
                ("set_name", ("layernorm_backward",), "get_name", "layernorm_backward"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_dy", (dy,), "get_dy", dy),
                ("set_x", (x,), "get_x", x),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_mean", (mean,), "get_mean", mean),
                ("set_inv_variance", (inv_variance,), "get_inv_variance", inv_variance),
                ("set_epsilon", (epsilon,), "get_epsilon", epsilon),
                ("set_dx", (dx,), "get_dx", dx),
                ("set_dscale", (dscale,), "get_dscale", dscale),
                ("set_dbias", (dbias,), "get_dbias", dbias),
                ("set_normalized_dim_count", (1,), "get_normalized_dim_count", 1),
                ("set_saved_mean_and_inv_variance", saved, "get_mean", saved_mean),
                ("set_saved_mean_and_inv_variance", saved, "get_inv_variance",
                 saved_inv_variance),
            ),
        )  # fmt: skip

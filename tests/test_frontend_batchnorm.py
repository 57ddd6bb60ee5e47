"""hipDNN's Python-binding tests of batch norm training (``frontend_wheel_package/tests/
test_batchnorm.py``), ported as the SDPA ones were: the same calls on ``hipdnn_graph.frontend``;
hipDNN's GPU test builds the operation graph here and its execution runs on the torch
family engines. (Its backward tests wait for the batch-norm backward family.)"""

from __future__ import annotations

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def _create(dims: list[int]) -> hipdnn.Tensor:
    return hipdnn.Tensor.create(dims, hipdnn.DataType.FLOAT)


def build_batchnorm_training_graph(
    n: int = 4, c: int = 8, h: int = 8, w: int = 8
) -> tuple[
    hipdnn.Graph,
    hipdnn.Tensor,
    hipdnn.Tensor,
    hipdnn.Tensor,
    hipdnn.Tensor,
    hipdnn.Tensor,
    hipdnn.Tensor,
]:
    """hipDNN's helper of the same name: x [N, C, H, W], per-channel scale and bias, an epsilon
    value; y, mean and inv_variance marked outputs."""
    graph = float_graph()
    graph.set_name("batchnorm_training_test")
    x = _create([n, c, h, w])
    x.set_name("x")
    scale = _create([1, c, 1, 1])
    scale.set_name("scale")
    bias = _create([1, c, 1, 1])
    bias.set_name("bias")
    epsilon = hipdnn.Tensor()
    epsilon.set_name("epsilon")
    epsilon.set_value(1e-5)
    attrs = hipdnn.BatchnormAttributes()
    attrs.set_name("batchnorm_node")
    attrs.set_epsilon(epsilon)
    y, mean, inv_variance, _next_mean, _next_var = graph.batchnorm(x, scale, bias, attrs)
    y.set_name("y")
    y.set_output(True)
    mean.set_name("mean")
    mean.set_output(True)
    inv_variance.set_name("inv_variance")
    inv_variance.set_output(True)
    return graph, x, scale, bias, y, mean, inv_variance


class TestBatchnormTraining:
    def test_graph_builds_and_plans(self) -> None:
        """hipDNN's GPU test_execution_succeeds: the graph builds its operation graph here;
        the torch family engines plan it."""
        graph, _x, _scale, _bias, y, mean, inv_variance = build_batchnorm_training_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert y.get_dim() == [4, 8, 8, 8] and mean.get_dim() == [1, 8, 1, 1]
        assert inv_variance.get_stride() == [8, 1, 8, 8]
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()  # a torch family engine (issue 25)

    def test_running_statistics_and_round_trip(self) -> None:
        graph = float_graph()
        x, scale, bias = _create([2, 3, 4, 4]), _create([1, 3, 1, 1]), _create([1, 3, 1, 1])
        running_mean, running_var = _create([1, 3, 1, 1]), _create([1, 3, 1, 1])
        momentum, epsilon = hipdnn.Tensor(), hipdnn.Tensor()
        momentum.set_value(0.1)
        epsilon.set_value(1e-5)
        attrs = hipdnn.BatchnormAttributes().set_epsilon(epsilon).set_name("bn")
        attrs.set_previous_running_stats(running_mean, running_var, momentum)
        outputs = graph.batchnorm(x, scale, bias, attrs)
        assert isinstance(outputs, tuple) and len(outputs) == 5
        for t in outputs:
            assert isinstance(t, hipdnn.Tensor)
            t.set_output(True)
        assert outputs[3].get_name() == "bn::NEXT_RUNNING_MEAN"
        assert graph.validate().is_good()
        assert outputs[4].get_dim() == [1, 3, 1, 1]
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        assert '"peer_stats_tensor_uid":[]' in text

    def test_rules_return_errors_and_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        x, scale, bias = _create([2, 3, 4, 4]), _create([1, 4, 1, 1]), _create([1, 3, 1, 1])
        epsilon = hipdnn.Tensor()
        epsilon.set_value(1e-5)
        attrs = hipdnn.BatchnormAttributes().set_epsilon(epsilon)
        outputs = graph.batchnorm(x, scale, bias, attrs)
        assert outputs[3:] == (None, None)
        error = graph.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message().endswith("channel dimension (index 1) must be 3, got 4")
        for args in ((x, scale, bias, hipdnn.LayernormAttributes()), (x, scale, "bias", attrs)):
            try:
                graph.batchnorm(*args)
            except TypeError:
                continue
            raise AssertionError(f"batchnorm{args} did not raise TypeError")


class TestBatchnormAttributeBindings:
    """hipDNN's test_batchnorm_methods_are_callable: every binding round-trips (its backward
    twin waits for the backward family)."""

    def test_batchnorm_methods_are_callable(self) -> None:
        (x, scale, bias, epsilon, peer_stat, prev_running_mean, prev_running_variance, momentum,
         y, mean, inv_variance, next_running_mean, next_running_variance, combined_mean,
         combined_variance, combined_momentum) = (_create([1]) for _ in range(16))  # fmt: skip
        combined = (combined_mean, combined_variance, combined_momentum)
        call_attribute_methods(
            hipdnn.BatchnormAttributes(),
            (
                ("set_name", ("batchnorm",), "get_name", "batchnorm"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_x", (x,), "get_x", x),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_bias", (bias,), "get_bias", bias),
                ("set_epsilon", (epsilon,), "get_epsilon", epsilon),
                ("set_peer_stats", ([peer_stat],), "get_peer_stats", [peer_stat]),
                ("set_prev_running_mean", (prev_running_mean,), "get_prev_running_mean",
                 prev_running_mean),
                ("set_prev_running_variance", (prev_running_variance,),
                 "get_prev_running_variance", prev_running_variance),
                ("set_momentum", (momentum,), "get_momentum", momentum),
                ("set_y", (y,), "get_y", y),
                ("set_mean", (mean,), "get_mean", mean),
                ("set_inv_variance", (inv_variance,), "get_inv_variance", inv_variance),
                ("set_next_running_mean", (next_running_mean,), "get_next_running_mean",
                 next_running_mean),
                ("set_next_running_variance", (next_running_variance,),
                 "get_next_running_variance", next_running_variance),
                ("set_previous_running_stats", combined, "get_prev_running_mean", combined_mean),
                ("set_previous_running_stats", combined, "get_prev_running_variance",
                 combined_variance),
                ("set_previous_running_stats", combined, "get_momentum", combined_momentum),
            ),
        )  # fmt: skip


def build_batchnorm_backward_graph(
    n: int = 4, c: int = 8, h: int = 8, w: int = 8
) -> tuple[hipdnn.Graph, hipdnn.Tensor, hipdnn.Tensor, hipdnn.Tensor]:
    """hipDNN's helper of the same name: returns the graph and (dx, dscale, dbias)."""
    graph = float_graph()
    graph.set_name("batchnorm_backward_test")
    dy = _create([n, c, h, w])
    dy.set_name("dy")
    x = _create([n, c, h, w])
    x.set_name("x")
    scale = _create([1, c, 1, 1])
    scale.set_name("scale")
    attrs = hipdnn.BatchnormBackwardAttributes()
    attrs.set_name("batchnorm_backward_node")
    dx, dscale, dbias = graph.batchnorm_backward(dy, x, scale, attrs)
    dx.set_name("dx")
    dx.set_output(True)
    dscale.set_name("dscale")
    dscale.set_output(True)
    dbias.set_name("dbias")
    dbias.set_output(True)
    return graph, dx, dscale, dbias


class TestBatchnormBackward:
    def test_graph_builds_and_plans(self) -> None:
        """hipDNN's GPU test_execution_succeeds: the operation graph builds and plans here on the
        NumPy reference (no saved statistics: the torch engine refuses it; the reference
        recomputes them with hipDNN's reference epsilon)."""
        graph, dx, dscale, dbias = build_batchnorm_backward_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert dx.get_dim() == [4, 8, 8, 8] and dscale.get_dim() == [1, 8, 1, 1]
        assert dbias.get_stride() == [8, 1, 8, 8]
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()
        assert graph.build_plans().is_good()
        assert graph.get_plan_name() == "NUMPY_REFERENCE_ENGINE"  # the torch engines refuse it
        text = graph.to_json()
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good() and restored.to_binary() == graph.to_binary()
        try:
            graph.batchnorm_backward(dx, dx, dscale, hipdnn.BatchnormAttributes())
        except TypeError:
            return
        raise AssertionError("wrong attributes did not raise TypeError")

    def test_backward_methods_are_callable(self) -> None:
        (dy, x, scale, mean, inv_variance, dx, dscale, dbias, peer_stat, saved_mean,
         saved_inv_variance) = (_create([1]) for _ in range(11))  # fmt: skip
        saved = (saved_mean, saved_inv_variance)
        call_attribute_methods(
            hipdnn.BatchnormBackwardAttributes(),
            (
                ("set_name", ("batchnorm_backward",), "get_name", "batchnorm_backward"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_dy", (dy,), "get_dy", dy),
                ("set_x", (x,), "get_x", x),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_mean", (mean,), "get_mean", mean),
                ("set_inv_variance", (inv_variance,), "get_inv_variance", inv_variance),
                ("set_dx", (dx,), "get_dx", dx),
                ("set_dscale", (dscale,), "get_dscale", dscale),
                ("set_dbias", (dbias,), "get_dbias", dbias),
                ("set_peer_stats", ([peer_stat],), "get_peer_stats", [peer_stat]),
                ("set_saved_mean_and_inv_variance", saved, "get_mean", saved_mean),
                ("set_saved_mean_and_inv_variance", saved, "get_inv_variance",
                 saved_inv_variance),
            ),
        )  # fmt: skip

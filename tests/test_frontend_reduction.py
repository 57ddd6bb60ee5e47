"""hipDNN's Python-binding tests of reduction (``frontend_wheel_package/tests/test_reduction.py``),
ported as the SDPA ones were: the same calls on ``hipdnn_graph.frontend``; hipDNN's GPU tests
build the operation graph and execute it, here on the best-ranked engine."""

from __future__ import annotations

import numpy as np
from frontend_cases import build_all, float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


class TestReductionAttributeBindings:
    def test_methods_are_callable(self) -> None:
        x = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        y = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        call_attribute_methods(
            hipdnn.ReductionAttributes(),
            (
                ("set_name", ("reduction",), "get_name", "reduction"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_mode", (hipdnn.ReductionMode.ADD,), "get_mode", hipdnn.ReductionMode.ADD),
                ("set_is_deterministic", (True,), "get_is_deterministic", True),
                ("set_x", (x,), "get_x", x),
                ("set_y", (y,), "get_y", y),
            ),
        )  # fmt: skip

    def test_mode_members_are_hipdnns(self) -> None:
        assert [m.name for m in hipdnn.ReductionMode] == [
            "NOT_SET", "ADD", "MUL", "MIN", "MAX", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS",
        ]  # fmt: skip


def _executes_a_sum(graph: hipdnn.Graph, x: hipdnn.Tensor, y: hipdnn.Tensor) -> None:
    """hipDNN's tests build plans and execute; here on the best-ranked engine."""
    handle = build_all(graph)
    data = np.random.default_rng(0).standard_normal([4, 8]).astype(np.float32)
    result = np.zeros([1, 8], np.float32)
    assert graph.execute(handle, {x: data, y: result}).is_good()
    np.testing.assert_allclose(result, data.astype(np.float64).sum(0, keepdims=True), rtol=1e-5)


class TestReduction:
    def test_builds_operation_graph_without_output(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
        output = graph.reduction(x, hipdnn.ReductionAttributes().set_mode(hipdnn.ReductionMode.ADD))
        assert isinstance(output, hipdnn.Tensor)
        output.set_dim([1, 8]).set_stride([8, 1]).set_output(True)
        _executes_a_sum(graph, x, output)

    def test_builds_operation_graph_with_output(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
        output = hipdnn.Tensor.create([1, 8], hipdnn.DataType.FLOAT)
        output.set_output(True)
        attrs = hipdnn.ReductionAttributes().set_mode(hipdnn.ReductionMode.ADD).set_name("sum")
        assert graph.reduction(x, output, attrs) is output
        _executes_a_sum(graph, x, output)

    def test_serialization_round_trips_and_rules_return_errors(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
        y = hipdnn.Tensor.create([1, 8], hipdnn.DataType.FLOAT)
        y.set_output(True)
        attrs = hipdnn.ReductionAttributes().set_mode(hipdnn.ReductionMode.AMAX)
        graph.reduction(x, y, attrs.set_is_deterministic(True))
        assert graph.validate().is_good()
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_binary(np.frombuffer(blob, np.uint8).tobytes()).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        assert '"mode":"amax"' in text and '"is_deterministic":true' in text
        bad = float_graph()
        z = hipdnn.Tensor.create([2, 8], hipdnn.DataType.FLOAT)
        z.set_output(True)
        bad.reduction(x, z, hipdnn.ReductionAttributes().set_mode(hipdnn.ReductionMode.ADD))
        error = bad.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message() == (
            "ReductionNode: Y dim[0]=2 is less than X dim[0]=4 but is not 1"
        )
        unset = float_graph()
        unset.reduction(x, z, hipdnn.ReductionAttributes())
        assert unset.validate().get_message() == "ReductionNode missing mode for pre-validation"

    def test_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        x = hipdnn.Tensor.create([4, 4], hipdnn.DataType.FLOAT)
        for args in (
            (x, hipdnn.MatmulAttributes()),
            (x,),
            (x, x, x, hipdnn.ReductionAttributes()),
            ("x", hipdnn.ReductionAttributes()),
        ):
            try:
                graph.reduction(*args)
            except TypeError:
                continue
            raise AssertionError(f"reduction{args} did not raise TypeError")

"""hipDNN's Python-binding tests of the custom op (``frontend_wheel_package/tests/
test_custom_op.py`` and its ``graph_builders.build_custom_op_graph``), ported as the SDPA ones
were: the same calls on ``hipdnn_graph.frontend``; hipDNN's GPU test builds the operation graph
here and its execution, which needs the plugin that runs the op, is refused naming the family."""

from __future__ import annotations

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def build_custom_op_graph() -> tuple[hipdnn.Graph, ...]:
    """hipDNN's helper of the same name: two [4, 8] inputs, two outputs whose dims and strides
    the caller sets, ``custom_op_id`` ``"example.identity"``."""
    graph = float_graph()
    a = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
    b = hipdnn.Tensor.create([4, 8], hipdnn.DataType.FLOAT)
    outputs = graph.custom_op(
        [a, b], 2, hipdnn.CustomOpAttributes().set_custom_op_id("example.identity")
    )
    # hipDNN's binding returns nb::make_tuple (its graph_builders assert a tuple of this arity)
    assert isinstance(outputs, tuple) and len(outputs) == 2
    y0, y1 = outputs
    for output in (y0, y1):
        output.set_dim([4, 8]).set_stride([8, 1]).set_output(True)
        output.set_data_type(hipdnn.DataType.FLOAT)
    return graph, a, b, y0, y1


class TestCustomOp:
    def test_builds_operation_graph_and_execution_is_refused(self) -> None:
        """hipDNN's GPU test_builds_operation_graph: the operation graph builds here; planning
        is refused naming the family (no engine runs CUSTOM_OP)."""
        graph, _a, _b, y0, _y1 = build_custom_op_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert y0.get_name() == "CustomOp_0::OUT_0"
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.get_code() == hipdnn.ErrorCode.GRAPH_NOT_SUPPORTED
        assert "does not run CUSTOM_OP nodes" in error.get_message()

    def test_outputs_are_a_tuple_of_the_requested_count(self) -> None:
        """hipDNN's binding returns a tuple whatever the count (none included)."""
        graph = float_graph()
        t = hipdnn.Tensor.create([2], hipdnn.DataType.FLOAT)
        attributes = hipdnn.CustomOpAttributes().set_custom_op_id("example.identity")
        three = graph.custom_op([t], 3, attributes)
        assert type(three) is tuple and [o.get_name() for o in three] == [
            f"CustomOp_0::OUT_{i}" for i in range(3)
        ]
        assert all(isinstance(o, hipdnn.Tensor) for o in three)
        assert graph.custom_op([t], 0, attributes) == ()

    def test_round_trip_and_rules_return_errors(self) -> None:
        graph, *_ = build_custom_op_graph()
        text = graph.to_json()
        again = hipdnn.Graph()
        assert again.from_json(text).is_good() and again.to_json() == text
        blob = graph.to_binary()
        assert again.from_binary(blob).is_good() and again.to_binary() == blob
        bad = float_graph()
        (out,) = bad.custom_op(
            [hipdnn.Tensor.create([2], hipdnn.DataType.FLOAT)], 1, hipdnn.CustomOpAttributes()
        )
        out.set_dim([2]).set_stride([1])
        error = bad.validate()
        assert error.get_code() == hipdnn.ErrorCode.ATTRIBUTE_NOT_SET
        assert error.get_message() == "Node CustomOp_0 does not have a custom_op_id set"

    def test_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        t = hipdnn.Tensor.create([2], hipdnn.DataType.FLOAT)
        for call in (
            lambda: graph.custom_op([t], 1, hipdnn.MatmulAttributes()),
            lambda: graph.custom_op(t, 1, hipdnn.CustomOpAttributes()),
            lambda: graph.custom_op([t], -1, hipdnn.CustomOpAttributes()),
        ):
            try:
                call()
            except TypeError:
                continue
            raise AssertionError("no TypeError")


class TestCustomOpAttributeBindings:
    """Every custom operation attribute binding round-trips through its getter."""

    def test_methods_are_callable(self) -> None:
        input_tensor = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        output_tensor = hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT)
        call_attribute_methods(
            hipdnn.CustomOpAttributes(),
            (
                ("set_name", ("custom_op",), "get_name", "custom_op"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_custom_op_id", ("example.identity",), "get_custom_op_id",
                 "example.identity"),
                ("set_inputs", ([input_tensor],), "get_inputs", [input_tensor]),
                ("set_outputs", ([output_tensor],), "get_outputs", [output_tensor]),
                ("set_data", ([0, 1, 2],), "get_data", [0, 1, 2]),
            ),
        )  # fmt: skip

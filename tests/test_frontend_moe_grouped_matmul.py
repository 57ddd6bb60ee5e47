"""hipDNN's Python-binding tests of the MoE grouped matmul (``frontend_wheel_package/tests/
test_moe_grouped_matmul.py`` and its ``graph_builders.build_moe_grouped_matmul_graph``), ported as
the SDPA ones were: the same calls on ``hipdnn_graph.frontend``; hipDNN's GPU test builds the
operation graph here and its execution, which needs an engine for the family, is refused naming
it. (hipDNN binds no ``moe_grouped_matmul_bwd``; the backward is on :class:`hipdnn_graph.Graph`.)"""

from __future__ import annotations

import importlib.util

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def build_moe_grouped_matmul_graph() -> tuple[hipdnn.Graph, ...]:
    """hipDNN's helper of the same name: token [1, 8, 16], weight [2, 16, 32], offsets [2, 1, 1],
    both routing tensors [1, 8, 1] (INT32), SCATTER with top_k 2; the output marked."""
    graph = float_graph()
    token = hipdnn.Tensor.create([1, 8, 16], hipdnn.DataType.FLOAT)
    token.set_name("token")
    weight = hipdnn.Tensor.create([2, 16, 32], hipdnn.DataType.FLOAT)
    weight.set_name("weight")
    first_token_offset = hipdnn.Tensor.create([2, 1, 1], hipdnn.DataType.INT32)
    first_token_offset.set_name("first_token_offset")
    token_index = hipdnn.Tensor.create([1, 8, 1], hipdnn.DataType.INT32)
    token_index.set_name("token_index")
    token_ks = hipdnn.Tensor.create([1, 8, 1], hipdnn.DataType.INT32)
    token_ks.set_name("token_ks")
    output = graph.moe_grouped_matmul(
        token,
        weight,
        first_token_offset,
        token_index,
        token_ks,
        hipdnn.MoeGroupedMatmulAttributes()
        .set_mode(hipdnn.MoeGroupedMatmulMode.SCATTER)
        .set_top_k(2),
    )
    output.set_name("output")
    output.set_output(True)
    output.set_data_type(hipdnn.DataType.FLOAT)
    return graph, token, weight, first_token_offset, token_index, token_ks, output


class TestMoeGroupedMatmul:
    def test_graph_builds_and_plans_on_the_torch_eager_engine_or_the_reference(self) -> None:
        """hipDNN's GPU test_execution_succeeds: the operation graph builds here and plans on
        the torch eager engine where torch is installed (it lowers MOE_GROUPED_MATMUL), else on
        the NumPy reference."""
        graph, *_, output = build_moe_grouped_matmul_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert (output.get_dim(), output.get_stride()) == ([1, 8, 32], [256, 32, 1])
        error = graph.create_execution_plans()
        if error.is_good():
            error = graph.check_support()
        assert error.is_good(), error.get_message()
        assert graph.build_plans().is_good()
        torch = importlib.util.find_spec("torch") is not None
        assert graph.get_plan_name() == (
            "TORCH_EAGER_ENGINE" if torch else "NUMPY_REFERENCE_ENGINE"
        )

    def test_round_trip_and_rules_return_errors(self) -> None:
        graph, *_ = build_moe_grouped_matmul_graph()
        text = graph.to_json()
        again = hipdnn.Graph()
        assert again.from_json(text).is_good() and again.to_json() == text
        blob = graph.to_binary()
        assert again.from_binary(blob).is_good() and again.to_binary() == blob
        bad = float_graph()
        bad.moe_grouped_matmul(
            hipdnn.Tensor.create([1, 8, 16], hipdnn.DataType.FLOAT),
            hipdnn.Tensor.create([2, 16, 32], hipdnn.DataType.FLOAT),
            hipdnn.Tensor.create([2, 1, 1], hipdnn.DataType.INT32),
            None,
            None,
            hipdnn.MoeGroupedMatmulAttributes().set_mode(hipdnn.MoeGroupedMatmulMode.GATHER),
        )
        error = bad.validate()
        assert error.get_code() == hipdnn.ErrorCode.ATTRIBUTE_NOT_SET
        assert error.get_message() == "MoeGroupedMatmulNode missing MoE token-index tensor input"

    def test_wrong_arguments_raise_type_error(self) -> None:
        graph = float_graph()
        t = hipdnn.Tensor.create([1, 8, 16], hipdnn.DataType.FLOAT)
        for call in (
            lambda: graph.moe_grouped_matmul(t, t, t, None, None, hipdnn.MatmulAttributes()),
            lambda: graph.moe_grouped_matmul(t, 3, t, None, None,
                                             hipdnn.MoeGroupedMatmulAttributes()),
        ):  # fmt: skip
            try:
                call()
            except TypeError:
                continue
            raise AssertionError("no TypeError")


class TestMoeGroupedMatmulAttributeBindings:
    """Every MoE grouped matmul attribute binding round-trips through its getter."""

    def test_methods_are_callable(self) -> None:
        token, weight, first_token_offset, token_index, token_ks, output = (
            hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT) for _ in range(6)
        )
        call_attribute_methods(
            hipdnn.MoeGroupedMatmulAttributes(),
            (
                ("set_name", ("moe_grouped_matmul",), "get_name", "moe_grouped_matmul"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_token", (token,), "get_token", token),
                ("set_weight", (weight,), "get_weight", weight),
                ("set_first_token_offset", (first_token_offset,), "get_first_token_offset",
                 first_token_offset),
                ("set_token_index", (token_index,), "get_token_index", token_index),
                ("set_token_ks", (token_ks,), "get_token_ks", token_ks),
                ("set_output", (output,), "get_output", output),
                ("set_mode", (hipdnn.MoeGroupedMatmulMode.SCATTER,), "get_mode",
                 hipdnn.MoeGroupedMatmulMode.SCATTER),
                ("set_top_k", (1,), "get_top_k", 1),
            ),
        )  # fmt: skip

    def test_mode_members_in_binding_order(self) -> None:
        assert [m.name for m in hipdnn.MoeGroupedMatmulMode] == [
            "NOT_SET", "NONE", "GATHER", "SCATTER",
        ]  # fmt: skip

"""hipDNN's Python-binding tests of the block-scale families (the bindings' shared graph
builders ``build_block_scale_quantize_graph``/``build_block_scale_dequantize_graph`` and their
round-trip and attribute tests), ported as the SDPA ones were: the same calls on
``hipdnn_graph.frontend``; hipDNN's GPU tests build the operation graph here and plan it on the
NumPy reference (the dequantize graph's block size is one hipDNN's two references read apart, so
the reference refuses it naming why)."""

from __future__ import annotations

import importlib.util

from frontend_cases import float_graph
from test_frontend_families import call_attribute_methods

import hipdnn_graph.frontend as hipdnn


def _create(dims: list[int]) -> hipdnn.Tensor:
    return hipdnn.Tensor.create(dims, hipdnn.DataType.FLOAT)


def build_block_scale_dequantize_graph() -> tuple[hipdnn.Graph, hipdnn.Tensor]:
    """hipDNN's builder of the same name (returning the graph and y here): y stays virtual."""
    graph = float_graph()
    x = _create([2, 64, 32, 32])
    x.set_name("x")
    scale = _create([2, 2, 32, 32])
    scale.set_name("scale")
    y = graph.block_scale_dequantize(
        x, scale, hipdnn.BlockScaleDequantizeAttributes().set_block_size([32])
    )
    y.set_name("y")
    return graph, y


def build_block_scale_quantize_graph() -> tuple[hipdnn.Graph, hipdnn.Tensor, hipdnn.Tensor]:
    """hipDNN's builder of the same name (returning the graph, y and scale here)."""
    graph = float_graph()
    x = _create([2, 64, 32, 32])
    x.set_name("x")
    outputs = graph.block_scale_quantize(
        x, hipdnn.BlockScaleQuantizeAttributes().set_block_size(32)
    )
    assert isinstance(outputs, tuple) and len(outputs) == 2  # nb::make_tuple, as hipDNN's
    y, scale = outputs
    y.set_name("y")
    scale.set_name("scale")
    for output in (y, scale):
        output.set_output(True)
        output.set_data_type(hipdnn.DataType.FLOAT)
    return graph, y, scale


def _planning_error(graph: hipdnn.Graph) -> hipdnn.Error:
    error = graph.create_execution_plans()
    return graph.check_support() if error.is_good() else error


class TestBlockScaleQuantize:
    def test_graph_builds_and_plans_on_the_torch_eager_engine_or_the_reference(self) -> None:
        """A single node: the torch eager engine runs it where torch is installed (it lowers
        block scale), else the NumPy reference."""
        graph, y, scale = build_block_scale_quantize_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert y.get_dim() == [2, 64, 32, 32] and scale.get_dim() == [2, 64, 32, 1]
        error = _planning_error(graph)
        assert error.is_good(), error.get_message()
        assert graph.build_plans().is_good()
        torch = importlib.util.find_spec("torch") is not None
        assert graph.get_plan_name() == (
            "TORCH_EAGER_ENGINE" if torch else "NUMPY_REFERENCE_ENGINE"
        )

    def test_round_trip_rules_and_type_errors(self) -> None:
        graph, _, _ = build_block_scale_quantize_graph()
        text, blob = graph.to_json(), graph.to_binary()
        assert '"type":"BlockScaleQuantizeAttributes"' in text.replace(" ", "")
        restored = hipdnn.Graph()
        assert restored.from_json(text).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        bad = float_graph()
        bad.block_scale_quantize(_create([2, 30]), hipdnn.BlockScaleQuantizeAttributes())
        error = bad.validate()
        assert (error.get_code(), error.get_message()) == (
            hipdnn.ErrorCode.ATTRIBUTE_NOT_SET,
            "BlockScaleQuantizeNode block_size not set",
        )
        for args in ((_create([2, 32]), hipdnn.BlockScaleDequantizeAttributes()), ("x", None)):
            try:
                bad.block_scale_quantize(*args)
            except TypeError:
                continue
            raise AssertionError(f"block_scale_quantize{args} did not raise TypeError")

    def test_attribute_methods_are_callable(self) -> None:
        x, y, scale = (_create([1]) for _ in range(3))
        call_attribute_methods(
            hipdnn.BlockScaleQuantizeAttributes(),
            (
                ("set_name", ("block_scale_quantize",), "get_name", "block_scale_quantize"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_x", (x,), "get_x", x),
                ("set_y", (y,), "get_y", y),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_block_size", (32,), "get_block_size", 32),
                ("set_axis", (1,), "get_axis", 1),
                ("set_transpose", (True,), "get_transpose", True),
            ),
        )  # fmt: skip


class TestBlockScaleDequantize:
    def test_graph_builds_and_the_reference_names_its_ambiguous_block_size(self) -> None:
        """hipDNN's builder: block_size [32] for X [2, 64, 32, 32] and SCALE [2, 2, 32, 32],
        which its two reference versions read differently; the NumPy reference says so."""
        graph, y = build_block_scale_dequantize_graph()
        handle = hipdnn.create_handle()
        assert graph.validate().is_good() and graph.build_operation_graph(handle).is_good()
        assert y.get_dim() == [2, 64, 32, 32] and y.get_is_virtual()
        error = _planning_error(graph)
        assert error.get_code() == hipdnn.ErrorCode.GRAPH_NOT_SUPPORTED
        assert (
            "NUMPY_REFERENCE_ENGINE: node 'BlockScaleDequantize_0': hipDNN's references read "
            "block_size [32] for X [2, 64, 32, 32] and SCALE [2, 2, 32, 32] differently"
        ) in error.get_message()

    def test_round_trip_rules_and_type_errors(self) -> None:
        graph, _ = build_block_scale_dequantize_graph()
        text, blob = graph.to_json(), graph.to_binary()
        restored = hipdnn.Graph()
        assert restored.from_binary(blob).is_good()
        assert restored.to_json() == text and restored.to_binary() == blob
        bad = float_graph()
        attrs = hipdnn.BlockScaleDequantizeAttributes().set_block_size([32, 16, 8])
        bad.block_scale_dequantize(_create([2, 64]), _create([2, 2]), attrs)
        error = bad.validate()
        assert (error.get_code(), error.get_message()) == (
            hipdnn.ErrorCode.INVALID_VALUE,
            "BlockScaleDequantizeNode block_size has 3 entries but input tensor has only 2 "
            "dimensions",
        )
        try:
            bad.block_scale_dequantize(
                _create([2]), _create([1]), hipdnn.BlockScaleQuantizeAttributes()
            )
        except TypeError:
            return
        raise AssertionError("wrong attributes did not raise TypeError")

    def test_attribute_methods_are_callable(self) -> None:
        x, scale, y = (_create([1]) for _ in range(3))
        call_attribute_methods(
            hipdnn.BlockScaleDequantizeAttributes(),
            (
                ("set_name", ("block_scale_dequantize",), "get_name", "block_scale_dequantize"),
                ("set_compute_data_type", (hipdnn.DataType.FLOAT,), "get_compute_data_type",
                 hipdnn.DataType.FLOAT),
                ("set_x", (x,), "get_x", x),
                ("set_scale", (scale,), "get_scale", scale),
                ("set_y", (y,), "get_y", y),
                ("set_block_size", ([1, 32],), "get_block_size", [1, 32]),
                ("set_block_size", (16, 0), "get_block_size", [16, 32]),
                ("set_is_negative_scale", (True,), "get_is_negative_scale", True),
            ),
        )  # fmt: skip

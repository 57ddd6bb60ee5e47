"""Graph builders shared by the frontend tests, written as hipDNN's own tests write them."""

from __future__ import annotations

from typing import Any

import hipdnn_graph.frontend as hipdnn


def float_graph() -> hipdnn.Graph:
    """A graph whose io, intermediate and compute types are FLOAT."""
    graph = hipdnn.Graph()
    graph.set_io_data_type(hipdnn.DataType.FLOAT)
    graph.set_intermediate_data_type(hipdnn.DataType.FLOAT)
    graph.set_compute_data_type(hipdnn.DataType.FLOAT)
    return graph


def sdpa_graph(
    sq: int = 16, skv: int = 32, attributes: Any = None, dims: tuple[int, int, int] = (2, 8, 64)
) -> tuple[Any, ...]:
    """``(graph, q, k, v, o, stats)`` for an SDPA forward graph with stats."""
    b, h, d = dims
    graph = float_graph()
    q = hipdnn.Tensor.create([b, h, sq, d], hipdnn.DataType.FLOAT)
    k = hipdnn.Tensor.create([b, h, skv, d], hipdnn.DataType.FLOAT)
    v = hipdnn.Tensor.create([b, h, skv, d], hipdnn.DataType.FLOAT)
    if attributes is None:
        attributes = hipdnn.SdpaAttributes().set_generate_stats(True)
    outputs = graph.sdpa(q, k, v, attributes)
    assert isinstance(outputs, tuple) and len(outputs) == 2
    o, stats = outputs
    o.set_output(True)
    if stats is not None:
        stats.set_output(True)
    return graph, q, k, v, o, stats


def sdpa_backward_graph(
    sq: int = 16, skv: int = 32, attributes: Any = None, dims: tuple[int, int, int] = (2, 8, 64)
) -> tuple[Any, ...]:
    """``(graph, q, k, v, o, d_o, stats, dq, dk, dv)`` for an SDPA backward graph."""
    b, h, d = dims
    graph = float_graph()
    q = hipdnn.Tensor.create([b, h, sq, d], hipdnn.DataType.FLOAT)
    k = hipdnn.Tensor.create([b, h, skv, d], hipdnn.DataType.FLOAT)
    v = hipdnn.Tensor.create([b, h, skv, d], hipdnn.DataType.FLOAT)
    o = hipdnn.Tensor.create([b, h, sq, d], hipdnn.DataType.FLOAT)
    d_o = hipdnn.Tensor.create([b, h, sq, d], hipdnn.DataType.FLOAT)
    stats = hipdnn.Tensor.create([b, h, sq, 1], hipdnn.DataType.FLOAT)
    if attributes is None:
        attributes = hipdnn.SdpaBackwardAttributes()
    outputs = graph.sdpa_backward(q, k, v, o, d_o, stats, attributes)
    assert isinstance(outputs, tuple) and len(outputs) == 3
    for output in outputs:
        output.set_output(True)
    return (graph, q, k, v, o, d_o, stats, *outputs)


def build_all(graph: hipdnn.Graph, handle: Any = None) -> Any:
    """Validate, lower, plan and build, asserting each step's Error; returns the handle."""
    handle = hipdnn.create_handle() if handle is None else handle
    for step in (
        graph.validate,
        lambda: graph.build_operation_graph(handle),
        graph.create_execution_plans,
        graph.check_support,
        graph.build_plans,
    ):
        error = step()
        assert isinstance(error, hipdnn.Error)
        assert error.is_good(), error.get_message()
    return handle

"""Pictures: graph.to_dot() renders with Graphviz, graph.to_mermaid() describes every edge."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import hipdnn_graph as hg
from hipdnn_graph.visualize import to_dot, to_mermaid


def fwd_bwd_graph(name: str = "attn") -> hg.Graph:
    g = hg.Graph(
        name=name,
        io_data_type=hg.DataType.HALF,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[1, 2, 16, 64])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    b = g.tensor(name='bias "quoted" <x>', dim=[1, 1, 16, 16])
    o, stats = g.sdpa(q, k, v, name="fwd", bias=b, use_causal_mask=True, generate_stats=True)
    assert stats is not None
    do = g.tensor_like(q, "dO")
    for t in g.sdpa_backward(q, k, v, o, do, stats, name="bwd", bias=b, use_causal_mask=True):
        t.set_output(True)
    return g


def test_methods_delegate_to_functions() -> None:
    g = fwd_bwd_graph()
    assert g.to_dot() == to_dot(g)
    assert g.to_mermaid() == to_mermaid(g)


def test_dot_shapes_and_virtual_style() -> None:
    g = fwd_bwd_graph()
    g.build_operation_graph()
    dot = g.to_dot()
    assert dot.startswith('digraph "attn" {')
    assert dot.count("shape=box") == 2
    assert dot.count("shape=ellipse") == len(g.graph_tensors())
    virtual = [line for line in dot.splitlines() if 'style="dashed"' in line]
    assert len(virtual) == 2 and all("fwd::" in line for line in virtual)
    assert "[1, 2, 16, 64] HALF" in dot and "uid 1" in dot
    assert '\\"quoted\\"' in dot


def test_mermaid_lists_every_slot_edge() -> None:
    g = fwd_bwd_graph()
    g.validate()
    text = g.to_mermaid()
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    edges = [line for line in lines if "-->|" in line]
    expected = sum(len(n.inputs()) + len(n.outputs()) for n in g.nodes)
    assert len(edges) == expected
    assert "#quot;quoted#quot; #lt;x#gt;" in text  # labels cannot break out of their quotes
    assert "class t" in text and " virtual;" in text


def test_unvalidated_graph_draws_unknowns() -> None:
    g = hg.Graph()
    q = g.tensor(name="Q", dim=[1, 1, 4, 8])
    g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    text = to_mermaid(g)
    assert "[?] type?" in text  # the virtual O before inference
    assert "type?" in to_dot(g)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_dot_renders_with_graphviz() -> None:
    g = fwd_bwd_graph()
    g.build_operation_graph()
    result = subprocess.run(
        ["dot", "-Tsvg"], input=g.to_dot(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "<svg" in result.stdout and "bwd::dQ" in result.stdout

"""Pictures: graph.to_dot() renders with Graphviz, graph.to_mermaid() describes every edge."""

from __future__ import annotations

import re
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


_DOT_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_][A-Za-z_0-9]*|\d+)|(->|[{}\[\];,=])|(\s+)')
_DOT_WORDS = {"digraph", "rankdir", "LR", "node", "edge", "fontname", "fontsize", "shape"}
_DOT_WORDS |= {"ellipse", "box", "style", "label"}


def _dot_strings(dot: str) -> list[str]:
    """The quoted strings of a DOT text, unescaped as Graphviz reads a label (``\\n`` a line
    break); fails when anything outside a string is not this module's own syntax."""
    strings, pos = [], 0
    while pos < len(dot):
        match = _DOT_TOKEN.match(dot, pos)
        assert match is not None, f"not DOT syntax at {dot[pos : pos + 40]!r}"
        quoted, word = match.group(1), match.group(2)
        if quoted is not None:
            strings.append(re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], quoted))
        elif word is not None:
            assert word in _DOT_WORDS or re.fullmatch(r"[tn]?\d+", word), word
        pos = match.end()
    return strings


@pytest.mark.parametrize(
    "name", ['x\\"]; evil [label="pwned', "back\\slash", "end\\", "two\nlines \\n"]
)
def test_dot_labels_cannot_break_out(name: str) -> None:
    # A backslash in a node, tensor or graph name must reach the label as a backslash: left
    # raw it escapes the quote that follows and the rest of the name becomes DOT statements.
    g = hg.Graph(name=name)
    q = g.tensor(name=name + "Q", dim=[1, 1, 4, 8])
    g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name=name, generate_stats=False)
    strings = _dot_strings(g.to_dot())
    assert strings[0] == name
    assert f"{name}\nSDPA_FWD" in strings
    assert f"{name}Q\n[1, 1, 4, 8] type?" in strings

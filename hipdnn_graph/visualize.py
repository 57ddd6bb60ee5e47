"""Pictures of a graph: Graphviz DOT and Mermaid flowcharts.

Nodes are drawn as boxes (name and node type), tensors as ellipses (name, dims, data type and
uid when known); virtual tensors are dashed. Edges carry the slot names, so a picture reads like
the node's slot table. Both functions only read the graph: call ``graph.validate()`` first to see
inferred dims and filled data types, and ``graph.build_operation_graph()`` to see uids.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.HALF, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 8, 16])
    >>> o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="fwd",
    ...               generate_stats=False)
    >>> print(to_mermaid(g).splitlines()[0])
    flowchart LR
    >>> to_dot(g).startswith("digraph")
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .types import DataType

if TYPE_CHECKING:
    from .graph import Graph
    from .tensor import TensorAttributes

__all__ = ["to_dot", "to_mermaid"]


@dataclass(frozen=True)
class _Edge:
    tensor: int
    node: int
    slot: str
    into_node: bool


@dataclass(frozen=True)
class _Picture:
    tensors: list[TensorAttributes]
    nodes: list[tuple[str, str]]  # (name, node type)
    edges: list[_Edge]


def _collect(graph: Graph) -> _Picture:
    tensors: list[TensorAttributes] = []
    index: dict[int, int] = {}

    def tensor_id(t: TensorAttributes) -> int:
        key = id(t)
        if key not in index:
            index[key] = len(tensors)
            tensors.append(t)
        return index[key]

    for t in graph.graph_tensors():
        tensor_id(t)
    nodes: list[tuple[str, str]] = []
    edges: list[_Edge] = []
    for n, node in enumerate(graph.nodes):
        nodes.append((node.name, node.get_node_type().name))
        a: Any = node.attributes
        for slot in a.InputNames:
            tensor = a.inputs.get(slot)
            if tensor is not None:
                edges.append(_Edge(tensor_id(tensor), n, slot.name, True))
        for slot in a.OutputNames:
            tensor = a.outputs.get(slot)
            if tensor is not None:
                edges.append(_Edge(tensor_id(tensor), n, slot.name, False))
    return _Picture(tensors, nodes, edges)


def _tensor_lines(t: TensorAttributes) -> list[str]:
    dims = "[" + ", ".join(map(str, t.dim)) + "]" if t.dim else "[?]"
    kind = t.data_type.name if t.data_type != DataType.NOT_SET else "type?"
    lines = [t.name or "(unnamed)", f"{dims} {kind}"]
    extra = []
    if t.uid is not None:
        extra.append(f"uid {t.uid}")
    if t.value is not None:
        extra.append(f"value {t.value!r}")
    elif t.is_pass_by_value:
        extra.append("by value")
    if extra:
        lines.append(", ".join(extra))
    return lines


def _dot_escape(text: str) -> str:
    """``text`` for the inside of a quoted DOT string: backslashes and quotes escaped, so that a
    name can neither end the string nor start an escape sequence (``\\n``, ``\\l``)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _dot_quote(text: str) -> str:
    return '"' + _dot_escape(text) + '"'


def _dot_label(lines: list[str]) -> str:
    """A quoted DOT label of ``lines``, one line each (joined by DOT's ``\\n`` escape)."""
    return '"' + "\\n".join(_dot_escape(line) for line in lines) + '"'


def to_dot(graph: Graph) -> str:
    """The graph as Graphviz DOT text (render with ``dot -Tsvg``).

    Args:
        graph: the graph to draw.

    Returns:
        A ``digraph`` whose boxes are nodes and ellipses tensors (dashed when virtual).
    """
    pic = _collect(graph)
    title = graph.get_name() or "graph"
    out = [
        f"digraph {_dot_quote(title)} {{",
        "  rankdir=LR;",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    for i, t in enumerate(pic.tensors):
        style = 'style="dashed"' if t.is_virtual else 'style="solid"'
        out.append(f"  t{i} [shape=ellipse, {style}, label={_dot_label(_tensor_lines(t))}];")
    for n, (name, kind) in enumerate(pic.nodes):
        label = _dot_label([name, kind])
        out.append(f'  n{n} [shape=box, style="rounded,bold", label={label}];')
    for e in pic.edges:
        a, b = (f"t{e.tensor}", f"n{e.node}") if e.into_node else (f"n{e.node}", f"t{e.tensor}")
        out.append(f"  {a} -> {b} [label={_dot_quote(e.slot)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def _mermaid_text(text: str) -> str:
    # inside a quoted Mermaid label: entity codes for the characters that end or break it
    return (
        text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    )


def to_mermaid(graph: Graph) -> str:
    """The graph as a Mermaid flowchart (the docs render it in a ``mermaid`` fence).

    Args:
        graph: the graph to draw.

    Returns:
        A ``flowchart LR`` whose rectangles are nodes and stadiums tensors; virtual tensors use
        the dashed ``virtual`` class.
    """
    pic = _collect(graph)
    out = ["flowchart LR"]
    for i, t in enumerate(pic.tensors):
        label = "<br/>".join(_mermaid_text(s) for s in _tensor_lines(t))
        out.append(f'    t{i}(["{label}"])')
    for n, (name, kind) in enumerate(pic.nodes):
        out.append(f'    n{n}["<b>{_mermaid_text(name)}</b><br/>{kind}"]')
    for e in pic.edges:
        a, b = (f"t{e.tensor}", f"n{e.node}") if e.into_node else (f"n{e.node}", f"t{e.tensor}")
        out.append(f"    {a} -->|{_mermaid_text(e.slot)}| {b}")
    out.append("    classDef virtual stroke-dasharray: 5 5;")
    out.append("    classDef op fill:#e8eefc,stroke:#3b5bdb;")
    virtual = [f"t{i}" for i, t in enumerate(pic.tensors) if t.is_virtual]
    if virtual:
        out.append(f"    class {','.join(virtual)} virtual;")
    if pic.nodes:
        out.append(f"    class {','.join(f'n{n}' for n in range(len(pic.nodes)))} op;")
    return "\n".join(out) + "\n"

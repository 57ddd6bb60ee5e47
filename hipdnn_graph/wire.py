"""Graph ↔ hipDNN's wire: the bridge between the frontend and both of hipDNN's formats.

:func:`graph_to_wire` lists what a :class:`~hipdnn_graph.Graph` holds in the order hipDNN's
serialized graph keeps (tensors in the graph's order, nodes in topological order);
:func:`graph_from_wire` builds a graph from decoded parts through
:meth:`~hipdnn_graph.Graph.from_parts`. The codecs themselves live in
:mod:`hipdnn_graph.descriptors` and know no node type.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(name="fwd", io_data_type=hg.DataType.HALF,
    ...              intermediate_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 8, 16])
    >>> o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="attn")
    >>> wire = graph_to_wire(g)
    >>> [t.name for t in wire.tensors], [t.uid for t in wire.tensors]
    (['Q', 'K', 'V', 'attn::O', 'attn::Stats'], [1, 2, 3, 4, 5])
    >>> graph_from_wire(wire).nodes[0].name
    'attn'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .attributes.graph_attributes import GraphAttributes
from .descriptors.wire_model import WireGraph, check_wire_graph
from .nodes.custom_family import lift_custom_op

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["graph_from_wire", "graph_to_wire", "signed64", "unsigned64"]


def signed64(value: int) -> int:
    """A 64-bit engine id as the INT64 that descriptors and hipDNN's wire store."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned64(value: int) -> int:
    """The 64-bit engine id an INT64 from :func:`signed64` stands for."""
    return value & ((1 << 64) - 1)


def graph_to_wire(graph: Graph) -> WireGraph:
    """The wire form of a graph.

    A graph whose tensors lack uids is validated first (when it is not already) and given uids
    (as ``build_operation_graph`` does); a graph whose tensors all have uids, such as a decoded
    one, is written as it stands.

    Raises:
        HipdnnError: the graph's validation error, or INVALID_VALUE for a broken content rule
            (duplicate uids, absurd dims).
    """
    tensors = graph.wire_tensors()
    if any(t.uid is None for t in tensors):
        if not graph.is_validated:
            graph.validate()
        from .graph.lifecycle import assign_uids

        assign_uids(graph)
        tensors = graph.wire_tensors()
    attrs = graph.attributes
    preferred = graph.get_preferred_engine_id_ext()
    wire = WireGraph(
        name=attrs.name,
        compute_data_type=attrs.compute_data_type,
        intermediate_data_type=attrs.intermediate_data_type,
        io_data_type=attrs.io_data_type,
        preferred_engine_id=None if preferred is None else signed64(preferred),
        tensors=tensors,
        nodes=[node.wire_form() for node in graph.nodes],
        metadata=graph.wire_metadata,
    )
    check_wire_graph(wire)
    return wire


def graph_from_wire(wire: WireGraph) -> Graph:
    """The graph a decoded :class:`~hipdnn_graph.descriptors.wire_model.WireGraph` describes
    (a custom op of a registered family that is not hipDNN's becomes that family's node:
    :func:`~hipdnn_graph.nodes.custom_family.lift_custom_op`).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for such a custom op whose payload is not its family's.
    """
    from .graph import Graph

    attributes = GraphAttributes(
        name=wire.name,
        compute_data_type=wire.compute_data_type,
        intermediate_data_type=wire.intermediate_data_type,
        io_data_type=wire.io_data_type,
    )
    nodes: list[Any] = [lift_custom_op(spec.make_node(a, attributes)) for spec, a in wire.nodes]
    preferred = wire.preferred_engine_id
    return Graph.from_parts(
        attributes,
        wire.tensors,
        nodes,
        preferred_engine_id=None if preferred is None else unsigned64(preferred),
        wire_metadata=wire.metadata,
    )

"""Graph parts ↔ hipDNN's wire: the bridge between the frontend and both of hipDNN's formats.

A graph travels as its :class:`GraphParts` (graph attributes, tensors, nodes, preferred engine,
wire metadata): :func:`graph_to_wire` lists the parts in the order hipDNN's serialized graph
keeps (tensors in the graph's order, nodes in topological order); :func:`graph_from_wire` hands
back the parts a decoded graph is made of. Only the Graph side turns parts into a
:class:`~hipdnn_graph.Graph` (:meth:`~hipdnn_graph.Graph.from_parts`) and a graph into parts
(:meth:`~hipdnn_graph.Graph.to_parts`): this module never imports the Graph core. The codecs
themselves live in :mod:`hipdnn_graph.descriptors` and know no node type.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(name="fwd", io_data_type=hg.DataType.HALF,
    ...              intermediate_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 8, 16])
    >>> o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="attn")
    >>> wire = graph_to_wire(g.build_operation_graph().to_parts())
    >>> [t.name for t in wire.tensors], [t.uid for t in wire.tensors]
    (['Q', 'K', 'V', 'attn::O', 'attn::Stats'], [1, 2, 3, 4, 5])
    >>> parts = graph_from_wire(wire)
    >>> parts.nodes[0].name, hg.Graph.from_parts(**vars(parts)).nodes[0].name
    ('attn', 'attn')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .attributes.graph_attributes import GraphAttributes
from .descriptors.wire_model import WireGraph, WireMetadata, check_wire_graph
from .nodes.custom_family import lift_custom_op
from .tensor import TensorAttributes

__all__ = ["GraphParts", "graph_from_wire", "graph_to_wire", "signed64", "unsigned64"]


@dataclass
class GraphParts:
    """What a graph is made of, as the wire and the descriptors hand it over: the keyword
    arguments of :meth:`~hipdnn_graph.Graph.from_parts`, as :meth:`~hipdnn_graph.Graph.to_parts`
    gives them.

    Attributes:
        attributes: the graph attributes.
        tensors: the graph's tensors, in the order to keep.
        nodes: the nodes (instances of :class:`~hipdnn_graph.nodes.Node`), in topological order.
        preferred_engine_id: the preferred engine's 64-bit id, if any.
        wire_metadata: hipDNN's id, engine-API floor and override flag, if any.
    """

    attributes: GraphAttributes
    tensors: list[TensorAttributes]
    nodes: list[Any] = field(default_factory=list)
    preferred_engine_id: int | None = None
    wire_metadata: WireMetadata | None = None


def signed64(value: int) -> int:
    """A 64-bit engine id as the INT64 that descriptors and hipDNN's wire store."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned64(value: int) -> int:
    """The 64-bit engine id an INT64 from :func:`signed64` stands for."""
    return value & ((1 << 64) - 1)


def graph_to_wire(parts: GraphParts) -> WireGraph:
    """The wire form of a graph's parts, whose tensors all have uids (the Graph side validates
    and assigns them first, as ``build_operation_graph`` does).

    Raises:
        HipdnnError: INVALID_VALUE for a broken content rule (a missing or duplicate uid, absurd
            dims).
    """
    attrs, preferred = parts.attributes, parts.preferred_engine_id
    wire = WireGraph(
        name=attrs.name,
        compute_data_type=attrs.compute_data_type,
        intermediate_data_type=attrs.intermediate_data_type,
        io_data_type=attrs.io_data_type,
        preferred_engine_id=None if preferred is None else signed64(preferred),
        tensors=parts.tensors,
        nodes=[node.wire_form() for node in parts.nodes],
        metadata=parts.wire_metadata if parts.wire_metadata is not None else WireMetadata(),
    )
    check_wire_graph(wire)
    return wire


def graph_from_wire(wire: WireGraph) -> GraphParts:
    """The parts of the graph a decoded :class:`~hipdnn_graph.descriptors.wire_model.WireGraph`
    describes (``Graph.from_parts(**vars(parts))`` builds it); a custom op of a registered family
    that is not hipDNN's becomes that family's node
    (:func:`~hipdnn_graph.nodes.custom_family.lift_custom_op`).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for such a custom op whose payload is not its family's.
    """
    attributes = GraphAttributes(
        name=wire.name,
        compute_data_type=wire.compute_data_type,
        intermediate_data_type=wire.intermediate_data_type,
        io_data_type=wire.io_data_type,
    )
    preferred = wire.preferred_engine_id
    return GraphParts(
        attributes,
        wire.tensors,
        [lift_custom_op(spec.make_node(a, attributes)) for spec, a in wire.nodes],
        preferred_engine_id=None if preferred is None else unsigned64(preferred),
        wire_metadata=wire.metadata,
    )

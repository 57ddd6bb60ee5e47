"""What a ``Graph``'s structure answers: its nodes in order, its tensors by role, its
dependency graph and pictures of it.

:class:`GraphStructure` is a mixin of :class:`~hipdnn_graph.Graph`; it reads the graph's nodes
and tensors and writes nothing.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[2, 8])
    >>> y = g.pointwise(x, hg.PointwiseAttributes().set_mode(hg.PointwiseMode.RELU_FWD))
    >>> len(g), [t.name for t in g.graph_inputs()], [t.name for t in g.graph_tensors()]
    (1, ['x'], ['x', 'Pointwise_0::OUT_0'])
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from ..nodes.base import Node
from ..tensor import TensorAttributes
from . import rules as rules

if TYPE_CHECKING:
    import networkx as nx

    from . import Graph

__all__ = ["GraphStructure"]

AnyNode = Node[Any]


class GraphStructure:
    """The ``Graph`` methods that read its structure (mixed into ``Graph``)."""

    _nodes: list[AnyNode]
    _order: list[int] | None
    _tensors: dict[int, TensorAttributes]
    _listed: set[int]

    @property
    def nodes(self) -> list[AnyNode]:
        """The nodes, topologically sorted once validated (insertion order before)."""
        if self._order is None:
            return list(self._nodes)
        return [self._nodes[i] for i in self._order]

    def __iter__(self) -> Iterator[AnyNode]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def to_networkx(self) -> nx.DiGraph:
        """The node dependency graph: one networkx node per graph node (by name), one edge per
        producer→consumer pair with the tensors' names in the edge's ``tensors`` attribute."""
        from .ordering import to_networkx

        producer: dict[int, int] = {}
        for index, node in enumerate(self._nodes):
            for t in node.outputs():
                producer.setdefault(id(t), index)
        labelled = [
            (producer[id(t)], index, t.name)
            for index, node in enumerate(self._nodes)
            for t in node.inputs()
            if id(t) in producer
        ]
        return to_networkx([n.name for n in self._nodes], labelled, self._nodes)

    def to_dot(self) -> str:
        """The graph as Graphviz DOT text (see :func:`hipdnn_graph.visualize.to_dot`)."""
        from ..visualize import to_dot

        return to_dot(cast("Graph", self))

    def to_mermaid(self) -> str:
        """The graph as a Mermaid flowchart (see :func:`hipdnn_graph.visualize.to_mermaid`)."""
        from ..visualize import to_mermaid

        return to_mermaid(cast("Graph", self))

    def summary(self) -> str:
        """The graph as text, as ``hipdnn-graph show`` prints it: a summary line, the data
        types, a table of the tensors and the nodes in execution order with their slots (see
        :func:`hipdnn_graph.graph_text.describe`). Call ``validate()`` first to see inferred
        dims and data types, and ``build_operation_graph()`` to see uids.

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(name="g", io_data_type=hg.DataType.FLOAT)
            >>> _ = g.pointwise(g.tensor(name="x", dim=[4]), mode=hg.PointwiseMode.EXP, name="e")
            >>> print(g.summary().splitlines()[0])
            graph 'g': 2 tensors, 1 node(s): e (POINTWISE)
        """
        from ..graph_text import describe

        return describe(cast("Graph", self))

    def graph_inputs(self) -> list[TensorAttributes]:
        """Tensors read by some node and produced by none, in node then slot order."""
        from .ordering import last_producers

        order = self._order if self._order is not None else range(len(self._nodes))
        produced = last_producers([n.attributes.outputs.values() for n in self._nodes])
        inputs = rules.graph_inputs(order, [n.attributes.inputs for n in self._nodes], produced)
        offsets = rules.ragged_offsets(self._slot_tensors(), {id(t) for t in inputs})
        return inputs + [t for t in offsets if id(t) not in produced]

    def _slot_tensors(self) -> Iterator[TensorAttributes]:
        """Every tensor of every node slot (repeats included)."""
        for node in self._nodes:
            yield from node.attributes.inputs.values()
            yield from node.attributes.outputs.values()

    def graph_tensors(self) -> list[TensorAttributes]:
        """Every tensor some node reads or writes, in declaration order."""
        return self._tensors_among(set())

    def wire_tensors(self) -> list[TensorAttributes]:
        """The tensors the graph's serialized form lists, in declaration order: every tensor some
        node reads or writes, and every tensor a decoded graph listed although no node uses it
        (hipDNN's wire may list such tensors; they are written back as read).

        Example:
            >>> import hipdnn_graph as hg
            >>> spare = hg.TensorAttributes(name="spare", uid=7)
            >>> g = hg.Graph.from_parts(hg.GraphAttributes(), [spare], [])
            >>> [t.name for t in g.wire_tensors()], g.graph_tensors()
            (['spare'], [])
        """
        return self._tensors_among(self._listed.copy())

    def _tensors_among(self, used: set[int]) -> list[TensorAttributes]:
        """The tensors whose ids are in ``used`` or in some node's slots, in declaration order
        (``used`` is filled in place)."""
        for node in self._nodes:  # slot order does not matter here: read the slot dicts
            used.update(map(id, node.attributes.inputs.values()))
            used.update(map(id, node.attributes.outputs.values()))
        for offsets in rules.ragged_offsets(self._slot_tensors()):
            used.add(id(offsets))  # an offsets tensor set after its tensor joined the graph
            self._tensors.setdefault(id(offsets), offsets)
        return [t for key, t in self._tensors.items() if key in used]

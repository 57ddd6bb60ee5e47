"""Node ordering: the dependency graph and hipDNN's stable topological sort.

This is the only module that imports networkx, and only once a graph of more than one node is
ordered. A node depends on another when it reads a tensor the other produces. The order is
hipDNN's (Kahn's algorithm with a FIFO queue): nodes that become ready together keep insertion
order.

Example:
    >>> from hipdnn_graph.graph.ordering import stable_topological_order
    >>> stable_topological_order(3, [(2, 0), (2, 1)])  # node 2 produces what 0 and 1 read
    [2, 0, 1]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..errors import HipdnnError
from ..types import ErrorCode

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "CYCLE_MESSAGE",
    "DISCONNECTED_MESSAGE",
    "dependency_edges",
    "last_producers",
    "producer_edges",
    "stable_topological_order",
    "to_networkx",
]

CYCLE_MESSAGE = "Graph contains a cycle, cannot be sorted."
DISCONNECTED_MESSAGE = (
    "Graph contains multiple disconnected components, please split the graph into individual graphs"
)


def last_producers(node_outputs: Sequence[Iterable[Any]]) -> dict[int, int]:
    """The id of every tensor some node writes, and the index of the last node writing it.

    Example:
        >>> a, b = object(), object()
        >>> last_producers([[a], [b, a]]) == {id(a): 1, id(b): 1}
        True
    """
    producer: dict[int, int] = {}
    for index, outputs in enumerate(node_outputs):
        for tensor in outputs:
            producer[id(tensor)] = index
    return producer


def dependency_edges(
    node_inputs: Sequence[Iterable[Any]], node_outputs: Sequence[Iterable[Any]]
) -> list[tuple[int, int]]:
    """Edges ``(producer, consumer)`` between node indices, found through shared tensors.

    Each pair appears once, in consumer then first-use order; linear in the number of slots.
    As in hipDNN, a tensor written by several nodes counts as produced by the last of them
    (``Graph.validate()`` rejects such graphs after hipDNN's own rules).

    Example:
        >>> a, b, c = object(), object(), object()
        >>> dependency_edges([[a], [b, b], [b, c]], [[b], [c], []])
        [(0, 1), (0, 2), (1, 2)]
    """
    return producer_edges(node_inputs, last_producers(node_outputs))


def producer_edges(
    node_inputs: Sequence[Iterable[Any]], producer: Mapping[int, int]
) -> list[tuple[int, int]]:
    """:func:`dependency_edges`, given the :func:`last_producers` of the nodes' outputs."""
    edges: dict[tuple[int, int], None] = {}  # an ordered set
    for index, inputs in enumerate(node_inputs):
        for tensor in inputs:
            source = producer.get(id(tensor))
            if source is not None:
                edges[(source, index)] = None
    return list(edges)


def _digraph(count: int, edges: Iterable[tuple[int, int]]) -> nx.DiGraph:
    import networkx as nx  # imported on first use: a single node needs no graph library

    graph = nx.DiGraph()
    graph.add_nodes_from(range(count))
    graph.add_edges_from(edges)
    return graph


def stable_topological_order(count: int, edges: Sequence[tuple[int, int]]) -> list[int]:
    """Order ``count`` nodes so producers come first, exactly as hipDNN sorts them.

    hipDNN runs Kahn's algorithm with a FIFO queue: the sources enter in index order, and each
    emitted node frees its consumers in ascending index order (hipDNN builds every producer's
    adjacency list by walking the consumers in insertion order). Nodes that become ready together
    therefore keep insertion order, but a node freed later goes after every node already queued,
    so a valid declaration order is not always kept: with edges ``0→1, 1→3, 2→3`` the order is
    ``[0, 2, 1, 3]``. networkx's ``topological_sort`` is this algorithm (generation by
    generation, successors in edge-insertion order), given edges added in consumer order.

    Args:
        count: number of nodes, identified by index ``0..count-1``.
        edges: ``(producer, consumer)`` pairs; they alone connect nodes, as in hipDNN (two nodes
            that only share an input are two graphs).

    Raises:
        HipdnnError: ``INVALID_VALUE`` with hipDNN's text for a cycle, or for more than one
            connected component.
    """
    if count == 0:
        return []
    if not edges and count == 1:
        return [0]
    graph = _digraph(count, sorted(edges, key=itemgetter(1)))
    try:
        return _checked_order(graph)
    finally:
        # sorting leaves the graph referring to itself (networkx caches views of it), so only
        # the garbage collector could free it: free its per-node dicts now instead
        graph.clear()


def _checked_order(graph: nx.DiGraph) -> list[int]:
    import networkx as nx

    try:
        order: list[int] = list(nx.topological_sort(graph))
    except nx.NetworkXUnfeasible:
        raise HipdnnError(ErrorCode.INVALID_VALUE, CYCLE_MESSAGE) from None
    if not nx.is_weakly_connected(graph):
        raise HipdnnError(ErrorCode.INVALID_VALUE, DISCONNECTED_MESSAGE)
    return order


def to_networkx(
    names: Sequence[str], edges: Iterable[tuple[int, int, str]], nodes: Sequence[Any] = ()
) -> nx.DiGraph:
    """A ``networkx.DiGraph`` of nodes with an edge per producer→consumer pair.

    Nodes are keyed by name; a name that several nodes share gets ``#<index>`` appended so that
    no node is lost. Each node carries its ``index`` and ``node``; each edge the ``tensors``
    passed along it.
    """
    import networkx as nx

    graph = nx.DiGraph()
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    keys = [name if counts[name] == 1 else f"{name}#{i}" for i, name in enumerate(names)]
    for index, key in enumerate(keys):
        graph.add_node(key, index=index, node=nodes[index] if nodes else None)
    for source, target, tensor_name in edges:
        a, b = keys[source], keys[target]
        if graph.has_edge(a, b):
            graph[a][b]["tensors"].append(tensor_name)
        else:
            graph.add_edge(a, b, tensors=[tensor_name])
    return graph

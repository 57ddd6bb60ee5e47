"""The ``Graph`` methods that move graphs between processes: descriptors, bytes and JSON.

A mixin of :class:`~hipdnn_graph.Graph`. Both formats are hipDNN's own: the bytes are its
serialized ``Graph`` (FlatBuffers, exactly what hipDNN's backend writes) and the JSON is its JSON
form; see ``docs/serialization.md`` and ``docs/interop.md``. The bridges
(:mod:`hipdnn_graph.wire`, :mod:`hipdnn_graph.lowering`) take and hand back a graph's
:class:`~hipdnn_graph.wire.GraphParts`; this Graph side is the only one that turns a graph into
parts (:meth:`GraphSerialization.to_parts`) and parts into a graph (``Graph.from_parts``).
"""

from __future__ import annotations

from hashlib import blake2b
from typing import TYPE_CHECKING, Any, cast

from .errors import HipdnnError
from .types import ErrorCode

if TYPE_CHECKING:  # the wire and the graph load on first use (the CLI's --help stays light)
    from .descriptors.wire_model import WireGraph, WireMetadata
    from .graph import Graph
    from .wire import GraphParts

__all__ = ["FORMATS", "GraphSerialization"]

#: The serialization formats the graph methods accept (``format=``).
FORMATS = ("hipdnn",)


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise HipdnnError(
            ErrorCode.UNSUPPORTED_GRAPH_FORMAT,
            f"Unknown graph format {fmt!r}; supported: {', '.join(FORMATS)}",
        )


class GraphSerialization:
    """Lossless round trips: descriptors, hipDNN's bytes, hipDNN's JSON, and a stable key."""

    def _graph(self) -> Graph:
        return cast("Graph", self)

    def to_parts(self) -> GraphParts:
        """What the graph is made of, as the wire and the descriptors take it: its attributes,
        its serialized tensors (:meth:`~hipdnn_graph.Graph.wire_tensors`), its nodes in
        topological order, its preferred engine and wire metadata. ``Graph.from_parts`` takes
        them back (``Graph.from_parts(**vars(parts))``).

        Example:
            >>> import hipdnn_graph as hg
            >>> g = hg.Graph(name="g")
            >>> q = g.tensor(name="Q", dim=[1, 1, 4, 8])
            >>> o, _ = g.sdpa(q, q, q, name="f", generate_stats=False)
            >>> parts = g.to_parts()
            >>> [t.name for t in parts.tensors], [n.name for n in parts.nodes]
            (['Q', 'f::O'], ['f'])
            >>> hg.Graph.from_parts(**vars(parts)).nodes[0] is parts.nodes[0]
            True
        """
        from .wire import GraphParts

        graph = self._graph()
        return GraphParts(
            graph.attributes,
            graph.wire_tensors(),
            graph.nodes,
            preferred_engine_id=graph.get_preferred_engine_id_ext(),
            wire_metadata=_stamped(graph),
        )

    @classmethod
    def _from(cls, parts: GraphParts) -> Graph:
        from .graph import Graph

        return Graph.from_parts(
            parts.attributes,
            parts.tensors,
            parts.nodes,
            preferred_engine_id=parts.preferred_engine_id,
            wire_metadata=parts.wire_metadata,
        )

    def _wire(self) -> WireGraph:
        """The graph's wire form; a graph whose tensors lack uids is validated first (when it
        is not already) and given uids, as ``build_operation_graph`` does."""
        parts = self.to_parts()
        if any(t.uid is None for t in parts.tensors):
            graph = self._graph()
            if not graph.is_validated:
                graph.validate()
            from .graph.lifecycle import assign_uids

            assign_uids(graph)
            parts = self.to_parts()
        from .wire import graph_to_wire

        return graph_to_wire(parts)

    @classmethod
    def from_operation_graph_descriptor(cls, descriptor: Any) -> Graph:
        """Lift a finalized OPERATIONGRAPH descriptor back into an equal graph."""
        from .lowering import lift_graph

        return cls._from(lift_graph(descriptor))

    def serialize(self, format: str = "hipdnn") -> bytes:
        """The graph as hipDNN's serialized ``Graph``: the bytes hipDNN's own backend writes.

        A graph whose tensors lack uids is validated (when needed) and given uids first; tensors
        keep the graph's order. Every blob passes the flatbuffers Verifier hipDNN runs.

        Raises:
            HipdnnError: the validation error, or ``UNSUPPORTED_GRAPH_FORMAT`` for content hipDNN's
                schema cannot hold (a BOOLEAN tensor, an attribute that overflows float32, ...).
        """
        _check_format(format)
        from .descriptors.fb_write import write_graph

        return write_graph(self._wire())

    @classmethod
    def deserialize(
        cls,
        data: bytes | bytearray | memoryview,
        format: str = "hipdnn",
        *,
        restore_plan: bool = False,
    ) -> Graph:
        """Load hipDNN's serialized ``Graph`` (also from its ``HDGP`` graph-and-plan container).

        A container's plan blob is kept as ``graph.embedded_plan`` (never dropped); with
        ``restore_plan=True`` it also becomes the graph's active plan, ready to execute without
        planning (see :mod:`hipdnn_graph.graph.compiled_plans`).

        Raises:
            HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` for bytes that do not verify or hold
                content this library cannot carry (named in the message), ``INVALID_VALUE`` for
                content that decodes but breaks a rule (duplicate or dangling uids); with
                ``restore_plan``, the errors of ``Graph.from_compiled_plan_binary``.
        """
        _check_format(format)
        from .descriptors.fb_read import read_graph
        from .graph.compiled_plans import embedded_plan
        from .wire import graph_from_wire

        graph = cls._from(graph_from_wire(read_graph(data)))
        graph.embedded_plan = embedded_plan(data)
        if restore_plan and graph.embedded_plan is not None:
            graph.restore_embedded_plan()
        return graph

    def to_json(self, format: str = "hipdnn") -> str:
        """The graph as hipDNN's JSON (sorted keys, compact; the same content as the bytes)."""
        _check_format(format)
        from .descriptors.hipdnn_json import graph_to_json

        return graph_to_json(self._wire())

    @classmethod
    def from_json(cls, text: str | bytes, format: str = "hipdnn") -> Graph:
        """Load hipDNN's JSON form of a graph (same errors as :meth:`deserialize`)."""
        _check_format(format)
        from .descriptors.hipdnn_json import graph_from_json
        from .wire import graph_from_wire

        return cls._from(graph_from_wire(graph_from_json(text)))

    def key(self) -> int:
        """A stable 64-bit hash of the graph's serialized bytes: equal graphs, equal keys."""
        digest = blake2b(self.serialize(), digest_size=8).digest()
        return int.from_bytes(digest, "little")


def _stamped(graph: Graph) -> WireMetadata:
    """The graph's wire metadata with ``min_required_engine_api_version`` stamped, as hipDNN
    stamps it when it builds the graph, whenever the graph requires more than the baseline
    1.0.0 (hipDNN's readers take an absent field as 1.0.0, so the baseline is left implicit and
    graphs that need nothing newer keep their bytes). A decoded graph writes back what it read."""
    from dataclasses import replace

    from .backend.api_version import BASELINE_API_VERSION, graph_required_api_version

    metadata = graph.wire_metadata
    if graph.is_decoded:
        return metadata
    required = graph_required_api_version(graph)
    if required <= BASELINE_API_VERSION:
        return metadata
    return replace(
        metadata, min_required_engine_api_version=(required.major, required.minor, required.patch)
    )

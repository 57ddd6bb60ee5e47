"""The ``Graph`` methods that move graphs between processes: descriptors, bytes and JSON.

A mixin of :class:`~hipdnn_graph.Graph`. Both wire formats carry the same
:class:`~hipdnn_graph.descriptors.GraphRecord`; see ``docs/serialization.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["GraphSerialization"]


class GraphSerialization:
    """Lossless round trips: descriptors, FlatBuffers bytes, JSON, and a stable key."""

    def _graph(self) -> Graph:
        return cast("Graph", self)

    @classmethod
    def from_operation_graph_descriptor(cls, descriptor: Any) -> Graph:
        """Lift a finalized OPERATIONGRAPH descriptor back into an equal graph."""
        from .descriptors.lowering import lift_graph

        return lift_graph(descriptor)

    # ----- serialization (see descriptors/) -----
    def to_record(self) -> Any:
        """The graph as a :class:`~hipdnn_graph.descriptors.GraphRecord` (validates and assigns
        uids first when needed)."""
        from .descriptors.graph_records import graph_to_record

        return graph_to_record(self._graph())

    @classmethod
    def from_record(cls, record: Any) -> Graph:
        """Rebuild a graph from a :class:`~hipdnn_graph.descriptors.GraphRecord`."""
        from .descriptors.graph_records import graph_from_record

        return graph_from_record(record)

    def serialize(self) -> bytes:
        """The graph in the versioned FlatBuffers format (lossless; see docs/serialization.md)."""
        from .descriptors.graph_records import graph_to_bytes

        return graph_to_bytes(self._graph())

    @classmethod
    def deserialize(cls, data: bytes | bytearray | memoryview) -> Graph:
        """Load a graph written by :meth:`serialize`.

        Raises:
            HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` for undecodable bytes or an unknown format
                version, ``INVALID_VALUE`` for content that decodes but is wrong.
        """
        from .descriptors.graph_records import graph_from_bytes

        return graph_from_bytes(data)

    def to_json(self) -> str:
        """The graph as canonical JSON (enum values by their hipDNN names)."""
        from .descriptors.codec import record_to_json

        return record_to_json(self.to_record())

    @classmethod
    def from_json(cls, text: str | bytes) -> Graph:
        """Load a graph written by :meth:`to_json` (same errors as :meth:`deserialize`)."""
        from .descriptors.codec import record_from_json

        return cls.from_record(record_from_json(text))

    def key(self) -> int:
        """A stable 64-bit hash of the graph's canonical content: equal graphs, equal keys."""
        from .descriptors.codec import record_key

        return record_key(self.to_record())

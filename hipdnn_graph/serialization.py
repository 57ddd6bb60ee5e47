"""The ``Graph`` methods that move graphs between processes: descriptors, bytes and JSON.

A mixin of :class:`~hipdnn_graph.Graph`. Both formats are hipDNN's own: the bytes are its
serialized ``Graph`` (FlatBuffers, exactly what hipDNN's backend writes) and the JSON is its JSON
form; see ``docs/serialization.md`` and ``docs/interop.md``.
"""

from __future__ import annotations

from hashlib import blake2b
from typing import TYPE_CHECKING, Any, cast

from .errors import HipdnnError
from .types import ErrorCode

if TYPE_CHECKING:
    from .graph import Graph

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

    @classmethod
    def from_operation_graph_descriptor(cls, descriptor: Any) -> Graph:
        """Lift a finalized OPERATIONGRAPH descriptor back into an equal graph."""
        from .lowering import lift_graph

        return lift_graph(descriptor)

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
        from .wire import graph_to_wire

        return write_graph(graph_to_wire(self._graph()))

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

        graph = graph_from_wire(read_graph(data))
        graph.embedded_plan = embedded_plan(data)
        if restore_plan and graph.embedded_plan is not None:
            graph.restore_embedded_plan()
        return graph

    def to_json(self, format: str = "hipdnn") -> str:
        """The graph as hipDNN's JSON (sorted keys, compact; the same content as the bytes)."""
        _check_format(format)
        from .descriptors.hipdnn_json import graph_to_json
        from .wire import graph_to_wire

        return graph_to_json(graph_to_wire(self._graph()))

    @classmethod
    def from_json(cls, text: str | bytes, format: str = "hipdnn") -> Graph:
        """Load hipDNN's JSON form of a graph (same errors as :meth:`deserialize`)."""
        _check_format(format)
        from .descriptors.hipdnn_json import graph_from_json
        from .wire import graph_from_wire

        return graph_from_wire(graph_from_json(text))

    def key(self) -> int:
        """A stable 64-bit hash of the graph's serialized bytes: equal graphs, equal keys."""
        digest = blake2b(self.serialize(), digest_size=8).digest()
        return int.from_bytes(digest, "little")

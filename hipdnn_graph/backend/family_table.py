"""An engine's table of family records: hipDNN's families by node type, the families that are
not hipDNN's by id.

An engine declares one record per family (the NumPy reference's ``ReferenceFamily``, the torch
engines' ``TorchFamily``), each with a ``node_type`` and a ``family_id`` (``""`` for hipDNN's
families). A :class:`FamilyTable` holds them and says, in one place, which record runs a node:
a node of a family that is not hipDNN's (a
:class:`~hipdnn_graph.nodes.custom_family.CustomFamilyNode`, whose node type is ``CUSTOM_OP``)
by its ``family_id``, any other node by its node type. The engine's own families fill the table
when it is made; a plugin family's engine module adds its record with :meth:`FamilyTable.register`.

Example:
    >>> from dataclasses import dataclass
    >>> import hipdnn_graph as hg
    >>> @dataclass(frozen=True)
    ... class Record:
    ...     node_type: hg.NodeType
    ...     family_id: str = ""
    >>> table = FamilyTable("doc", [Record(hg.NodeType.MATMUL)])
    >>> g = hg.Graph()
    >>> _ = g.matmul(g.tensor(dim=[2, 3]), g.tensor(dim=[3, 4]), name="mm")
    >>> table.find(g.nodes[0])
    Record(node_type=<NodeType.MATMUL: 9>, family_id='')
    >>> table.register(Record(hg.NodeType.CUSTOM_OP, "nowhere.op"))
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: doc record for custom family 'nowhere.op': no family of that id is registered (import its node module first)
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, Protocol, TypeVar

from ..errors import HipdnnError
from ..nodes.custom_family import custom_families
from ..types import ErrorCode, NodeType

__all__ = ["FamilyRecord", "FamilyTable"]


class FamilyRecord(Protocol):
    """What a table needs of an engine's record: the node type it runs and, for a family that
    is not hipDNN's, its id."""

    @property
    def node_type(self) -> NodeType: ...

    @property
    def family_id(self) -> str: ...


R = TypeVar("R", bound=FamilyRecord)


class FamilyTable(Generic[R]):
    """One engine's records (see the module doc).

    Attributes:
        engine: How the engine's messages name it (``"reference"``, ``"torch"``).
        by_type: hipDNN's families: node type -> record.
        by_id: The families that are not hipDNN's: family id -> record.
    """

    def __init__(self, engine: str, records: Iterable[R]) -> None:
        """A table of ``records``, each of hipDNN's families (``family_id`` empty).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a record with a ``family_id`` (register those)
                or two records of one node type.
        """
        self.engine = engine
        self.by_type: dict[NodeType, R] = {}
        self.by_id: dict[str, R] = {}
        for record in records:
            if record.family_id or record.node_type in self.by_type:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"{engine} record for {record.node_type.name}: one record per node type of "
                    "hipDNN's families (families that are not hipDNN's are registered)",
                )
            self.by_type[record.node_type] = record

    def register(self, *records: R) -> tuple[R, ...]:
        """Add the records of families that are not hipDNN's (what a plugin family's engine
        module calls on import); returns ``records``. Registering an equal record again does
        nothing.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a record without a ``family_id``, of a node type
                other than ``CUSTOM_OP``, of an id no registered family holds, or of an id
                another record holds.
        """
        known = custom_families()
        for record in records:
            where = f"{self.engine} record for custom family {record.family_id!r}"
            if not record.family_id or record.node_type != NodeType.CUSTOM_OP:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"{where}: a family that is not hipDNN's has a family_id and node type "
                    f"CUSTOM_OP (got {record.node_type.name})",
                )
            if record.family_id not in known:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"{where}: no family of that id is registered (import its node module first)",
                )
            held = self.by_id.setdefault(record.family_id, record)
            if held != record:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE, f"{where}: another record is registered for it"
                )
        return records

    def find(self, node: Any) -> R | None:
        """The record that runs ``node``, or ``None``."""
        family_id = getattr(type(node), "family_id", "")
        if family_id:
            return self.by_id.get(family_id)
        return self.by_type.get(node.get_node_type())

    def missing(self, node: Any) -> str:
        """Why no record runs ``node``: ``<engine> rule for <TYPE> not found``, or, for a
        family that is not hipDNN's, ``<engine> rule for custom family '<id>' not found``."""
        family_id = getattr(type(node), "family_id", "")
        what = f"custom family {family_id!r}" if family_id else node.get_node_type().name
        return f"{self.engine} rule for {what} not found"

    def get(self, node: Any) -> R:
        """The record that runs ``node``.

        Raises:
            HipdnnError: ``GRAPH_NOT_SUPPORTED`` with :meth:`missing`'s reason.
        """
        record = self.find(node)
        if record is None:
            raise HipdnnError(ErrorCode.GRAPH_NOT_SUPPORTED, self.missing(node))
        return record

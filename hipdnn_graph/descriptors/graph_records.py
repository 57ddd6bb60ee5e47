"""Graph ↔ :class:`GraphRecord`: the bridge between the frontend and both wire formats.

Record field names are the node slots' names in lower case (``dO`` → ``do``, ``SEQ_LEN_Q`` →
``seq_len_q``), so one table-free rule maps slots to fields.

``Graph.serialize`` and ``Graph.deserialize`` skip the tensor records: :func:`graph_to_bytes` hands
the graph's own tensors to the writer and :func:`graph_from_bytes` has the reader build
:class:`~hipdnn_graph.TensorAttributes` directly. Both apply the record rules
(:func:`~.record_checks.check_graph_parts`), so their bytes are those of
``record_to_bytes(graph_to_record(g))`` and whatever is written reads back. Frontend objects are
built from checked values without pydantic validation (their ``__dict__`` and pydantic's three
slots are set directly).

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(name="fwd", io_data_type=hg.DataType.HALF,
    ...              intermediate_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 8, 16])
    >>> o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="attn")
    >>> rec = graph_to_record(g)
    >>> [t.name for t in rec.tensors], rec.nodes[0].attributes.o
    (['Q', 'K', 'V', 'attn::O', 'attn::Stats'], 4)
    >>> graph_from_record(rec).key() == g.key()
    True
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..attributes.base import SdpaCommonAttributes
from ..attributes.graph_attributes import GraphAttributes
from ..attributes.sdpa import SdpaAttributes
from ..attributes.sdpa_backward import SdpaBackwardAttributes
from ..errors import HipdnnError
from ..nodes.sdpa_bwd import SdpaBwdNode
from ..nodes.sdpa_fwd import SdpaFwdNode
from ..tensor import TensorAttributes
from ..types import ErrorCode
from .codec import fields_from_bytes, fields_to_bytes
from .flatbuf import TensorTarget
from .record_checks import check_graph_parts, new_trusted
from .records import (
    FORMAT_VERSION,
    RECORD_FIELDS,
    GraphRecord,
    NodeRecord,
    SdpaBwdRecord,
    SdpaFwdRecord,
    TensorRecord,
)

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = [
    "graph_from_bytes",
    "graph_from_record",
    "graph_to_bytes",
    "graph_to_record",
    "signed64",
    "unsigned64",
]

assert tuple(TensorRecord.model_fields) == (
    "uid", "name", "data_type", "dims", "strides", "is_virtual", "is_pass_by_value", "value",
    "alignment",
), "keep _tensor_record in field order"  # fmt: skip
# (slot member, record field, is output) per attributes class
_SLOT_FIELDS: dict[type[SdpaCommonAttributes], tuple[tuple[Any, str, bool], ...]] = {
    cls: tuple((s, s.name.lower(), False) for s in cls.InputNames)
    + tuple((s, s.name.lower(), True) for s in cls.OutputNames)
    for cls in (SdpaAttributes, SdpaBackwardAttributes)
}


_uid = attrgetter("uid")


def signed64(value: int) -> int:
    """A 64-bit engine id as the INT64 that descriptors and records store (two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned64(value: int) -> int:
    """The 64-bit engine id an INT64 from :func:`signed64` stands for."""
    return value & ((1 << 64) - 1)


def _record(cls: type[Any], values: dict[str, Any]) -> Any:
    """A record of ``cls`` holding ``values`` (every field, in field order), not validated."""
    return new_trusted(cls, values, RECORD_FIELDS[cls])


def _tensor_record(t: TensorAttributes) -> TensorRecord:
    d = t.__dict__
    return _record(  # type: ignore[no-any-return]
        TensorRecord,
        {
            "uid": d["uid"],
            "name": d["name"],
            "data_type": d["data_type"],
            "dims": list(d["dim"]),
            "strides": list(d["stride"]),
            "is_virtual": d["is_virtual"],
            "is_pass_by_value": d["is_pass_by_value"],
            "value": d["value"],
            "alignment": d["alignment"],
        },
    )


class _RecordKind:
    """How to write one kind of node's attributes as a record."""

    __slots__ = ("inputs", "outputs", "record", "scalars", "template")

    def __init__(self, attributes: type[SdpaCommonAttributes], record: type[Any]) -> None:
        self.record = record
        # slot member → record field (one map each: IntEnum slots of both kinds compare equal)
        slots = _SLOT_FIELDS[attributes]
        self.inputs = {slot: field for slot, field, out in slots if not out}
        self.outputs = {slot: field for slot, field, out in slots if out}
        #: plain members stored under the same name
        self.scalars = tuple(f for f in attributes.model_fields if f in record.model_fields)
        #: every record field in field order, with its default (None for required uids)
        self.template = {
            name: None if info.is_required() else info.default
            for name, info in record.model_fields.items()
        }


_RECORD_KINDS: dict[type[Any], _RecordKind] = {
    SdpaBackwardAttributes: _RecordKind(SdpaBackwardAttributes, SdpaBwdRecord),
    SdpaAttributes: _RecordKind(SdpaAttributes, SdpaFwdRecord),
}


def _node_record(attributes: SdpaCommonAttributes) -> NodeRecord:
    kind = _RECORD_KINDS.get(type(attributes))
    if kind is None:  # a subclass
        base = (
            SdpaBackwardAttributes
            if isinstance(attributes, SdpaBackwardAttributes)
            else SdpaAttributes
        )
        kind = _RECORD_KINDS[base]
    ad = attributes.__dict__
    values = kind.template.copy()
    fields = kind.inputs
    for slot, tensor in ad["inputs"].items():
        values[fields[slot]] = tensor.uid
    fields = kind.outputs
    for slot, tensor in ad["outputs"].items():
        values[fields[slot]] = tensor.uid
    for name in kind.scalars:
        values[name] = ad[name]
    return _record(  # type: ignore[no-any-return]
        NodeRecord,
        {
            "name": ad["name"],
            "compute_data_type": ad["compute_data_type"],
            "attributes": _record(kind.record, values),
        },
    )


def _graph_fields(graph: Graph) -> dict[str, Any]:
    """The fields of the graph's record, with its tensors (sorted by uid) not converted.

    Validates the graph and assigns uids first when needed, then checks the record rules, so that
    whatever is written can be read back.
    """
    if not graph.is_validated:
        graph.validate()
    tensors = graph.graph_tensors()
    if any(t.uid is None for t in tensors):
        from ..lifecycle import assign_uids

        assign_uids(graph)
    tensors.sort(key=_uid)
    nodes = [_node_record(node.attributes) for node in graph.nodes]
    attrs = graph.attributes
    check_graph_parts(attrs.name, tensors, nodes, "dim", "stride")
    preferred = graph.get_preferred_engine_id_ext()
    return {
        "format_version": FORMAT_VERSION,
        "name": attrs.name,
        "compute_data_type": attrs.compute_data_type,
        "intermediate_data_type": attrs.intermediate_data_type,
        "io_data_type": attrs.io_data_type,
        "preferred_engine_id": None if preferred is None else signed64(preferred),
        "tensors": tensors,
        "nodes": nodes,
    }


def graph_to_record(graph: Graph) -> GraphRecord:
    """The record of a graph, validating it and assigning uids first when needed.

    Tensors are listed by uid (so the record does not depend on the order in which equal graphs
    were declared or lifted), nodes in topological order.

    Raises:
        HipdnnError: the graph's validation error, or INVALID_VALUE for a graph that breaks a
            record rule (see :mod:`.records`; e.g. a rank above ``MAX_RANK``).
    """
    fields = _graph_fields(graph)
    fields["tensors"] = [_tensor_record(t) for t in fields["tensors"]]
    return _record(GraphRecord, fields)  # type: ignore[no-any-return]


def graph_to_bytes(graph: Graph) -> bytes:
    """``record_to_bytes(graph_to_record(graph))``, writing the graph's tensors directly
    (:meth:`Graph.serialize`).

    Raises:
        HipdnnError: as :func:`graph_to_record`.
    """
    return fields_to_bytes(_graph_fields(graph), "dim", "stride")


# Trusted construction of frontend objects from a checked record (no pydantic validation): an
# object's state is its __dict__ (fields in declaration order), its fields-set, and two slots.
assert tuple(TensorAttributes.model_fields) == (
    "uid", "name", "data_type", "dim", "stride", "is_virtual", "is_pass_by_value", "value",
    "alignment",
) and not TensorAttributes.__private_attributes__, "keep _tensor in field order"  # fmt: skip
_TENSOR_ATTRIBUTE_FIELDS = frozenset(TensorAttributes.model_fields)


def _tensor(d: dict[str, Any]) -> TensorAttributes:
    """The tensor a checked :class:`TensorRecord` (its ``__dict__``) describes."""
    return new_trusted(
        TensorAttributes,
        {
            "uid": d["uid"],
            "name": d["name"],
            "data_type": d["data_type"],
            "dim": list(d["dims"]),
            "stride": list(d["strides"]),
            "is_virtual": d["is_virtual"],
            "is_pass_by_value": d["is_pass_by_value"],
            "value": d["value"],
            "alignment": d["alignment"],
        },
        set(_TENSOR_ATTRIBUTE_FIELDS),
    )


class _NodeKind:
    """How to rebuild one kind of node from its record, without validation."""

    __slots__ = ("attributes", "node", "private", "scalars", "slots")

    def __init__(self, attributes: type[SdpaCommonAttributes], node: type[Any]) -> None:
        self.attributes, self.node = attributes, node
        fields = tuple(attributes.model_fields)
        assert fields[:4] == ("name", "compute_data_type", "inputs", "outputs")
        #: the plain members, in field order: copied from the record's fields of the same name
        self.scalars = fields[4:]
        self.slots = _SLOT_FIELDS[attributes]
        self.private = {
            name: attr.get_default() for name, attr in attributes.__private_attributes__.items()
        }


_KINDS: dict[type[Any], _NodeKind] = {
    SdpaBwdRecord: _NodeKind(SdpaBackwardAttributes, SdpaBwdNode),
    SdpaFwdRecord: _NodeKind(SdpaAttributes, SdpaFwdNode),
}


def _node(node_record: NodeRecord, tensors: dict[int, TensorAttributes], graph: Graph) -> Any:
    nd = node_record.__dict__
    body = nd["attributes"]
    bd = body.__dict__
    kind = _KINDS[type(body)]
    inputs: dict[Any, TensorAttributes] = {}
    outputs: dict[Any, TensorAttributes] = {}
    for slot, field, is_output in kind.slots:
        uid = bd[field]
        if uid is None:
            continue
        found = tensors.get(uid)
        if found is None:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Node {nd['name']} refers to tensor uid {uid}, which the graph does not hold",
            )
        (outputs if is_output else inputs)[slot] = found
    values = {
        "name": nd["name"],
        "compute_data_type": nd["compute_data_type"],
        "inputs": inputs,
        "outputs": outputs,
    }
    for name in kind.scalars:
        values[name] = bd[name]
    attributes = new_trusted(kind.attributes, values, set(), dict(kind.private))
    return kind.node(attributes, graph.attributes)


def graph_from_record(record: GraphRecord) -> Graph:
    """Rebuild the graph a (checked) record describes; tensors are shared by uid.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when a node names a tensor the record does not hold.
    """
    d = record.__dict__
    return _graph(d, [_tensor(t.__dict__) for t in d["tensors"]])


#: The bytes reader builds frontend tensors directly (no intermediate tensor records).
_TENSOR_TARGET = TensorTarget(
    TensorAttributes, tuple(TensorAttributes.model_fields), _TENSOR_ATTRIBUTE_FIELDS, True
)


def graph_from_bytes(data: bytes | bytearray | memoryview) -> Graph:
    """The graph serialized in ``data`` (:meth:`Graph.deserialize`).

    Decoded and checked as :func:`~.codec.record_from_bytes` does, but tensors come out of the
    reader as :class:`TensorAttributes`, without a record in between.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT or INVALID_VALUE (see :mod:`.codec`).
    """
    fields = fields_from_bytes(data, _TENSOR_TARGET)
    return _graph(fields, fields["tensors"])


_GRAPH_ATTRIBUTE_FIELDS = tuple(GraphAttributes.model_fields)
assert set(_GRAPH_ATTRIBUTE_FIELDS) <= set(GraphRecord.model_fields)
assert not GraphAttributes.__private_attributes__


def _graph(d: dict[str, Any], tensor_list: list[TensorAttributes]) -> Graph:
    """The graph of a checked record's fields ``d``, with its tensors already built."""
    from ..graph import Graph

    attributes = new_trusted(
        GraphAttributes,
        {name: d[name] for name in _GRAPH_ATTRIBUTE_FIELDS},
        set(_GRAPH_ATTRIBUTE_FIELDS),
    )
    graph = Graph(attributes=attributes)
    if d["preferred_engine_id"] is not None:
        graph.set_preferred_engine_id_ext(unsigned64(d["preferred_engine_id"]))
    tensors = dict(zip(map(_uid, tensor_list), tensor_list, strict=True))
    # A new graph: adopt the tensors (record order) and the nodes (topological order) directly,
    # without re-tracking every slot as add_node() does.
    graph._tensors = dict(zip(map(id, tensor_list), tensor_list, strict=True))
    graph._nodes = [_node(node_record, tensors, graph) for node_record in d["nodes"]]
    return graph

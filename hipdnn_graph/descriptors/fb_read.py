"""Reading hipDNN's serialized ``Graph``: verify like hipDNN, then decode, never crash.

The reader first applies every rule of the flatbuffers ``Verifier`` that hipDNN runs before it
reads a graph (HIPDNN_WIRE.md A10: buffer size, in-bounds and aligned tables, vtables, scalars,
structs, offsets, strings and vectors; 8-byte fields 8-aligned; a TensorValue tag without its
struct refused), then the refusals of A6/A12 (node kinds other than the registered ones, DataType
numbers outside hipDNN's schema, fields this version does not know, unmodelled content that is
not at its default), then the content rules of :func:`~.wire_model.check_wire_graph`. A blob whose
bytes 4–7 are ``HDGP`` is hipDNN's graph-and-plan container: its ``graph_blob`` is copied into a
buffer of its own and read.

Any input gives a :class:`~.wire_model.WireGraph` or raises
:class:`~hipdnn_graph.errors.HipdnnError`: UNSUPPORTED_GRAPH_FORMAT for bytes that are not a
graph we can carry, INVALID_VALUE for a broken content rule. Work and memory are proportional to
the input: every table is read once, tensor or node entries that share one table are refused
before anything is built from them, nodes that share one attributes table are refused (hipDNN's
writer never shares a table, and such nodes would write the same outputs), and the strings and
vectors decoded, counted once per reference, add up to at most the input's size. hipDNN's writer
(``Graph::Pack``) never shares a string or a vector, so its blobs always fit; another writer may
share some (a flatbuffers builder dedupes strings when asked), as long as decoding them once per
reference stays within that bound.

Example:
    >>> from hipdnn_graph.descriptors.fb_write import write_graph
    >>> from hipdnn_graph.descriptors.wire_model import WireGraph
    >>> read_graph(write_graph(WireGraph(name="g"))).name
    'g'
    >>> read_graph(b"not a graph")
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: Invalid hipDNN graph: the buffer is 11 bytes, fewer than 12
"""

from __future__ import annotations

import struct
from typing import Any

from ..tensor import TensorAttributes
from ..types import DataType
from .fb_verify import (
    MAX_BUFFER,
    SCALARS,
    Table,
    bad,
    field_longs,
    field_numbers,
    field_scalar,
    field_string,
    field_struct,
    field_tables,
    field_target,
    new_counter,
    repeated,
    u32,
    vector_at,
)
from .node_spec import (
    VECTOR_KINDS,
    WIRE_KINDS,
    Kind,
    NodeSpec,
    WireEnum,
    node_specs,
    supported_kinds,
)
from .wire_model import WireGraph, WireMetadata
from .wire_rules import (
    MAX_INPUT_BYTES,
    MAX_NODES,
    MAX_TENSORS,
    check_node_names,
    check_wire_graph,
    unsupported,
    wide_text_encoding,
    wide_text_error,
)
from .wire_trusted import decoded_attributes, decoded_tensor, link_ragged, refuse_unmodelled
from .wire_values import VALUE_CODES, ValueMember, data_type_from_wire, decode_value

__all__ = ["CONTAINER_IDENTIFIER", "NODE_KINDS", "RETIRED_IDENTIFIER", "read_graph"]

#: hipDNN's ``NodeAttributes`` union members, by tag (``graph.fbs``).
NODE_KINDS = (
    "NONE", "BatchnormInferenceAttributes", "PointwiseAttributes", "BatchnormBackwardAttributes",
    "BatchnormAttributes", "ConvolutionFwdAttributes", "ConvolutionBwdAttributes",
    "ConvolutionWrwAttributes", "BatchnormInferenceAttributesVarianceExt", "MatmulAttributes",
    "RMSNormAttributes", "LayernormAttributes", "SdpaAttributes",
    "BlockScaleDequantizeAttributes", "BlockScaleQuantizeAttributes", "SdpaBackwardAttributes",
    "CustomOpAttributes", "RMSNormBackwardAttributes", "ReductionAttributes",
    "ResampleFwdAttributes", "LayernormBackwardAttributes", "ResampleBwdAttributes",
    "MoeGroupedMatmulAttributes", "MoeGroupedMatmulBwdAttributes",
)  # fmt: skip
#: Bytes 4–7 of hipDNN's graph-and-plan container (``serialized_graph_and_plan.fbs``).
CONTAINER_IDENTIFIER = b"HDGP"
#: Bytes 4–7 of hipdnn-graph's own earlier format, retired for hipDNN's (refused by name).
RETIRED_IDENTIFIER = b"HDGR"


def _data_type(value: int | None, what: str) -> DataType:
    return DataType.NOT_SET if value is None else data_type_from_wire(value, what)


# ----- tensors ----------------------------------------------------------------------------------

_VALUE_SIZES = {member: struct.calcsize(code) for member, code in VALUE_CODES.items()}


def _tensor(
    buf: bytes, n: int, pos: int, index: int, counter: list[int], offset_uids: list[int | None]
) -> TensorAttributes:
    what = f"tensor {index}"
    t = Table(buf, n, pos, what, counter)
    t.refuse_unknown(12, "TensorAttributes", what)
    uid = field_scalar(buf, n, t, 0, "q", what) or 0
    name = field_string(buf, n, t, 1, f"{what} name")
    where = f"Tensor {name or uid}"
    data_type = _data_type(field_scalar(buf, n, t, 2, "b", what), where)
    strides = field_longs(buf, n, t, 3, f"{where} strides")
    dims = field_longs(buf, n, t, 4, f"{where} dims")
    virtual = bool(field_scalar(buf, n, t, 5, "?", what))
    member_number = field_scalar(buf, n, t, 6, "B", what) or 0
    value_pos = field_target(buf, n, t, 7, f"{where} value")
    value = None
    if member_number:
        if member_number > len(ValueMember) - 1:
            raise unsupported(
                f"{where}: TensorValue member {member_number} is not in hipDNN's schema"
            )
        member = ValueMember(member_number)
        size = _VALUE_SIZES[member]
        if value_pos is None or value_pos % size or value_pos + size > n:
            raise bad(f"{where} has a {member.name} without an aligned struct inside the buffer")
        raw = SCALARS[VALUE_CODES[member]](buf, value_pos)[0]
        value = decode_value(member, raw, data_type, where)
    pass_by_value = bool(field_scalar(buf, n, t, 8, "?", what))
    offset_uids.append(field_scalar(buf, n, t, 9, "q", what))
    alignment = field_scalar(buf, n, t, 10, "q", what)
    multiplier = field_scalar(buf, n, t, 11, "q", what)
    return decoded_tensor(
        uid=uid,
        name=name,
        data_type=data_type,
        dim=dims,
        stride=strides,
        is_virtual=virtual,
        is_pass_by_value=pass_by_value,
        value=value,
        alignment=16 if alignment is None else alignment,
        ragged_offset_multiplier=1 if multiplier is None else multiplier,
    )


# ----- nodes -------------------------------------------------------------------------------------


def _read_scalar(
    buf: bytes, n: int, t: Table, kind: Kind, slot: int, what: str, enum: WireEnum | None = None
) -> Any:
    if kind is Kind.STRING:
        return field_string(buf, n, t, slot, what)
    if kind in VECTOR_KINDS:
        return field_numbers(buf, n, t, slot, what, kind)
    code, _, optional, default = WIRE_KINDS[kind]
    value = field_scalar(buf, n, t, slot, code, what)
    if value is None:
        if optional:
            return None
        return enum.cls(default) if enum is not None else default
    if kind is Kind.ENUM:
        assert enum is not None
        member = enum.member(value)
        if member is None:
            raise unsupported(f"{what}: {enum.name} {value} is not in hipDNN's schema")
        return member
    if kind is Kind.DTYPE:
        return data_type_from_wire(value, what)
    if kind in (Kind.BOOL, Kind.BOOL_OPT):
        return bool(value)
    return value


def _node(
    buf: bytes,
    n: int,
    pos: int,
    index: int,
    tensors: dict[int, TensorAttributes],
    counter: list[int],
    bodies: set[int],
) -> tuple[NodeSpec, Any]:
    what = f"node {index}"
    t = Table(buf, n, pos, what, counter)
    t.refuse_unknown(4, "Node", what)
    name = field_string(buf, n, t, 0, f"{what} name")
    label = f'hipDNN node "{name}"'
    compute = _data_type(field_scalar(buf, n, t, 1, "b", what), label)
    tag = field_scalar(buf, n, t, 2, "B", what) or 0
    body_pos = field_target(buf, n, t, 3, f"{label} attributes")
    specs = node_specs()
    spec = specs.get(tag)
    if spec is None or body_pos is None:
        kind = NODE_KINDS[tag] if tag < len(NODE_KINDS) else "an unknown kind"
        missing = " without its table" if spec is not None else ""
        raise unsupported(
            f"{label} has kind {kind} ({tag}){missing}; only {supported_kinds()} are supported"
        )
    if body_pos in bodies:
        repeated("node attributes")  # "one node attribute table"
    bodies.add(body_pos)
    body = Table(buf, n, body_pos, f"{label} attributes", counter)
    body.refuse_unknown(spec.field_count, spec.table, label)
    uids: dict[Any, int | None] = {}
    for slot in spec.slots:
        uid = field_scalar(buf, n, body, slot.fb_slot, "q", label)
        uids[slot] = 0 if uid is None and slot.required else uid
    lists = {
        held: field_longs(buf, n, body, held.fb_slot, f"{label} {held.wire}", MAX_TENSORS)
        for held in spec.tensor_lists
    }
    scalars = {
        s.name: _read_scalar(buf, n, body, s.kind, s.fb_slot, f"{label} {s.key}", s.enum)
        for s in spec.scalars
    }
    for extra in spec.unmodelled:
        value = _read_scalar(
            buf, n, body, extra.kind, extra.fb_slot, f"{label} {extra.wire}", extra.enum
        )
        refuse_unmodelled(spec, label, extra.wire, value, extra.default)
    attributes = decoded_attributes(spec, name, compute, uids, scalars, tensors, lists)
    return spec, attributes


# ----- the graph ---------------------------------------------------------------------------------


def _bytes(data: Any) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise unsupported(f"A serialized graph must be bytes, not {type(data).__name__}")
    size = data.nbytes if isinstance(data, memoryview) else len(data)
    if size > MAX_INPUT_BYTES:
        raise unsupported(f"Serialized graph is larger than {MAX_INPUT_BYTES} bytes")
    return bytes(data)


def _root(buf: bytes, what: str) -> int:
    n = len(buf)
    if n < 12:
        raise bad(f"the buffer is {n} bytes, fewer than 12")
    if n >= MAX_BUFFER:
        raise bad("the buffer is too large")
    rel: int = u32(buf, 0)[0]
    if rel == 0 or rel >= 2**31 or rel >= n:
        raise bad(f"the {what} root offset points outside the buffer")
    return rel


def unwrap_container(buf: bytes) -> bytes:
    """The ``graph_blob`` of an ``HDGP`` container, in a buffer of its own.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for a container that does not verify or has no
            graph blob.
    """
    n = len(buf)
    counter = new_counter()
    t = Table(buf, n, _root(buf, "container"), "the container", counter)
    pos = field_target(buf, n, t, 0, "the container's graph_blob")
    if pos is None:
        raise unsupported("Invalid hipDNN graph container: the container has no graph blob.")
    length, start = vector_at(buf, n, pos, 1, "the container's graph_blob")
    if length == 0:
        raise unsupported("Invalid hipDNN graph container: the container has no graph blob.")
    plan = field_target(buf, n, t, 1, "the container's plan_blob")
    if plan is not None:
        vector_at(buf, n, plan, 1, "the container's plan_blob")
    return buf[start : start + length]


def read_graph(data: bytes | bytearray | memoryview) -> WireGraph:
    """Decode hipDNN's serialized ``Graph`` (or an ``HDGP`` container holding one).

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for input that does not verify, refused content
            (another node kind, an unknown DataType or field, unmodelled content), or a value that
            cannot be carried; INVALID_VALUE for a broken content rule (duplicate or dangling uid,
            absurd dims).
    """
    buf = _bytes(data)
    if len(buf) >= 8 and buf[4:8] == CONTAINER_IDENTIFIER:
        buf = unwrap_container(buf)
    elif len(buf) >= 8 and buf[4:8] == RETIRED_IDENTIFIER:
        raise unsupported(
            "The input is in hipdnn-graph's retired HDGR format, not hipDNN's serialized graph: "
            "load it with the hipdnn-graph version that wrote it and serialize it again"
        )
    encoding = wide_text_encoding(buf)
    if encoding is not None:
        raise wide_text_error(encoding)
    n = len(buf)
    counter = new_counter()
    g = Table(buf, n, _root(buf, "graph"), "the graph table", counter)
    g.refuse_unknown(10, "Graph", "the graph table")
    name = field_string(buf, n, g, 0, "the graph name")
    dtypes = [_data_type(field_scalar(buf, n, g, s, "b", "graph"), "Graph") for s in (1, 2, 3)]
    tensor_positions = field_tables(buf, n, g, 4, "tensors", MAX_TENSORS)
    node_positions = field_tables(buf, n, g, 5, "nodes", MAX_NODES)
    preferred = field_scalar(buf, n, g, 6, "q", "preferred_engine_id")
    override = bool(field_scalar(buf, n, g, 7, "?", "is_override_shape_enabled"))
    version = field_struct(buf, n, g, 8, 12, 4, "min_required_engine_api_version")
    uuid = field_struct(buf, n, g, 9, 16, 1, "id")
    offset_uids: list[int | None] = []
    tensors = [_tensor(buf, n, p, i, counter, offset_uids) for i, p in enumerate(tensor_positions)]
    graph = WireGraph(
        name=name,
        compute_data_type=dtypes[0],
        intermediate_data_type=dtypes[1],
        io_data_type=dtypes[2],
        preferred_engine_id=preferred,
        tensors=tensors,
        metadata=WireMetadata(
            id=uuid,
            min_required_engine_api_version=None
            if version is None
            else struct.unpack("<3I", version),
            is_override_shape_enabled=override,
        ),
    )
    check_wire_graph(graph)  # the tensors, before any node refers to them
    link_ragged(tensors, offset_uids)
    by_uid: dict[int, TensorAttributes] = {t.uid: t for t in tensors}  # type: ignore[misc]
    bodies: set[int] = set()
    graph.nodes = [
        _node(buf, n, p, i, by_uid, counter, bodies) for i, p in enumerate(node_positions)
    ]
    check_node_names(graph)
    return graph

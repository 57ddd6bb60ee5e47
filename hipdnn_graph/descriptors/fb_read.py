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

import numpy as np

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import DataType, ErrorCode
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
    MAX_RANK,
    MAX_TENSORS,
    check_node_names,
    check_wire_graph,
    unsupported,
    wide_text_encoding,
    wide_text_error,
)
from .wire_trusted import decoded_attributes, decoded_tensor, refuse_unmodelled
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

_MAX_BUFFER = 2**31 - 1
_MAX_DEPTH = 64
_MAX_TABLES = 1_000_000
_u16 = struct.Struct("<H").unpack_from
_i32 = struct.Struct("<i").unpack_from
_u32 = struct.Struct("<I").unpack_from
_SCALARS = {code: struct.Struct("<" + code).unpack_from for code in "qifb?BdI"}
_WIDTHS = {"q": 8, "d": 8, "i": 4, "f": 4, "I": 4, "b": 1, "?": 1, "B": 1}
#: unpackers of the short integer vectors (at most MAX_RANK elements), by struct code
_SHORT_VECTORS = {
    code: [struct.Struct(f"<{k}{code}").unpack_from for k in range(MAX_RANK + 1)]
    for code, _ in VECTOR_KINDS.values()
    if code != "B"
}


def _bad(what: str) -> HipdnnError:
    return unsupported(f"Invalid hipDNN graph: {what}")


def _counter() -> list[int]:
    """A decode's running counts: tables verified, bytes of strings and vectors decoded."""
    return [0, 0]


def _charge(counter: list[int], size: int, n: int) -> None:
    """Count ``size`` decoded bytes; refuse once a decode copies more than the buffer holds
    (only strings or vectors that many tables share can do that)."""
    counter[1] += size
    if counter[1] > n:
        raise _bad(
            f"its tables share strings or vectors that decode to more than the buffer's {n} bytes"
        )


class _Table:
    """A verified table: its position, its vtable's entries (0 = absent) and the decode's
    running counts (see :func:`_counter`)."""

    __slots__ = ("counter", "entries", "pos")

    def __init__(self, buf: bytes, n: int, pos: int, what: str, counter: list[int]) -> None:
        if pos % 4 or pos + 4 > n or pos < 0:
            raise _bad(f"{what} is not an aligned table inside the buffer")
        counter[0] += 1
        if counter[0] > _MAX_TABLES:
            raise _bad(f"more than {_MAX_TABLES} tables")
        self.counter = counter
        vt = pos - _i32(buf, pos)[0]
        if vt < 0 or vt % 2 or vt + 2 > n:
            raise _bad(f"{what} has its vtable outside the buffer")
        size = _u16(buf, vt)[0]
        if size % 2 or size < 4 or vt + size > n:
            raise _bad(f"{what} has a vtable of {size} bytes that does not fit")
        self.pos = pos
        self.entries = struct.unpack_from(f"<{size // 2 - 2}H", buf, vt + 4)

    def offset(self, slot: int) -> int:
        entries = self.entries
        return entries[slot] if slot < len(entries) else 0

    def refuse_unknown(self, known: int, table: str, what: str) -> None:
        """Refuse a field past the ``known`` ones of hipDNN's ``table`` (a newer schema's)."""
        for slot in range(known, len(self.entries)):
            if self.entries[slot]:
                raise unsupported(
                    f"{what}: {table} field {slot} is not in hipDNN's schema as known here "
                    "(written by a newer hipDNN?)"
                )


def _scalar(buf: bytes, n: int, table: _Table, slot: int, code: str, what: str) -> Any:
    """The scalar in ``slot``, or None when absent (aligned and in bounds, as verified)."""
    off = table.offset(slot)
    if not off:
        return None
    pos = table.pos + off
    width = _WIDTHS[code]
    if pos % width or pos + width > n:
        raise _bad(f"{what} is not an aligned {width}-byte field inside the buffer")
    return _SCALARS[code](buf, pos)[0]


def _target(buf: bytes, n: int, table: _Table, slot: int, what: str) -> int | None:
    """Where the offset in ``slot`` points, or None when absent."""
    off = table.offset(slot)
    if not off:
        return None
    pos = table.pos + off
    if pos % 4 or pos + 4 > n:
        raise _bad(f"{what} is not an aligned offset inside the buffer")
    rel: int = _u32(buf, pos)[0]
    if rel == 0 or rel >= 2**31 or pos + rel >= n:
        raise _bad(f"{what} points outside the buffer")
    return pos + rel


def _vector(buf: bytes, n: int, pos: int, width: int, what: str) -> tuple[int, int]:
    """(length, start of the elements) of a vector at ``pos``."""
    if pos % 4 or pos + 4 > n:
        raise _bad(f"{what} is not an aligned vector inside the buffer")
    length = _u32(buf, pos)[0]
    if length >= _MAX_BUFFER // width or pos + 4 + width * length > n:
        raise _bad(f"{what} does not fit in the buffer")
    return length, pos + 4


def _string(buf: bytes, n: int, table: _Table, slot: int, what: str) -> str:
    pos = _target(buf, n, table, slot, what)
    if pos is None:
        return ""
    length, start = _vector(buf, n, pos, 1, what)
    end = start + length
    if end >= n or buf[end] != 0:
        raise _bad(f"{what} does not end in a NUL byte")
    _charge(table.counter, length, n)
    try:
        return buf[start:end].decode()
    except UnicodeDecodeError:
        raise unsupported(f"{what} is not UTF-8") from None


def _numbers(
    buf: bytes, n: int, table: _Table, slot: int, what: str, kind: Kind, cap: int = MAX_RANK
) -> Any:
    """The vector of ``kind`` (one of :data:`VECTOR_KINDS`) in ``slot``, empty when absent:
    ``bytes`` for a ``U8_VEC`` (any length the buffer holds), else a list of at most ``cap``
    integers."""
    code, width = VECTOR_KINDS[kind]
    pos = _target(buf, n, table, slot, what)
    if pos is None:
        return b"" if kind is Kind.U8_VEC else []
    length, start = _vector(buf, n, pos, width, what)
    if kind is not Kind.U8_VEC and length > cap:
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"{what} has {length} entries, more than {cap}")
    _charge(table.counter, width * length, n)
    if kind is Kind.U8_VEC:
        return buf[start : start + length]
    if length <= MAX_RANK:
        return list(_SHORT_VECTORS[code][length](buf, start))
    return list(struct.unpack_from(f"<{length}{code}", buf, start))


def _longs(
    buf: bytes, n: int, table: _Table, slot: int, what: str, cap: int = MAX_RANK
) -> list[int]:
    """A vector of at most ``cap`` int64 (dims, strides, tensor uids)."""
    values: list[int] = _numbers(buf, n, table, slot, what, Kind.I64_VEC, cap)
    return values


def _tables(buf: bytes, n: int, table: _Table, slot: int, what: str, cap: int) -> list[int]:
    """Positions of the tables a vector of tables points at (each entry checked in bounds)."""
    pos = _target(buf, n, table, slot, what)
    if pos is None:
        return []
    length, start = _vector(buf, n, pos, 4, what)
    if length > cap:
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"Graph has {length} {what}, more than {cap}")
    if length > 256:  # many entries: look for repeats before making an int object of each
        offsets = np.frombuffer(buf, dtype="<u4", count=length, offset=start)
        if (offsets >= n).any():
            raise _bad(f"a {what[:-1]} entry points outside the buffer")
        rels = np.arange(start, start + 4 * length, 4, dtype=np.uint32)  # sums < 2**32
        rels += offsets
        ordered = np.sort(rels)
        if (ordered[1:] == ordered[:-1]).any():
            _repeated(what)
        del ordered
        return rels.tolist()
    rels_ = struct.unpack_from(f"<{length}I", buf, start)
    positions = [start + 4 * i + rel for i, rel in enumerate(rels_)]
    if len(set(positions)) != length:
        _repeated(what)
    return positions


def _repeated(what: str) -> None:
    raise HipdnnError(ErrorCode.INVALID_VALUE, f"Graph lists one {what[:-1]} table more than once")


def _data_type(value: int | None, what: str) -> DataType:
    return DataType.NOT_SET if value is None else data_type_from_wire(value, what)


# ----- tensors ----------------------------------------------------------------------------------

_VALUE_SIZES = {member: struct.calcsize(code) for member, code in VALUE_CODES.items()}


def _tensor(buf: bytes, n: int, pos: int, index: int, counter: list[int]) -> TensorAttributes:
    what = f"tensor {index}"
    t = _Table(buf, n, pos, what, counter)
    t.refuse_unknown(12, "TensorAttributes", what)
    uid = _scalar(buf, n, t, 0, "q", what) or 0
    name = _string(buf, n, t, 1, f"{what} name")
    where = f"Tensor {name or uid}"
    data_type = _data_type(_scalar(buf, n, t, 2, "b", what), where)
    strides = _longs(buf, n, t, 3, f"{where} strides")
    dims = _longs(buf, n, t, 4, f"{where} dims")
    virtual = bool(_scalar(buf, n, t, 5, "?", what))
    member_number = _scalar(buf, n, t, 6, "B", what) or 0
    value_pos = _target(buf, n, t, 7, f"{where} value")
    value = None
    if member_number:
        if member_number > len(ValueMember) - 1:
            raise unsupported(
                f"{where}: TensorValue member {member_number} is not in hipDNN's schema"
            )
        member = ValueMember(member_number)
        size = _VALUE_SIZES[member]
        if value_pos is None or value_pos % size or value_pos + size > n:
            raise _bad(f"{where} has a {member.name} without an aligned struct inside the buffer")
        raw = _SCALARS[VALUE_CODES[member]](buf, value_pos)[0]
        value = decode_value(member, raw, data_type, where)
    pass_by_value = bool(_scalar(buf, n, t, 8, "?", what))
    if _scalar(buf, n, t, 9, "q", what) is not None:
        raise unsupported(f"{where}: ragged_offset_tensor_uid is not supported")
    alignment = _scalar(buf, n, t, 10, "q", what)
    multiplier = _scalar(buf, n, t, 11, "q", what)
    if multiplier is not None and multiplier != 1:
        raise unsupported(f"{where}: ragged_offset_multiplier {multiplier} is not supported")
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
    )


# ----- nodes -------------------------------------------------------------------------------------


def _read_scalar(
    buf: bytes, n: int, t: _Table, kind: Kind, slot: int, what: str, enum: WireEnum | None = None
) -> Any:
    if kind is Kind.STRING:
        return _string(buf, n, t, slot, what)
    if kind in VECTOR_KINDS:
        return _numbers(buf, n, t, slot, what, kind)
    code, _, optional, default = WIRE_KINDS[kind]
    value = _scalar(buf, n, t, slot, code, what)
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
    t = _Table(buf, n, pos, what, counter)
    t.refuse_unknown(4, "Node", what)
    name = _string(buf, n, t, 0, f"{what} name")
    label = f'hipDNN node "{name}"'
    compute = _data_type(_scalar(buf, n, t, 1, "b", what), label)
    tag = _scalar(buf, n, t, 2, "B", what) or 0
    body_pos = _target(buf, n, t, 3, f"{label} attributes")
    specs = node_specs()
    spec = specs.get(tag)
    if spec is None or body_pos is None:
        kind = NODE_KINDS[tag] if tag < len(NODE_KINDS) else "an unknown kind"
        missing = " without its table" if spec is not None else ""
        raise unsupported(
            f"{label} has kind {kind} ({tag}){missing}; only {supported_kinds()} are supported"
        )
    if body_pos in bodies:
        _repeated("node attributes")  # "one node attribute table"
    bodies.add(body_pos)
    body = _Table(buf, n, body_pos, f"{label} attributes", counter)
    body.refuse_unknown(spec.field_count, spec.table, label)
    uids: dict[Any, int | None] = {}
    for slot in spec.slots:
        uid = _scalar(buf, n, body, slot.fb_slot, "q", label)
        uids[slot] = 0 if uid is None and slot.required else uid
    lists = {
        held: _longs(buf, n, body, held.fb_slot, f"{label} {held.wire}", MAX_TENSORS)
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
        raise _bad(f"the buffer is {n} bytes, fewer than 12")
    if n >= _MAX_BUFFER:
        raise _bad("the buffer is too large")
    rel: int = _u32(buf, 0)[0]
    if rel == 0 or rel >= 2**31 or rel >= n:
        raise _bad(f"the {what} root offset points outside the buffer")
    return rel


def unwrap_container(buf: bytes) -> bytes:
    """The ``graph_blob`` of an ``HDGP`` container, in a buffer of its own.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for a container that does not verify or has no
            graph blob.
    """
    n = len(buf)
    counter = _counter()
    t = _Table(buf, n, _root(buf, "container"), "the container", counter)
    pos = _target(buf, n, t, 0, "the container's graph_blob")
    if pos is None:
        raise unsupported("Invalid hipDNN graph container: the container has no graph blob.")
    length, start = _vector(buf, n, pos, 1, "the container's graph_blob")
    if length == 0:
        raise unsupported("Invalid hipDNN graph container: the container has no graph blob.")
    plan = _target(buf, n, t, 1, "the container's plan_blob")
    if plan is not None:
        _vector(buf, n, plan, 1, "the container's plan_blob")
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
    counter = _counter()
    g = _Table(buf, n, _root(buf, "graph"), "the graph table", counter)
    g.refuse_unknown(10, "Graph", "the graph table")
    name = _string(buf, n, g, 0, "the graph name")
    dtypes = [_data_type(_scalar(buf, n, g, s, "b", "graph"), "Graph") for s in (1, 2, 3)]
    tensor_positions = _tables(buf, n, g, 4, "tensors", MAX_TENSORS)
    node_positions = _tables(buf, n, g, 5, "nodes", MAX_NODES)
    preferred = _scalar(buf, n, g, 6, "q", "preferred_engine_id")
    override = bool(_scalar(buf, n, g, 7, "?", "is_override_shape_enabled"))
    version = _struct(buf, n, g, 8, 12, 4, "min_required_engine_api_version")
    uuid = _struct(buf, n, g, 9, 16, 1, "id")
    tensors = [_tensor(buf, n, p, i, counter) for i, p in enumerate(tensor_positions)]
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
    by_uid: dict[int, TensorAttributes] = {t.uid: t for t in tensors}  # type: ignore[misc]
    bodies: set[int] = set()
    graph.nodes = [
        _node(buf, n, p, i, by_uid, counter, bodies) for i, p in enumerate(node_positions)
    ]
    check_node_names(graph)
    return graph


def _struct(buf: bytes, n: int, t: _Table, slot: int, size: int, align: int, what: str) -> Any:
    off = t.offset(slot)
    if not off:
        return None
    pos = t.pos + off
    if pos % align or pos + size > n:
        raise _bad(f"{what} is not an aligned {size}-byte struct inside the buffer")
    return buf[pos : pos + size]

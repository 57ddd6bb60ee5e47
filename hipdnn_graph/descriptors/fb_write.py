"""Writing hipDNN's serialized ``Graph``: the exact bytes hipDNN's own ``Graph::Pack`` emits.

hipDNN's backend serializes a graph with the FlatBuffers object API (``Finish(Graph::Pack(...))``,
no file identifier). :class:`Builder` reproduces the C++ ``FlatBufferBuilder`` byte for byte
(HIPDNN_WIRE.md A11): the buffer grows from the back; children are written before their parent
(graph name; per tensor: name, strides, dims, value struct, table; the tensors vector; per node:
name, attributes table, node table; the nodes vector; the graph table); each table adds its
8-byte fields, then its 4-byte ones (offsets, structs), then its 1-byte ones, each group in
reverse slot order, skipping plain scalars at their defaults; vtables are shared when
byte-identical. Everything written passes the flatbuffers Verifier (8-byte fields 8-aligned).

Example:
    >>> from hipdnn_graph.descriptors.wire_model import WireGraph
    >>> data = write_graph(WireGraph(name="g"))
    >>> len(data), data[:4], data[-8:]
    (28, b'\\x0c\\x00\\x00\\x00', b'\\x01\\x00\\x00\\x00g\\x00\\x00\\x00')
"""

from __future__ import annotations

import struct
from typing import Any

from ..tensor import TensorAttributes
from ..types import DiagonalAlignment
from .node_spec import WIRE_KINDS, Kind, NodeSpec
from .wire_model import (
    VALUE_CODES,
    ValueMember,
    WireGraph,
    encode_value,
    float32,
    unsupported,
    wire_data_type,
)

__all__ = ["Builder", "write_graph"]

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_SIZES = {"q": 8, "d": 8, "i": 4, "I": 4, "f": 4, "O": 4, "b": 1, "B": 1, "?": 1}


class Builder:
    """A FlatBuffers builder that emits what C++ ``FlatBufferBuilder`` emits.

    Offsets are *sizes*: the number of bytes written when the object was finished (C++'s
    ``GetSize()``); the byte at size ``s`` sits at address ``total - s``.
    """

    __slots__ = ("chunks", "minalign", "size", "vtables")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.minalign = 1
        self.vtables: dict[bytes, int] = {}

    def _pad(self, n: int) -> None:
        if n:
            self.chunks.append(bytes(n))
            self.size += n

    def prealign(self, length: int, alignment: int) -> None:
        """Pad so that after ``length`` more bytes the size is a multiple of ``alignment``."""
        if alignment > self.minalign:
            self.minalign = alignment
        self._pad(-(self.size + length) % alignment)

    def push(self, data: bytes) -> int:
        """Emit raw bytes; returns the new size."""
        self.chunks.append(data)
        self.size += len(data)
        return self.size

    def string(self, text: bytes) -> int:
        """A string (UTF-8 bytes): content, NUL, then its u32 length."""
        self.prealign(len(text) + 1, 4)
        self.push(text + b"\0")
        return self.push(_U32.pack(len(text)))

    def longs(self, values: list[int]) -> int:
        """A ``[long]`` vector."""
        n = len(values)
        self.prealign(8 * n, 4)
        self.prealign(8 * n, 8)
        self.push(struct.pack(f"<{n}q", *values))
        return self.push(_U32.pack(n))

    def offsets(self, targets: list[int]) -> int:
        """A vector of tables."""
        n = len(targets)
        self.prealign(4 * n, 4)
        self.prealign(4 * n, 4)
        for target in reversed(targets):
            self.push(_U32.pack(self.size + 4 - target))
        return self.push(_U32.pack(n))

    def struct_value(self, code: str) -> Any:
        """A function emitting an out-of-line struct of one field (a union member)."""
        fmt = struct.Struct("<" + code)

        def emit(value: Any) -> int:
            self.prealign(0, fmt.size)
            return self.push(fmt.pack(value))

        return emit

    def table(self, fields: list[tuple[int, str, Any]]) -> int:
        """A table from ``(slot, code, value)`` in add order; code ``O`` is an offset (a size),
        ``S<n>``/``A<n>`` a struct of n bytes aligned to 1/4 (``value`` its bytes)."""
        start = self.size
        tracked: list[tuple[int, int]] = []
        for slot, code, value in fields:
            if code == "O":
                self.prealign(0, 4)
                self.push(_U32.pack(self.size + 4 - value))
            elif code[0] in "SA":
                self.prealign(0, 4 if code[0] == "A" else 1)
                self.push(value)
            else:
                self.prealign(0, _SIZES[code])
                self.push(struct.pack("<" + code, value))
            tracked.append((slot, self.size))
        self.prealign(0, 4)
        table_size = self.size + 4
        top = max((slot for slot, _ in tracked), default=-1)
        entries = [0] * (top + 1)
        for slot, size in tracked:
            entries[slot] = table_size - size
        vtable = struct.pack(f"<{top + 3}H", 4 + 2 * (top + 1), table_size - start, *entries)
        found = self.vtables.get(vtable)
        vtable_size = found if found is not None else table_size + len(vtable)
        self.push(_I32.pack(vtable_size - table_size))
        if found is None:
            self.push(vtable)
            self.vtables[vtable] = vtable_size
        return table_size

    def finish(self, root: int) -> bytes:
        """The finished buffer: a root offset and no file identifier."""
        self.prealign(4, self.minalign)
        self.prealign(0, 4)
        self.push(_U32.pack(self.size + 4 - root))
        return b"".join(reversed(self.chunks))


# ----- tables ------------------------------------------------------------------------------------

_GROUPS = (8, 4, 1)


def _in_add_order(fields: list[tuple[int, str, int, Any]]) -> list[tuple[int, str, Any]]:
    """``(slot, code, width, value)`` → add order: by width 8, 4, 1, each in reverse slot order."""
    ordered = sorted(fields, key=lambda f: (-f[2], -f[0]))
    return [(slot, code, value) for slot, code, _, value in ordered]


def _tensor(b: Builder, t: TensorAttributes) -> int:
    d = t.__dict__
    name = d["name"]
    where = f"Tensor {name or d['uid']}"
    data_type = wire_data_type(d["data_type"], where)
    name_ref = b.string(name.encode()) if name else 0
    strides_ref = b.longs(d["stride"]) if d["stride"] else 0
    dims_ref = b.longs(d["dim"]) if d["dim"] else 0
    fields: list[tuple[int, str, int, Any]] = []
    value = d["value"]
    if value is not None:
        member, raw = encode_value(value, d["data_type"], where)
        code = VALUE_CODES[member]
        fields.append((7, "O", 4, b.struct_value(code)(raw)))
        fields.append((6, "B", 1, int(member)))
    uid = d["uid"]
    if uid:
        fields.append((0, "q", 8, uid))
    if d["alignment"] != 16:
        fields.append((10, "q", 8, d["alignment"]))
    if dims_ref:
        fields.append((4, "O", 4, dims_ref))
    if strides_ref:
        fields.append((3, "O", 4, strides_ref))
    if name_ref:
        fields.append((1, "O", 4, name_ref))
    if d["is_pass_by_value"]:
        fields.append((8, "?", 1, True))
    if d["is_virtual"]:
        fields.append((5, "?", 1, True))
    if data_type:
        fields.append((2, "b", 1, data_type))
    return b.table(_in_add_order(fields))


def _scalar_field(kind: Kind, value: Any, where: str) -> tuple[str, int, Any] | None:
    """(code, width, wire value) of a scalar, or None when it is not written."""
    code, width, optional, default = WIRE_KINDS[kind]
    if optional:
        if value is None:
            return None
    elif value == default:
        return None
    if kind is Kind.F32_OPT:
        value = float32(value, where)
    elif kind is Kind.ALIGN:
        value = int(DiagonalAlignment(value))
    elif kind is Kind.DTYPE:
        value = wire_data_type(value, where)
    elif kind in (Kind.BOOL, Kind.BOOL_OPT):
        value = bool(value)
    elif kind is Kind.I32_OPT and not -(2**31) <= value < 2**31:
        raise unsupported(f"{where}: {value} does not fit a 32-bit int")
    return code, width, value


def _node_attributes(b: Builder, spec: NodeSpec, attributes: Any) -> int:
    name = attributes.name or spec.label
    fields: list[tuple[int, str, int, Any]] = []
    slots = attributes.tensors_by_slot()
    for slot in spec.slots:
        tensor = slots.get(slot.name)
        if tensor is None:
            if slot.required:
                raise unsupported(f"Node {name}: required slot {slot.name} is not set")
            continue
        uid = tensor.uid
        if uid or not slot.required:
            fields.append((slot.fb_slot, "q", 8, uid))
    d = attributes.__dict__
    for scalar in spec.scalars:
        written = _scalar_field(scalar.kind, d[scalar.name], f"Node {name} {scalar.name}")
        if written is not None:
            fields.append((scalar.fb_slot, written[0], written[1], written[2]))
    return b.table(_in_add_order(fields))


def _node(b: Builder, spec: NodeSpec, attributes: Any) -> int:
    name = attributes.name
    name_ref = b.string(name.encode()) if name else 0
    body = _node_attributes(b, spec, attributes)
    fields: list[tuple[int, str, int, Any]] = [(3, "O", 4, body)]
    if name_ref:
        fields.append((0, "O", 4, name_ref))
    fields.append((2, "B", 1, spec.union_tag))
    compute = wire_data_type(attributes.compute_data_type, f"Node {name}")
    if compute:
        fields.append((1, "b", 1, compute))
    return b.table(_in_add_order(fields))


_VERSION = struct.Struct("<3I")


def write_graph(graph: WireGraph) -> bytes:
    """The canonical hipDNN bytes of ``graph`` (what ``Graph::Pack`` then ``Finish`` emit).

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for content hipDNN's schema cannot hold (a data type
            without a number, a value its type cannot store, a float attribute that overflows
            binary32).
    """
    b = Builder()
    name_ref = b.string(graph.name.encode()) if graph.name else 0
    tensors = [_tensor(b, t) for t in graph.tensors]
    tensors_ref = b.offsets(tensors) if tensors else 0
    nodes = [_node(b, spec, attributes) for spec, attributes in graph.nodes]
    nodes_ref = b.offsets(nodes) if nodes else 0
    meta = graph.metadata
    fields: list[tuple[int, str, int, Any]] = []
    if graph.preferred_engine_id is not None:
        fields.append((6, "q", 8, graph.preferred_engine_id))
    if meta.id is not None:
        fields.append((9, "S16", 4, bytes(meta.id)))
    if meta.min_required_engine_api_version is not None:
        fields.append((8, "A12", 4, _VERSION.pack(*meta.min_required_engine_api_version)))
    for slot, ref in ((5, nodes_ref), (4, tensors_ref), (0, name_ref)):
        if ref:
            fields.append((slot, "O", 4, ref))
    if meta.is_override_shape_enabled:
        fields.append((7, "?", 1, True))
    for slot, dtype in (
        (3, graph.io_data_type),
        (2, graph.intermediate_data_type),
        (1, graph.compute_data_type),
    ):
        number = wire_data_type(dtype, "Graph")
        if number:
            fields.append((slot, "b", 1, number))
    root = b.table(_in_add_order(fields))
    return b.finish(root)


assert ValueMember.NONE == 0

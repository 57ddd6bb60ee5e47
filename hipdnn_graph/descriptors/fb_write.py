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
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..tensor import TensorAttributes
from .node_spec import INT32_KINDS, VECTOR_KINDS, WIRE_KINDS, Kind, NodeSpec, WireEnum
from .wire_model import WireGraph
from .wire_rules import unsupported
from .wire_trusted import refuse_unmodelled
from .wire_values import VALUE_CODES, encode_value, float32, wire_data_type

__all__ = ["Builder", "write_graph"]

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_SIZES = {"q": 8, "Q": 8, "d": 8, "i": 4, "I": 4, "f": 4, "O": 4, "b": 1, "B": 1, "?": 1}


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
        """A vector of int64 (C++ ``CreateVector<int64_t>``): aligned for its u32 length and its
        8-byte elements, the elements, then the length."""
        return self.numbers(values, "q", 8)

    def numbers(self, values: Sequence[int], code: str, width: int) -> int:
        """A vector of ``width``-byte scalars of struct ``code`` (C++ ``CreateVector<T>``, ``T``
        ``int64_t``, ``int32_t`` or ``uint8_t`` for code ``B``, whose ``values`` may be
        ``bytes``): aligned for its u32 length and its elements, the elements, then the
        length."""
        n = len(values)
        self.prealign(width * n, 4)
        self.prealign(width * n, width)
        self.push(bytes(values) if code == "B" else struct.pack(f"<{n}{code}", *values))
        return self.push(_U32.pack(n))

    def offsets(self, targets: list[int]) -> int:
        """A vector of tables."""
        n = len(targets)
        self.prealign(4 * n, 4)
        self.prealign(4 * n, 4)
        for target in reversed(targets):
            self.push(_U32.pack(self.size + 4 - target))
        return self.push(_U32.pack(n))

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

    def finish(self, root: int, identifier: bytes = b"") -> bytes:
        """The finished buffer: a root offset, then the 4-byte file ``identifier`` if given."""
        self.prealign(4 + len(identifier), self.minalign)
        if identifier:
            self.push(identifier)
        self.prealign(0, 4)
        self.push(_U32.pack(self.size + 4 - root))
        return b"".join(reversed(self.chunks))


# ----- tables ------------------------------------------------------------------------------------

_GROUPS = (8, 4, 1)


def _in_add_order(fields: list[tuple[int, str, int, Any]]) -> list[tuple[int, str, Any]]:
    """``(slot, code, width, value)`` → add order: by width 8, 4, 1, each in reverse slot order."""
    ordered = sorted(fields, key=lambda f: (-f[2], -f[0]))
    return [(slot, code, value) for slot, code, _, value in ordered]


class _TensorLayout:
    """The bytes of one tensor (name, strides, dims, value struct, table) as one ``struct`` call.

    A tensor's layout depends only on where it starts (modulo 8), its name's length, its rank
    and which fields it has; the relative offsets inside it are then constants. Each layout is
    worked out once, by the rules of :class:`Builder`, and cached.
    """

    __slots__ = ("keys", "maxalign", "packer", "table_size", "vtable")

    def __init__(self, start: int, signature: tuple[Any, ...]) -> None:
        name_length, n_strides, n_dims, value_code, uid, alignment, pbv, virtual, dtype, *rest = (
            signature
        )
        ragged, multiplier = rest
        pieces: list[tuple[str, list[Any]]] = []  # (struct code, value keys) in emission order
        size, maxalign = start, 4
        refs: dict[str, int] = {}

        def pad(n: int) -> None:
            nonlocal size
            if n:
                pieces.append((f"{n}x", []))
                size += n

        def emit(code: str, keys: list[Any], width: int) -> None:
            nonlocal size
            pieces.append((code, keys))
            size += width

        if name_length:
            pad(-(size + name_length + 1) % 4)
            emit(f"{name_length}sx", ["name"], name_length + 1)
            emit("I", [("const", name_length)], 4)
            refs["name"] = size
        for key, n in (("strides", n_strides), ("dims", n_dims)):
            if n:
                maxalign = 8
                pad(-(size + 8 * n) % 8)
                emit(f"{n}q", [key], 8 * n)
                emit("I", [("const", n)], 4)
                refs[key] = size
        if value_code:
            width = struct.calcsize(value_code)
            maxalign = max(maxalign, width)
            pad(-size % width)
            emit(value_code, ["raw"], width)
            refs["value"] = size
        table_start = size
        fields: list[tuple[int, str, int, Any]] = []  # add order: 8-byte, 4-byte, 1-byte fields
        fields += [(11, "q", 8, "multiplier")] if multiplier else []
        fields += [(10, "q", 8, "alignment")] if alignment else []
        fields += [(9, "q", 8, "ragged")] if ragged else []
        fields += [(0, "q", 8, "uid")] if uid else []
        for slot, ref in ((7, "value"), (4, "dims"), (3, "strides"), (1, "name")):
            if ref in refs:
                fields.append((slot, "I", 4, ref))
        fields += [(8, "?", 1, ("const", True))] if pbv else []
        fields += [(6, "B", 1, "member")] if value_code else []
        fields += [(5, "?", 1, ("const", True))] if virtual else []
        fields += [(2, "b", 1, "dtype")] if dtype else []
        tracked: list[tuple[int, int]] = []
        for slot, code, width, key in fields:
            pad(-size % width)
            value_key: Any = key
            if code == "I":  # an offset to a child of this chunk: a constant
                value_key = ("const", size + 4 - refs[key])
            if width == 8:
                maxalign = 8
            emit(code, [value_key], width)
            tracked.append((slot, size))
        pad(-size % 4)
        emit("i", ["soffset"], 4)
        table_size = size
        top = max(slot for slot, _ in tracked) if tracked else -1
        entries = [0] * (top + 1)
        for slot, at in tracked:
            entries[slot] = table_size - at
        self.vtable = struct.pack(
            f"<{top + 3}H", 4 + 2 * (top + 1), table_size - table_start, *entries
        )
        self.packer = struct.Struct("<" + "".join(code for code, _ in reversed(pieces)))
        self.keys = tuple(key for _, keys in reversed(pieces) for key in keys)
        self.table_size = table_size - start
        self.maxalign = maxalign


_LAYOUTS: dict[tuple[Any, ...], _TensorLayout] = {}


def _tensor(b: Builder, t: TensorAttributes) -> int:
    d = t.__dict__
    name, strides, dims, value = d["name"], d["stride"], d["dim"], d["value"]
    where = f"Tensor {name or d['uid']}"
    dtype = wire_data_type(d["data_type"], where)
    encoded = name.encode() if name else b""
    member = raw = None
    code = ""
    if value is not None:
        member, raw = encode_value(value, d["data_type"], where)
        code = VALUE_CODES[member]
    uid, alignment = d["uid"], d["alignment"]
    offsets, multiplier = d["ragged_offset"], d["ragged_offset_multiplier"]
    ragged = None if offsets is None else offsets.uid
    signature = (
        len(encoded), len(strides), len(dims), code, bool(uid), alignment != 16,
        bool(d["is_pass_by_value"]), bool(d["is_virtual"]), bool(dtype),
        ragged is not None, multiplier != 1,
    )  # fmt: skip
    start = b.size & 7
    layout = _LAYOUTS.get((start, *signature))
    if layout is None:
        layout = _LAYOUTS[(start, *signature)] = _TensorLayout(start, signature)
    table_size = b.size + layout.table_size
    found = b.vtables.get(layout.vtable)
    values: list[Any] = []
    for key in layout.keys:
        if key.__class__ is tuple:
            values.append(key[1])
        elif key == "strides":
            values += strides
        elif key == "dims":
            values += dims
        elif key == "soffset":
            values.append(
                (found if found is not None else table_size + len(layout.vtable)) - table_size
            )
        else:
            values.append(
                {"name": encoded, "raw": raw, "uid": uid, "alignment": alignment,
                 "member": member, "dtype": dtype, "ragged": ragged,
                 "multiplier": multiplier}[key]
            )  # fmt: skip
    b.push(layout.packer.pack(*values))
    if found is None:
        b.vtables[layout.vtable] = b.push(layout.vtable)
    if layout.maxalign > b.minalign:
        b.minalign = layout.maxalign
    return table_size


def _scalar_field(
    kind: Kind, value: Any, where: str, enum: WireEnum | None = None
) -> tuple[str, int, Any] | None:
    """(code, width, wire value) of a scalar, or None when it is not written.

    Raises:
        HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` for an enum member the schema has no number
            for, or an integer too wide for its field.
    """
    code, width, optional, default = WIRE_KINDS[kind]
    if enum is not None and value is not None:
        enum.wire_number(value, where)
    if optional:
        if value is None:
            return None
    elif value == default:
        return None
    if kind is Kind.F32_OPT:
        value = float32(value, where)
    elif kind is Kind.ENUM:
        value = int(value)
    elif kind is Kind.DTYPE:
        value = wire_data_type(value, where)
    elif kind in (Kind.BOOL, Kind.BOOL_OPT):
        value = bool(value)
    elif kind in INT32_KINDS and not -(2**31) <= value < 2**31:
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
    if spec.unmodelled:
        set_values = attributes.unmodelled_values()
        for extra in spec.unmodelled:
            value = set_values.get(extra.wire, extra.default)
            refuse_unmodelled(spec, f"Node {name}", extra.wire, value, extra.default)
    d = attributes.__dict__
    # children (strings and vectors) are created before the table in field order, as the object
    # API's Pack does, and only when not empty
    children: list[tuple[int, Callable[[], int]]] = []
    for tensors in spec.tensor_lists:
        held = attributes.outputs if tensors.output else attributes.inputs
        uids = [held[key].uid for key in sorted(held)]
        if uids:
            children.append((tensors.fb_slot, partial(b.longs, uids)))
    for scalar in spec.scalars:
        where = f"Node {name} {scalar.key}"
        value = scalar.wire_value(d[scalar.name])
        vector = VECTOR_KINDS.get(scalar.kind)
        if vector is not None:
            if scalar.kind in INT32_KINDS:
                for element in value:
                    _scalar_field(Kind.I32, element, where)  # in range
            if len(value):
                children.append((scalar.fb_slot, partial(b.numbers, value, *vector)))
            continue
        if scalar.kind is Kind.STRING:
            if value:
                children.append((scalar.fb_slot, partial(b.string, value.encode())))
            continue
        written = _scalar_field(scalar.kind, value, where, scalar.enum)
        if written is not None:
            fields.append((scalar.fb_slot, written[0], written[1], written[2]))
    for fb_slot, make in sorted(children, key=lambda child: child[0]):
        fields.append((fb_slot, "O", 4, make()))
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

"""FlatBuffers writer for :class:`~.records.GraphRecord` (see :mod:`.flatbuf` for the format).

Objects are laid out front to back (root table first, children after their parent, so every
``uoffset`` points forward); every non-optional field is written even when it equals its default;
vtables are shared; scalars are aligned to their size; any NaN is written as the canonical NaN.
The output is a deterministic function of the record.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from itertools import repeat
from operator import is_, itemgetter
from typing import Any

from .fb_layout import (
    _ATTRS,
    _BOOL,
    _CHUNKS,
    _FLOAT64,
    _INT64,
    _LAYOUTS,
    _SDPA_BWD,
    _SDPA_FWD,
    _TENSOR_VTABLE,
    _U32,
    _VALUE_TENSOR_VTABLE,
    FILE_IDENTIFIER,
    _chunk,
    _layout,
    _value_chunk,
)
from .records import FORMAT_VERSION, GraphRecord, NodeRecord

__all__ = ["encode", "encode_fields"]


class _Writer:
    __slots__ = ("buf", "vtables")

    def __init__(self) -> None:
        self.buf = bytearray(8)
        self.vtables: dict[bytes, int] = {}

    def table(self, sig: tuple[tuple[int, str], ...], values: Sequence[Any]) -> tuple[int, ...]:
        """Append a table; return its position followed by its offset fields' positions."""
        lay = _LAYOUTS.get(sig)
        if lay is None:
            lay = _layout(sig)
            if len(_LAYOUTS) < 1024:  # one per combination of present fields; keep it bounded
                _LAYOUTS[sig] = lay
        vt = self.vtable(lay.vtable)
        buf = self.buf
        buf += b"\0" * ((4 - len(buf)) % 8)  # table at 4 mod 8: its 8-byte fields are aligned
        pos = len(buf)
        buf += lay.body.pack(pos - vt, *lay.reorder(values))
        return (pos, *(pos + r for r in lay.offsets))

    def vtable(self, vtable: bytes) -> int:
        vt = self.vtables.get(vtable)
        if vt is None:
            buf = self.buf
            if len(buf) & 1:
                buf.append(0)
            vt = self.vtables[vtable] = len(buf)
            buf += vtable
        return vt

    def link(self, field: int, target: int) -> None:
        _U32.pack_into(self.buf, field, target - field)

    def string(self, field: int, text: str) -> None:
        data = text.encode()
        buf = self.buf
        buf += b"\0" * (-len(buf) % 4)
        self.link(field, len(buf))
        buf += _U32.pack(len(data))
        buf += data
        buf.append(0)

    def longs(self, field: int, values: Sequence[int]) -> None:
        buf = self.buf
        buf += b"\0" * ((4 - len(buf)) % 8)  # elements 8-aligned
        self.link(field, len(buf))
        buf += struct.pack(f"<I{len(values)}q", len(values), *values)

    def offsets(self, field: int, count: int) -> int:
        """Append a vector of ``count`` uoffsets (zeros); return the first element's position."""
        buf = self.buf
        buf += b"\0" * (-len(buf) % 4)
        self.link(field, len(buf))
        buf += _U32.pack(count)
        buf += b"\0" * (4 * count)
        return len(buf) - 4 * count


def _write_tensors(
    w: _Writer, first: int, tensors: Sequence[Any], dims_key: str, strides_key: str
) -> None:
    """Write the tensors; ``first`` is the position of the vector's first element."""
    vt = w.vtable(_TENSOR_VTABLE)
    buf, chunks, link = w.buf, _CHUNKS, _U32.pack_into
    for field in range(first, first + 4 * len(tensors), 4):
        d = tensors[(field - first) >> 2].__dict__
        dims, strides = d[dims_key], d[strides_key]
        if len(dims) != len(strides):
            _write_tensor(w, field, d, dims, strides)
            continue
        if d["value"] is not None:
            _write_value_chunk(w, field, d, dims, strides)
            continue
        name = d["name"].encode()
        chunk = chunks.get(len(name) << 4 | len(dims)) or _chunk(len(name), len(dims))
        buf += b"\0" * ((4 - len(buf)) & 7)
        pos = len(buf)
        buf += chunk.body.pack(
            pos - vt, d["uid"], d["alignment"], 16, chunk.strides_at - 24, chunk.dims_at - 28,
            d["data_type"], d["is_virtual"], d["is_pass_by_value"], len(name), name,
            len(strides), *strides, len(dims), *dims,
        )  # fmt: skip
        link(buf, field, pos - field)


def _write_value_chunk(
    w: _Writer, field: int, d: dict[str, Any], dims: list[int], strides: list[int]
) -> None:
    """Write a tensor holding a value as one value chunk (see :mod:`.fb_layout`)."""
    kind, _, value = _value_kind(d["value"])
    name = d["name"].encode()
    chunk = _value_chunk(len(name), len(dims), kind)
    vt = w.vtable(_VALUE_TENSOR_VTABLE)
    buf = w.buf
    buf += b"\0" * ((4 - len(buf)) & 7)
    pos = len(buf)
    buf += chunk.body.pack(
        pos - vt, d["uid"], d["alignment"], 20, chunk.strides_at - 24, chunk.dims_at - 28,
        chunk.value_at - 32, d["data_type"], d["is_virtual"], kind, d["is_pass_by_value"],
        len(name), name, len(strides), *strides, len(dims), *dims,
        6, chunk.value_size, 4, 12, value,
    )  # fmt: skip
    _U32.pack_into(buf, field, pos - field)


def _value_kind(value: Any) -> tuple[int, str, Any]:
    """(union kind, struct code, value) of a tensor's value; any NaN becomes the canonical one,
    as JSON would write it."""
    if value is True or value is False:
        return _BOOL, "?", value
    if isinstance(value, int):
        return _INT64, "q", value
    return _FLOAT64, "d", math.nan if value != value else value


def _write_tensor(
    w: _Writer, slot_field: int, d: dict[str, Any], dims: list[int], strides: list[int]
) -> None:
    """Write one tensor field by field: the general path, for tensors whose dims and strides
    differ in length (records built without checks), which the fixed chunks cannot hold."""
    value = d["value"]
    if value is None:
        pos, f_name, f_strides, f_dims = w.table(
            ((0, "q"), (1, "O"), (2, "b"), (3, "O"), (4, "O"), (5, "?"), (8, "?"), (10, "q")),
            (d["uid"], 0, d["data_type"], 0, 0, d["is_virtual"], d["is_pass_by_value"],
             d["alignment"]),
        )  # fmt: skip
    else:
        kind, code, value = _value_kind(value)
        pos, f_name, f_strides, f_dims, f_value = w.table(
            ((0, "q"), (1, "O"), (2, "b"), (3, "O"), (4, "O"), (5, "?"), (6, "B"), (7, "O"),
             (8, "?"), (10, "q")),
            (d["uid"], 0, d["data_type"], 0, 0, d["is_virtual"], kind, 0, d["is_pass_by_value"],
             d["alignment"]),
        )  # fmt: skip
        w.link(f_value, w.table(((0, code),), (value,))[0])
    w.link(slot_field, pos)
    w.string(f_name, d["name"])
    w.longs(f_strides, strides)
    w.longs(f_dims, dims)


def _write_node(w: _Writer, slot_field: int, node: NodeRecord) -> None:
    d = node.__dict__
    attrs = d["attributes"].__dict__
    kind = _SDPA_BWD if attrs["type"] == "SDPA_BWD" else _SDPA_FWD
    pos, f_name, f_attrs = w.table(
        ((0, "O"), (1, "b"), (2, "B"), (3, "O")), (0, d["compute_data_type"], kind, 0)
    )
    w.link(slot_field, pos)
    w.string(f_name, d["name"])
    values = _ATTR_GETTERS[kind](attrs)
    absent = tuple(map(is_, values, repeat(None)))  # optional fields that are None are left out
    entry = _NODE_SIGS.get((kind, absent))
    if entry is None:
        entry = _node_signature(kind, absent)
    sig, pick, doubles = entry
    present = list(pick(values))
    for i in doubles:  # any NaN is written as the canonical one, as JSON would
        if present[i] != present[i]:
            present[i] = math.nan
    w.link(f_attrs, w.table(sig, present)[0])


_ATTR_GETTERS = {kind: itemgetter(*(f[0] for f in fields)) for kind, (_, fields) in _ATTRS.items()}
_NODE_SIGS: dict[tuple[int, tuple[bool, ...]], Any] = {}


def _node_signature(kind: int, absent: tuple[bool, ...]) -> Any:
    """The table signature, value picker and double positions for one set of present fields."""
    fields = _ATTRS[kind][1]
    keep = [
        i for i, (_, _, _, default) in enumerate(fields) if not absent[i] or default is not None
    ]
    sig = tuple((fields[i][1], fields[i][2]) for i in keep)
    getter = itemgetter(*keep)
    pick = getter if len(keep) > 1 else (lambda v: (getter(v),))
    doubles = tuple(k for k, i in enumerate(keep) if fields[i][2] == "d")
    entry = (sig, pick, doubles)
    if len(_NODE_SIGS) < 1024:
        _NODE_SIGS[(kind, absent)] = entry
    return entry


def encode(rec: GraphRecord) -> bytes:
    """Serialize a record to FlatBuffers bytes (deterministic).

    Args:
        rec: A valid graph record.

    Returns:
        The bytes: root offset, ``HDGR``, then the graph.
    """
    return encode_fields(rec.__dict__)


def encode_fields(d: dict[str, Any], dims_key: str = "dims", strides_key: str = "strides") -> bytes:
    """:func:`encode` of a graph record's fields ``d``, whose tensors may be other objects.

    Args:
        d: A valid graph record's fields. ``d["tensors"]`` holds objects whose ``__dict__`` has a
            tensor record's fields, except that dims and strides may be stored under other keys
            (``Graph.serialize`` writes the frontend's tensors directly).
        dims_key: The key of the dims in each tensor's ``__dict__``.
        strides_key: The key of the strides.

    Returns:
        The bytes, equal to those of the record.
    """
    w = _Writer()
    tensors, nodes, engine = d["tensors"], d["nodes"], d["preferred_engine_id"]
    sig: tuple[tuple[int, str], ...] = (
        (0, "O"), (1, "b"), (2, "b"), (3, "b"), (4, "O"), (5, "O"), (10, "I"),
    )  # fmt: skip
    values = [0, d["compute_data_type"], d["intermediate_data_type"], d["io_data_type"], 0, 0,
              FORMAT_VERSION]  # fmt: skip
    if engine is not None:
        sig += ((6, "q"),)
        values.append(engine)
    pos, f_name, f_tensors, f_nodes = w.table(sig, values)
    _U32.pack_into(w.buf, 0, pos)
    w.buf[4:8] = FILE_IDENTIFIER
    w.string(f_name, d["name"])
    _write_tensors(w, w.offsets(f_tensors, len(tensors)), tensors, dims_key, strides_key)
    first = w.offsets(f_nodes, len(nodes))
    for i, node in enumerate(nodes):
        _write_node(w, first + 4 * i, node)
    return bytes(w.buf)

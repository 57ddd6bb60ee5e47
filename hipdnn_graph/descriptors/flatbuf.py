"""FlatBuffers encoding of :class:`~.records.GraphRecord`, by hand, fast and defensive.

The layout is the one ``schema/graph.fbs`` describes (identifier ``HDGR``); the code generated from
that schema by ``flatc`` (package ``fbs``) reads what :func:`encode` writes and :func:`decode` reads
what its builders write (both checked by the tests). This module does not use the generated code:
the ``flatbuffers`` runtime costs about a microsecond per field, too slow for the lowering path.

Writer: objects are laid out front to back (root table first, children after their parent, so
every ``uoffset`` points forward), every non-optional field is written even when it equals its
default, vtables are shared between tables of equal layout, scalars are aligned to their size. The
output is therefore a deterministic function of the record.

Reader: every position, length and offset is checked against the buffer before it is used, so a
malformed buffer raises :class:`~hipdnn_graph.errors.HipdnnError` and nothing else:
UNSUPPORTED_GRAPH_FORMAT for structure (bad identifier, version, offset, length, vtable),
INVALID_VALUE for content (unknown enum value, rank above the limit, bad UTF-8, and the record rules
of :func:`~.records.check_graph_record`). Nesting is fixed (graph → tensor/node → value/attributes),
so there is no recursion; a vector's claimed length is checked against the bytes that are really
there before anything is allocated; a string referenced many times is decoded once.

Example:
    >>> from hipdnn_graph.descriptors.records import GraphRecord
    >>> blob = encode(GraphRecord(name="g"))
    >>> blob[4:8], decode(blob).name
    (b'HDGR', 'g')
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from pydantic import BaseModel

from ..errors import HipdnnError
from ..types import DataType, DiagonalAlignment, ErrorCode
from .records import (
    FORMAT_VERSION,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_RANK,
    MAX_TENSORS,
    GraphRecord,
    NodeRecord,
    SdpaBwdRecord,
    SdpaFwdRecord,
    TensorRecord,
    check_graph_record,
)

__all__ = ["FILE_IDENTIFIER", "decode", "encode"]

#: The four bytes after the root offset of every serialized graph.
FILE_IDENTIFIER = b"HDGR"

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_HH = struct.Struct("<HH")
_SIZES = {"q": 8, "d": 8, "O": 4, "I": 4, "i": 4, "f": 4, "b": 1, "B": 1, "?": 1}

# Union type ids (graph.fbs keeps hipDNN's numbering).
_SDPA_FWD, _SDPA_BWD = 12, 15
_FLOAT32, _FLOAT16, _BFLOAT16, _FLOAT8, _INT32, _FLOAT64, _INT64, _BOOL = range(1, 9)

# ------------------------------------------------------------------------------------------------
# Table specs: (slot, struct code, default) per field; "O" is a uoffset to a child object.
# ------------------------------------------------------------------------------------------------

_Spec = tuple[tuple[int, str, Any], ...]

_GRAPH: _Spec = (
    (0, "O", 0), (1, "b", 0), (2, "b", 0), (3, "b", 0), (4, "O", 0), (5, "O", 0),
    (6, "q", None), (10, "I", 0),
)  # fmt: skip
_TENSOR: _Spec = (
    (0, "q", 0), (1, "O", 0), (2, "b", 0), (3, "O", 0), (4, "O", 0), (5, "?", False),
    (6, "B", 0), (7, "O", 0), (8, "?", False), (10, "q", 16),
)  # fmt: skip
_NODE: _Spec = ((0, "O", 0), (1, "b", 0), (2, "B", 0), (3, "O", 0))

# Record field → (slot, code, default); uids, then flags, scalars and the alignment.
_BWD_FIELDS: tuple[tuple[str, int, str, Any], ...] = (
    *((f, i, "q", 0) for i, f in enumerate(SdpaBwdRecord.REQUIRED_UIDS)),
    ("attn_scale", 9, "q", None), ("bias", 10, "q", None), ("seq_len_q", 11, "q", None),
    ("seq_len_kv", 12, "q", None), ("seed", 13, "q", None), ("offset", 14, "q", None),
    ("dropout_mask", 15, "q", None), ("dropout_scale", 16, "q", None),
    ("dropout_scale_inv", 17, "q", None), ("dbias", 18, "q", None),
    ("alibi_mask", 19, "?", False), ("padding_mask", 20, "?", False),
    ("causal_mask", 21, "?", False), ("causal_mask_bottom_right", 22, "?", False),
    ("dropout_probability", 23, "d", None), ("attn_scale_value", 24, "d", None),
    ("left_bound", 25, "q", None), ("right_bound", 26, "q", None),
    ("diagonal_alignment", 27, "b", 0),
)  # fmt: skip
_FWD_FIELDS: tuple[tuple[str, int, str, Any], ...] = (
    ("q", 0, "q", 0), ("k", 1, "q", 0), ("v", 2, "q", 0), ("o", 3, "q", 0),
    ("stats", 22, "q", None), ("attn_scale", 5, "q", None), ("bias", 4, "q", None),
    ("seq_len_q", 6, "q", None), ("seq_len_kv", 7, "q", None), ("seed", 8, "q", None),
    ("offset", 9, "q", None), ("dropout_mask", 10, "q", None), ("dropout_scale", 11, "q", None),
    ("generate_stats", 28, "?", None),
    ("alibi_mask", 29, "?", False), ("padding_mask", 30, "?", False),
    ("causal_mask", 31, "?", False), ("causal_mask_bottom_right", 32, "?", False),
    ("dropout_probability", 33, "d", None), ("attn_scale_value", 34, "d", None),
    ("left_bound", 35, "q", None), ("right_bound", 36, "q", None),
    ("diagonal_alignment", 38, "b", 0),
)  # fmt: skip
_ATTRS: dict[int, tuple[type[SdpaBwdRecord] | type[SdpaFwdRecord], Any]] = {
    _SDPA_BWD: (SdpaBwdRecord, _BWD_FIELDS),
    _SDPA_FWD: (SdpaFwdRecord, _FWD_FIELDS),
}
_ATTR_SPECS: dict[int, _Spec] = {
    k: tuple((slot, code, dflt) for _, slot, code, dflt in fields)
    for k, (_, fields) in _ATTRS.items()
}
_ATTR_NAMES = {k: tuple(f[0] for f in fields) for k, (_, fields) in _ATTRS.items()}
for _cls, _fields in _ATTRS.values():  # the reader builds __dict__ in this order
    assert ("type", *(f[0] for f in _fields)) == tuple(_cls.model_fields)
_VALUE_SPECS: dict[int, tuple[_Spec, Callable[[Any], Any]]] = {
    _FLOAT32: (((0, "f", 0.0),), float),
    _FLOAT16: (((0, "f", 0.0),), float),
    _BFLOAT16: (((0, "f", 0.0),), float),
    _INT32: (((0, "i", 0),), int),
    _FLOAT64: (((0, "d", 0.0),), float),
    _INT64: (((0, "q", 0),), int),
    _BOOL: (((0, "?", False),), bool),
}

# ------------------------------------------------------------------------------------------------
# Writer
# ------------------------------------------------------------------------------------------------


class _Layout(NamedTuple):
    vtable: bytes
    body: struct.Struct  # soffset + fields, largest first (no padding needed)
    reorder: Callable[[Sequence[Any]], tuple[Any, ...]]
    offsets: tuple[int, ...]  # table-relative positions of the "O" fields, in input order


_LAYOUTS: dict[tuple[tuple[int, str], ...], _Layout] = {}


def _layout(sig: tuple[tuple[int, str], ...]) -> _Layout:
    order = sorted(range(len(sig)), key=lambda i: -_SIZES[sig[i][1]])
    slots = [0] * (max(slot for slot, _ in sig) + 1)
    rel, pos = {}, 4
    for i in order:
        slot, code = sig[i]
        slots[slot] = rel[i] = pos
        pos += _SIZES[code]
    vtable = struct.pack(f"<HH{len(slots)}H", 4 + 2 * len(slots), pos, *slots)
    body = struct.Struct("<i" + "".join(sig[i][1] for i in order).replace("O", "I"))
    getter = itemgetter(*order)
    reorder = getter if len(order) > 1 else (lambda v: (getter(v),))
    offsets = tuple(rel[i] for i, (_, code) in enumerate(sig) if code == "O")
    return _Layout(vtable, body, reorder, offsets)


# A tensor without a value is written as one contiguous "chunk" (table, name, strides, dims) whose
# inner offsets depend only on the name's byte length and the rank; one struct packs or unpacks it.
# Table: soffset, uid, alignment, name, strides, dims (uoffsets), data_type, virtual, pass_by_value.
_TENSOR_VTABLE = struct.pack("<13H", 26, 35, 4, 20, 32, 24, 28, 33, 0, 0, 34, 0, 12)


class _Chunk(NamedTuple):
    body: struct.Struct
    strides_at: int  # chunk-relative position of the strides vector
    dims_at: int


_CHUNKS: dict[tuple[int, int], _Chunk] = {}


def _chunk(name_bytes: int, rank: int) -> _Chunk:
    chunk = _CHUNKS.get((name_bytes, rank))
    if chunk is None:
        strides_at = (48 + name_bytes) & ~7  # 8-aligned (chunk starts at 4 mod 8)
        dims_at = strides_at + 8 + 8 * rank
        fmt = f"<iqqIIIb??xI{name_bytes}s{strides_at - 40 - name_bytes}xI{rank}q4xI{rank}q4x"
        chunk = _Chunk(struct.Struct(fmt), strides_at, dims_at)
        if len(_CHUNKS) < 4096:
            _CHUNKS[(name_bytes, rank)] = chunk
    return chunk


class _Writer:
    __slots__ = ("buf", "vtables")

    def __init__(self) -> None:
        self.buf = bytearray(8)
        self.vtables: dict[bytes, int] = {}

    def table(self, sig: tuple[tuple[int, str], ...], values: Sequence[Any]) -> tuple[int, ...]:
        """Append a table; return its position followed by its offset fields' positions."""
        lay = _LAYOUTS.get(sig)
        if lay is None:
            lay = _LAYOUTS[sig] = _layout(sig)
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


def _write_tensors(w: _Writer, first: int, tensors: Sequence[TensorRecord]) -> None:
    """Write the tensors; ``first`` is the position of the vector's first element."""
    vt = w.vtable(_TENSOR_VTABLE)
    buf, chunks, link = w.buf, _CHUNKS, _U32.pack_into
    for field in range(first, first + 4 * len(tensors), 4):
        d = tensors[(field - first) >> 2].__dict__
        dims, strides = d["dims"], d["strides"]
        if d["value"] is not None or len(dims) != len(strides):
            _write_tensor(w, field, d)
            continue
        name = d["name"].encode()
        chunk = chunks.get((len(name), len(dims))) or _chunk(len(name), len(dims))
        buf += b"\0" * ((4 - len(buf)) & 7)
        pos = len(buf)
        buf += chunk.body.pack(
            pos - vt, d["uid"], d["alignment"], 16, chunk.strides_at - 24, chunk.dims_at - 28,
            d["data_type"], d["is_virtual"], d["is_pass_by_value"], len(name), name,
            len(strides), *strides, len(dims), *dims,
        )  # fmt: skip
        link(buf, field, pos - field)


def _write_tensor(w: _Writer, slot_field: int, d: dict[str, Any]) -> None:
    """Write one tensor field by field (tensors holding a value)."""
    value = d["value"]
    if value is None:
        pos, f_name, f_strides, f_dims = w.table(
            ((0, "q"), (1, "O"), (2, "b"), (3, "O"), (4, "O"), (5, "?"), (8, "?"), (10, "q")),
            (d["uid"], 0, d["data_type"], 0, 0, d["is_virtual"], d["is_pass_by_value"],
             d["alignment"]),
        )  # fmt: skip
    else:
        kind, code = (
            (_BOOL, "?")
            if value is True or value is False
            else ((_INT64, "q") if isinstance(value, int) else (_FLOAT64, "d"))
        )
        pos, f_name, f_strides, f_dims, f_value = w.table(
            ((0, "q"), (1, "O"), (2, "b"), (3, "O"), (4, "O"), (5, "?"), (6, "B"), (7, "O"),
             (8, "?"), (10, "q")),
            (d["uid"], 0, d["data_type"], 0, 0, d["is_virtual"], kind, 0, d["is_pass_by_value"],
             d["alignment"]),
        )  # fmt: skip
        if value != value:  # any NaN is written as the canonical one, as JSON would
            value = math.nan
        w.link(f_value, w.table(((0, code),), (value,))[0])
    w.link(slot_field, pos)
    w.string(f_name, d["name"])
    w.longs(f_strides, d["strides"])
    w.longs(f_dims, d["dims"])


def _write_node(w: _Writer, slot_field: int, node: NodeRecord) -> None:
    d = node.__dict__
    attrs = d["attributes"].__dict__
    kind = _SDPA_BWD if attrs["type"] == "SDPA_BWD" else _SDPA_FWD
    pos, f_name, f_attrs = w.table(
        ((0, "O"), (1, "b"), (2, "B"), (3, "O")), (0, d["compute_data_type"], kind, 0)
    )
    w.link(slot_field, pos)
    w.string(f_name, d["name"])
    sig, values = [], []
    for field, slot, code, default in _ATTRS[kind][1]:
        value = attrs[field]
        if value != value:
            value = math.nan
        if value is not None or default is not None:
            sig.append((slot, code))
            values.append(value)
    w.link(f_attrs, w.table(tuple(sig), values)[0])


def encode(rec: GraphRecord) -> bytes:
    """Serialize a record to FlatBuffers bytes (deterministic).

    Args:
        rec: A valid graph record.

    Returns:
        The bytes: root offset, ``HDGR``, then the graph.
    """
    w = _Writer()
    d = rec.__dict__
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
    _write_tensors(w, w.offsets(f_tensors, len(tensors)), tensors)
    first = w.offsets(f_nodes, len(nodes))
    for i, node in enumerate(nodes):
        _write_node(w, first + 4 * i, node)
    return bytes(w.buf)


# ------------------------------------------------------------------------------------------------
# Reader
# ------------------------------------------------------------------------------------------------


def _malformed(what: str) -> HipdnnError:
    return HipdnnError(ErrorCode.UNSUPPORTED_GRAPH_FORMAT, f"Malformed serialized graph: {what}")


def _invalid(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


class _Plan(NamedTuple):
    """How to read one spec from tables sharing one vtable."""

    body: struct.Struct | None  # reads the present fields in offset order, from `start`
    start: int
    pick: Callable[[tuple[Any, ...]], tuple[Any, ...]]  # (read + defaults) → spec order
    rel: tuple[int, ...]  # table-relative position of each spec field (0: absent)
    defaults: tuple[Any, ...]


_PLANS: dict[tuple[int, bytes], _Plan] = {}
_PLAN_CACHE_LIMIT = 512


def _plan(spec: _Spec, offs: Sequence[int], tsize: int) -> _Plan:
    present = []
    rel = []
    for i, (slot, code, _) in enumerate(spec):
        off = offs[slot] if slot < len(offs) else 0
        if off:
            if off < 4 or off + _SIZES[code] > tsize:
                raise _malformed("field outside its table")
            present.append((off, i, code))
        rel.append(off)
    present.sort()
    fmt, end = "<", present[0][0] if present else 4
    for off, _, code in present:
        if off < end:
            raise _malformed("overlapping table fields")
        fmt += "x" * (off - end) + ("I" if code == "O" else code)
        end = off + _SIZES[code]
    index = {i: k for k, (_, i, _) in enumerate(present)}
    n = len(present)
    picks = [index[i] if i in index else n + i for i in range(len(spec))]
    getter = itemgetter(*picks)
    pick = getter if len(picks) > 1 else (lambda v: (getter(v),))
    body = struct.Struct(fmt) if present else None
    defaults = tuple(d for _, _, d in spec)
    return _Plan(body, present[0][0] if present else 4, pick, tuple(rel), defaults)


def _read(
    buf: bytes, n: int, pos: int, spec: _Spec, spec_id: int
) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """Read table ``pos``: its field values in spec order and their table-relative positions."""
    if pos + 4 > n:
        raise _malformed("table out of bounds")
    vt = pos - _I32.unpack_from(buf, pos)[0]
    if vt < 0 or vt + 4 > n:
        raise _malformed("vtable out of bounds")
    vtsize, tsize = _HH.unpack_from(buf, vt)
    if vtsize < 4 or vtsize & 1 or vt + vtsize > n or tsize < 4 or pos + tsize > n:
        raise _malformed("bad vtable")
    key = (spec_id, buf[vt + 2 : vt + vtsize])
    plan = _PLANS.get(key)
    if plan is None:
        offs = struct.unpack_from(f"<{(vtsize - 4) >> 1}H", buf, vt + 4)
        plan = _plan(spec, offs, tsize)
        if len(_PLANS) < _PLAN_CACHE_LIMIT:
            _PLANS[key] = plan
    if plan.body is None:
        return plan.defaults, plan.rel
    return plan.pick(plan.body.unpack_from(buf, pos + plan.start) + plan.defaults), plan.rel


def _target(buf: bytes, n: int, field: int, uoffset: int) -> int:
    target = field + uoffset
    if uoffset == 0 or target + 4 > n:
        raise _malformed("offset out of bounds")
    return target


class _Strings:
    """Decodes strings, each position once."""

    __slots__ = ("buf", "memo", "n")

    def __init__(self, buf: bytes, n: int) -> None:
        self.buf, self.n = buf, n
        self.memo: dict[int, str] = {}

    def get(self, field: int, uoffset: int, what: str) -> str:
        if uoffset == 0:
            return ""
        pos = _target(self.buf, self.n, field, uoffset)
        text: str | None = self.memo.get(pos)
        if text is None:
            size = _U32.unpack_from(self.buf, pos)[0]
            if pos + 4 + size >= self.n:
                raise _malformed(f"{what} out of bounds")
            if size > 4 * MAX_NAME_LENGTH:
                raise _invalid(f"{what} is longer than {MAX_NAME_LENGTH} characters")
            try:
                text = self.memo[pos] = self.buf[pos + 4 : pos + 4 + size].decode()
            except UnicodeDecodeError:
                raise _invalid(f"{what} is not valid UTF-8") from None
        return text


_LONGS = [struct.Struct(f"<{k}q") for k in range(MAX_RANK + 1)]


def _longs(buf: bytes, n: int, field: int, uoffset: int, what: str) -> list[int]:
    if uoffset == 0:
        return []
    pos = _target(buf, n, field, uoffset)
    size = _U32.unpack_from(buf, pos)[0]
    if pos + 4 + 8 * size > n:
        raise _malformed(f"{what} out of bounds")
    if size > MAX_RANK:
        raise _invalid(f"{what} has {size} entries, more than {MAX_RANK}")
    return list(_LONGS[size].unpack_from(buf, pos + 4))


def _tables(buf: bytes, n: int, field: int, uoffset: int, cap: int, what: str) -> list[int]:
    if uoffset == 0:
        return []
    pos = _target(buf, n, field, uoffset)
    size = _U32.unpack_from(buf, pos)[0]
    if pos + 4 + 4 * size > n:
        raise _malformed(f"{what} vector out of bounds")
    if size > cap:
        raise _invalid(f"Graph has {size} {what}, more than {cap}")
    first = pos + 4
    return [first + 4 * i + u for i, u in enumerate(struct.unpack_from(f"<{size}I", buf, first))]


_DATA_TYPES = {m.value: m for m in DataType}
_ALIGNMENTS = {m.value: m for m in DiagonalAlignment}

_set_dict, _set_fields, _set_extra, _set_private = (
    BaseModel.__dict__[name].__set__
    for name in (
        "__dict__",
        "__pydantic_fields_set__",
        "__pydantic_extra__",
        "__pydantic_private__",
    )
)
_object_new = object.__new__


def _new(cls: type[Any], fields: frozenset[str], values: dict[str, Any]) -> Any:
    """Build a record from already checked values, skipping pydantic validation.

    This is what ``model_construct`` does, minus its per-field loop: a record's state is exactly
    its ``__dict__``, its fields-set and two ``None`` slots.
    """
    obj = _object_new(cls)
    _set_dict(obj, values)
    _set_fields(obj, fields)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


_FIELDS = {
    cls: frozenset(cls.model_fields)
    for cls in (GraphRecord, TensorRecord, NodeRecord, SdpaBwdRecord, SdpaFwdRecord)
}
_TENSOR_FIELDS = _FIELDS[TensorRecord]


def _data_type(value: int, where: str) -> DataType:
    member = _DATA_TYPES.get(value)
    if member is None:
        raise _invalid(f"Unknown DataType value {value} in {where}")
    return member


def _read_chunk(buf: bytes, n: int, pos: int) -> TensorRecord | None:
    """Read a tensor written as one chunk (the vtable was checked); None if it is not one."""
    if pos + 44 > n:
        return None
    name_bytes = _U32.unpack_from(buf, pos + 36)[0]
    strides_at = (48 + name_bytes) & ~7
    if name_bytes > 4 * MAX_NAME_LENGTH or pos + strides_at + 4 > n:
        return None
    rank = _U32.unpack_from(buf, pos + strides_at)[0]
    if rank > MAX_RANK or pos + strides_at + 16 + 16 * rank > n:
        return None
    chunk = _CHUNKS.get((name_bytes, rank)) or _chunk(name_bytes, rank)
    v = chunk.body.unpack_from(buf, pos)
    data_type = _DATA_TYPES.get(v[6])
    if (
        v[3] != 16
        or v[4] != strides_at - 24
        or v[5] != chunk.dims_at - 28
        or v[12 + rank] != rank
        or data_type is None
    ):
        return None
    try:
        name = v[10].decode()
    except UnicodeDecodeError:
        return None
    obj = _object_new(TensorRecord)
    _set_dict(
        obj,
        {
            "uid": v[1],
            "name": name,
            "data_type": data_type,
            "dims": list(v[13 + rank :]),
            "strides": list(v[12 : 12 + rank]),
            "is_virtual": v[7],
            "is_pass_by_value": v[8],
            "value": None,
            "alignment": v[2],
        },
    )
    _set_fields(obj, _TENSOR_FIELDS)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def _read_tensor(buf: bytes, n: int, pos: int, strings: _Strings) -> TensorRecord:
    (uid, name_o, dtype, strides_o, dims_o, virtual, vtype, value_o, pbv, align), rel = _read(
        buf, n, pos, _TENSOR, 1
    )
    name = strings.get(pos + rel[1], name_o, "Tensor name")
    value: Any = None
    if vtype:
        spec_conv = _VALUE_SPECS.get(vtype)
        if spec_conv is None:
            raise _invalid(f"Tensor {name} has an unsupported value type {vtype}")
        vpos = _target(buf, n, pos + rel[7], value_o)
        value = spec_conv[1](_read(buf, n, vpos, spec_conv[0], 100 + vtype)[0][0])
    values = {
        "uid": uid,
        "name": name,
        "data_type": _data_type(dtype, f"tensor {name}"),
        "dims": _longs(buf, n, pos + rel[4], dims_o, f"Tensor {name} dims"),
        "strides": _longs(buf, n, pos + rel[3], strides_o, f"Tensor {name} strides"),
        "is_virtual": virtual,
        "is_pass_by_value": pbv,
        "value": value,
        "alignment": align,
    }
    return _new(TensorRecord, _FIELDS[TensorRecord], values)  # type: ignore[no-any-return]


def _read_node(buf: bytes, n: int, pos: int, strings: _Strings) -> NodeRecord:
    (name_o, ctype, kind, attrs_o), rel = _read(buf, n, pos, _NODE, 2)
    name = strings.get(pos + rel[0], name_o, "Node name")
    entry = _ATTRS.get(kind)
    if entry is None:
        raise _invalid(f"Node {name} has unsupported attributes type {kind}")
    cls = entry[0]
    apos = _target(buf, n, pos + rel[3], attrs_o)
    raw, _ = _read(buf, n, apos, _ATTR_SPECS[kind], 10 + kind)
    # keys in field order: pydantic serializes a record's __dict__ in its order
    values: dict[str, Any] = {"type": "SDPA_BWD" if kind == _SDPA_BWD else "SDPA_FWD"}
    values.update(zip(_ATTR_NAMES[kind], raw, strict=True))
    alignment = _ALIGNMENTS.get(values["diagonal_alignment"])
    if alignment is None:
        raise _invalid(f"Unknown DiagonalAlignment value {values['diagonal_alignment']}")
    values["diagonal_alignment"] = alignment
    node = {
        "name": name,
        "compute_data_type": _data_type(ctype, f"node {name}"),
        "attributes": _new(cls, _FIELDS[cls], values),
    }
    return _new(NodeRecord, _FIELDS[NodeRecord], node)  # type: ignore[no-any-return]


def _read_tensors(buf: bytes, n: int, positions: list[int], strings: _Strings) -> list[Any]:
    """Read the tensors: as chunks where they are, through their vtables otherwise."""
    out = []
    chunked: dict[int, bool] = {}  # vtable position → is it the chunk vtable?
    for pos in positions:
        tensor = None
        if pos + 4 <= n:
            vt = pos - _I32.unpack_from(buf, pos)[0]
            is_chunk = chunked.get(vt)
            if is_chunk is None:
                is_chunk = chunked[vt] = vt >= 0 and buf[vt : vt + 26] == _TENSOR_VTABLE
            if is_chunk:
                tensor = _read_chunk(buf, n, pos)
        out.append(tensor if tensor is not None else _read_tensor(buf, n, pos, strings))
    return out


def decode(data: bytes) -> GraphRecord:
    """Parse bytes written by :func:`encode` (or any writer of ``graph.fbs``).

    Args:
        data: The serialized graph (the caller caps its size).

    Returns:
        The record, checked by :func:`~.records.check_graph_record`.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT or INVALID_VALUE (see the module docstring).
    """
    buf, n = data, len(data)
    if n < 12 or buf[4:8] != FILE_IDENTIFIER:
        raise HipdnnError(
            ErrorCode.UNSUPPORTED_GRAPH_FORMAT,
            "Not a serialized hipdnn-graph graph (file identifier 'HDGR' missing)",
        )
    root = _U32.unpack_from(buf, 0)[0]
    (name_o, cdt, idt, iodt, tensors_o, nodes_o, engine, version), rel = _read(
        buf, n, root, _GRAPH, 0
    )
    if version != FORMAT_VERSION:
        raise HipdnnError(
            ErrorCode.UNSUPPORTED_GRAPH_FORMAT,
            f"Unsupported graph format version {version} (this library reads {FORMAT_VERSION})",
        )
    strings = _Strings(buf, n)
    tensor_pos = _tables(buf, n, root + rel[4], tensors_o, MAX_TENSORS, "tensors")
    node_pos = _tables(buf, n, root + rel[5], nodes_o, MAX_NODES, "nodes")
    values = {
        "format_version": version,
        "name": strings.get(root + rel[0], name_o, "Graph name"),
        "compute_data_type": _data_type(cdt, "the graph"),
        "intermediate_data_type": _data_type(idt, "the graph"),
        "io_data_type": _data_type(iodt, "the graph"),
        "preferred_engine_id": engine,
        "tensors": _read_tensors(buf, n, tensor_pos, strings),
        "nodes": [_read_node(buf, n, p, strings) for p in node_pos],
    }
    rec: GraphRecord = _new(GraphRecord, _FIELDS[GraphRecord], values)
    check_graph_record(rec)
    return rec

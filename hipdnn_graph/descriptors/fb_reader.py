"""FlatBuffers reader for :class:`~.records.GraphRecord` (see :mod:`.flatbuf` for the format).

Every position, length and offset is checked against the buffer before it is used: structure
errors raise UNSUPPORTED_GRAPH_FORMAT, content errors INVALID_VALUE (then the record rules of
:func:`~.records.check_graph_record` apply). Nesting is fixed, so there is no recursion; a vector's
claimed length is checked against the bytes really present before anything is allocated; a string
referenced many times is decoded once. Tensors the writer laid out as chunks are read in one
``struct`` call each (bounds of these fast paths are enforced by ``struct`` itself: a chunk that
does not fit is read again by the slow path, which reports it); anything else (e.g. buffers built
by the ``flatbuffers`` runtime) is read field by field through its vtable.

:func:`decode_parts` returns a record's fields and can build other objects than
:class:`~.records.TensorRecord` for the tensors (a :class:`TensorTarget`): ``Graph.deserialize``
has it build the frontend's tensors directly. The same record rules apply either way.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from operator import add, itemgetter
from typing import Any, NamedTuple

from ..errors import HipdnnError
from ..types import DataType, DiagonalAlignment, ErrorCode
from .fb_layout import (
    _ATTR_NAMES,
    _ATTR_SPECS,
    _ATTRS,
    _CHUNKS,
    _GRAPH,
    _HH,
    _I32,
    _NODE,
    _SDPA_BWD,
    _SIZES,
    _TENSOR,
    _TENSOR_VTABLE,
    _U32,
    _VALUE_CODES,
    _VALUE_SPECS,
    _VALUE_TENSOR_VTABLE,
    FILE_IDENTIFIER,
    _chunk,
    _Spec,
    _value_chunk,
)
from .record_checks import (
    FORMAT_VERSION,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_RANK,
    MAX_TENSORS,
    _object_new,
    _set_dict,
    _set_extra,
    _set_fields,
    _set_private,
    check_graph_parts,
    new_trusted,
)
from .records import (
    RECORD_FIELDS,
    GraphRecord,
    NodeRecord,
    TensorRecord,
)

__all__ = ["RECORDS", "TensorTarget", "decode", "decode_parts"]


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
    offsets = struct.unpack_from(f"<{size}I", buf, first)
    return list(map(add, range(first, first + 4 * size, 4), offsets))


_DATA_TYPES = {m.value: m for m in DataType}
_ALIGNMENTS = {m.value: m for m in DiagonalAlignment}


_TENSOR_FIELDS = RECORD_FIELDS[TensorRecord]


def _data_type(value: int, where: str) -> DataType:
    member = _DATA_TYPES.get(value)
    if member is None:
        raise _invalid(f"Unknown DataType value {value} in {where}")
    return member


def _read_tensor(buf: bytes, n: int, pos: int, strings: _Strings) -> dict[str, Any]:
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
    return values


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
        "attributes": new_trusted(cls, values, RECORD_FIELDS[cls]),
    }
    return new_trusted(NodeRecord, node, RECORD_FIELDS[NodeRecord])


def _read_value_chunk(buf: bytes, n: int, pos: int, keys: tuple[str, ...]) -> dict[str, Any] | None:
    """Read a tensor laid out as a value chunk (its vtable was checked) into a dict keyed by
    ``keys`` (the tensor record's fields, in order); None if it is not one."""
    if pos + 48 > n:
        return None
    name_bytes = _U32.unpack_from(buf, pos + 40)[0]
    strides_at = (52 + name_bytes) & ~7
    if name_bytes > 4 * MAX_NAME_LENGTH or pos + strides_at + 4 > n:
        return None
    rank = _U32.unpack_from(buf, pos + strides_at)[0]
    kind = buf[pos + 38]
    if rank > MAX_RANK or kind not in _VALUE_CODES:
        return None
    chunk = _value_chunk(name_bytes, rank, kind)
    if pos + chunk.body.size > n:
        return None
    v = chunk.body.unpack_from(buf, pos)
    data_type = _DATA_TYPES.get(v[7])
    tail = v[14 + rank :]  # rank, dims..., then the value vtable and table
    if (
        v[3] != 20
        or v[4] != strides_at - 24
        or v[5] != chunk.dims_at - 28
        or v[6] != chunk.value_at - 32
        or tail[0] != rank
        or tail[rank + 1 :] != (6, chunk.value_size, 4, 12, tail[-1])
        or data_type is None
        or not v[12].isascii()
    ):
        return None
    k_uid, k_name, k_type, k_dims, k_strides, k_virtual, k_pbv, k_value, k_align = keys
    return {
        k_uid: v[1],
        k_name: v[12].decode(),
        k_type: data_type,
        k_dims: list(tail[1 : rank + 1]),
        k_strides: list(v[14 : 14 + rank]),
        k_virtual: v[8],
        k_pbv: v[10],
        k_value: tail[-1],
        k_align: v[2],
    }


class TensorTarget(NamedTuple):
    """What the reader builds for each tensor: a pydantic model of class ``cls`` whose ``__dict__``
    holds a tensor record's nine fields, in record order, under ``keys``."""

    cls: type[Any]
    keys: tuple[str, ...]
    fields: frozenset[str]
    #: give each object its own (mutable) fields-set instead of sharing ``fields``
    own_fields: bool


#: Build :class:`TensorRecord` objects (what :func:`decode` returns).
RECORDS = TensorTarget(TensorRecord, tuple(TensorRecord.model_fields), _TENSOR_FIELDS, False)


_HEAD = struct.Struct("<i32xI")  # a table's soffset; for a chunk, the name's byte length


def _read_tensors(
    buf: bytes, n: int, positions: list[int], strings: _Strings, target: TensorTarget
) -> list[Any]:
    """Read the tensors: as chunks where they are (fast), otherwise as value chunks or field by
    field through their vtables (which also reports every error)."""
    out: list[Any] = []
    append, head, u32, chunks = out.append, _HEAD.unpack_from, _U32.unpack_from, _CHUNKS
    data_types, new = _DATA_TYPES.get, _object_new
    cls, keys, fields, own_fields = target
    k_uid, k_name, k_type, k_dims, k_strides, k_virtual, k_pbv, k_value, k_align = keys
    # Where the writer put the (shared) vtables of chunks and value chunks, if anywhere: a tensor
    # whose soffset points there has the vtable the fast paths assume.
    found = buf.find(_TENSOR_VTABLE)
    chunk_vt = found if found >= 0 else None
    found = buf.find(_VALUE_TENSOR_VTABLE)
    value_vt = found if found >= 0 else None
    longest = 4 * MAX_NAME_LENGTH
    for pos in positions:
        values = None
        try:  # struct.error: something lies outside the buffer; the slow path says what
            soffset, name_bytes = head(buf, pos)  # name_bytes: if this is a chunk
            vt = pos - soffset
            if vt == chunk_vt:
                # A chunk: every inner offset has the value the writer gives it.
                strides_at = (48 + name_bytes) & ~7
                rank = u32(buf, pos + strides_at)[0] if name_bytes <= longest else 99
                if rank <= MAX_RANK:
                    chunk = chunks.get(name_bytes << 4 | rank) or _chunk(name_bytes, rank)
                    v = chunk.body.unpack_from(buf, pos)
                    data_type = data_types(v[6])
                    if (
                        v[3:6] == chunk.inner
                        and v[12 + rank] == rank
                        and data_type is not None
                        and v[10].isascii()
                    ):
                        obj = new(cls)
                        _set_dict(
                            obj,
                            {
                                k_uid: v[1],
                                k_name: v[10].decode(),
                                k_type: data_type,
                                k_dims: list(v[13 + rank :]),
                                k_strides: list(v[12 : 12 + rank]),
                                k_virtual: v[7],
                                k_pbv: v[8],
                                k_value: None,
                                k_align: v[2],
                            },
                        )
                        _set_fields(obj, set(fields) if own_fields else fields)
                        _set_extra(obj, None)
                        _set_private(obj, None)
                        append(obj)
                        continue
            elif vt == value_vt:
                values = _read_value_chunk(buf, n, pos, keys)
        except struct.error:
            pass
        if values is None:  # field by field; then in the target's keys
            values = dict(zip(keys, _read_tensor(buf, n, pos, strings).values(), strict=True))
        append(new_trusted(cls, values, set(fields) if own_fields else fields))
    return out


def decode_parts(data: bytes, target: TensorTarget = RECORDS) -> dict[str, Any]:
    """Parse and check bytes written by :func:`encode`; return a graph record's fields.

    Args:
        data: The serialized graph (the caller caps its size).
        target: What to build for each tensor (records by default).

    Returns:
        The fields of a :class:`~.records.GraphRecord`, in field order; ``tensors`` holds
        ``target`` objects, ``nodes`` node records. They pass the record rules of
        :func:`~.records.check_graph_record`.

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
    name = strings.get(root + rel[0], name_o, "Graph name")
    values = {
        "format_version": version,
        "name": name,
        "compute_data_type": _data_type(cdt, "the graph"),
        "intermediate_data_type": _data_type(idt, "the graph"),
        "io_data_type": _data_type(iodt, "the graph"),
        "preferred_engine_id": engine,
        "tensors": _read_tensors(buf, n, tensor_pos, strings, target),
        "nodes": [_read_node(buf, n, p, strings) for p in node_pos],
    }
    check_graph_parts(name, values["tensors"], values["nodes"], target.keys[3], target.keys[4])
    return values


def decode(data: bytes) -> GraphRecord:
    """Parse bytes written by :func:`encode` (or any writer of ``graph.fbs``).

    Args:
        data: The serialized graph (the caller caps its size).

    Returns:
        The record, checked by :func:`~.records.check_graph_record`.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT or INVALID_VALUE (see the module docstring).
    """
    return new_trusted(GraphRecord, decode_parts(data), RECORD_FIELDS[GraphRecord])

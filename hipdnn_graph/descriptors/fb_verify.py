"""Checked reads of a flatbuffer: the ``Verifier``'s rules, field by field.

Each read checks what flatbuffers' ``Verifier`` checks before hipDNN reads a graph (HIPDNN_WIRE.md
A10): tables aligned and inside the buffer with their vtables, scalars and structs aligned and in
bounds, offsets pointing inside, strings NUL-terminated UTF-8, vectors fitting. A broken rule
raises :class:`~hipdnn_graph.errors.HipdnnError` (``UNSUPPORTED_GRAPH_FORMAT`` via
:func:`bad`, ``INVALID_VALUE`` for a count over a cap), never anything else. A decode's
:func:`new_counter` bounds the tables read and the bytes decoded, so work and memory stay
proportional to the input. :mod:`.fb_read` decodes hipDNN's ``Graph`` with them.

Example:
    >>> from hipdnn_graph.descriptors.fb_write import write_graph
    >>> from hipdnn_graph.descriptors.wire_model import WireGraph
    >>> buf = write_graph(WireGraph(name="g"))
    >>> graph = Table(buf, len(buf), u32(buf, 0)[0], "the graph", new_counter())
    >>> field_string(buf, len(buf), graph, 0, "the graph name")
    'g'
    >>> field_target(buf, len(buf) - 8, graph, 0, "the graph name")
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: Invalid hipDNN graph: the graph name points outside the buffer
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..errors import HipdnnError
from ..types import ErrorCode
from .node_spec import VECTOR_KINDS, Kind
from .wire_rules import MAX_RANK, unsupported

__all__ = [
    "MAX_BUFFER",
    "SCALARS",
    "Table",
    "bad",
    "charge",
    "field_longs",
    "field_numbers",
    "field_scalar",
    "field_string",
    "field_struct",
    "field_tables",
    "field_target",
    "new_counter",
    "repeated",
    "u32",
    "vector_at",
]

MAX_BUFFER = 2**31 - 1
_MAX_TABLES = 1_000_000
_u16 = struct.Struct("<H").unpack_from
_i32 = struct.Struct("<i").unpack_from
u32 = struct.Struct("<I").unpack_from
SCALARS = {code: struct.Struct("<" + code).unpack_from for code in "qQifb?BdI"}
_WIDTHS = {"q": 8, "Q": 8, "d": 8, "i": 4, "f": 4, "I": 4, "b": 1, "?": 1, "B": 1}
#: unpackers of the short integer vectors (at most MAX_RANK elements), by struct code
_SHORT_VECTORS = {
    code: [struct.Struct(f"<{k}{code}").unpack_from for k in range(MAX_RANK + 1)]
    for code, _ in VECTOR_KINDS.values()
    if code != "B"
}


def bad(what: str) -> HipdnnError:
    return unsupported(f"Invalid hipDNN graph: {what}")


def new_counter() -> list[int]:
    """A decode's running counts: tables verified, bytes of strings and vectors decoded."""
    return [0, 0]


def charge(counter: list[int], size: int, n: int) -> None:
    """Count ``size`` decoded bytes; refuse once a decode copies more than the buffer holds
    (only strings or vectors that many tables share can do that)."""
    counter[1] += size
    if counter[1] > n:
        raise bad(
            f"its tables share strings or vectors that decode to more than the buffer's {n} bytes"
        )


class Table:
    """A verified table: its position, its vtable's entries (0 = absent) and the decode's
    running counts (see :func:`new_counter`)."""

    __slots__ = ("counter", "entries", "pos")

    def __init__(self, buf: bytes, n: int, pos: int, what: str, counter: list[int]) -> None:
        if pos % 4 or pos + 4 > n or pos < 0:
            raise bad(f"{what} is not an aligned table inside the buffer")
        counter[0] += 1
        if counter[0] > _MAX_TABLES:
            raise bad(f"more than {_MAX_TABLES} tables")
        self.counter = counter
        vt = pos - _i32(buf, pos)[0]
        if vt < 0 or vt % 2 or vt + 2 > n:
            raise bad(f"{what} has its vtable outside the buffer")
        size = _u16(buf, vt)[0]
        if size % 2 or size < 4 or vt + size > n:
            raise bad(f"{what} has a vtable of {size} bytes that does not fit")
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


def field_scalar(buf: bytes, n: int, table: Table, slot: int, code: str, what: str) -> Any:
    """The scalar in ``slot``, or None when absent (aligned and in bounds, as verified)."""
    off = table.offset(slot)
    if not off:
        return None
    pos = table.pos + off
    width = _WIDTHS[code]
    if pos % width or pos + width > n:
        raise bad(f"{what} is not an aligned {width}-byte field inside the buffer")
    return SCALARS[code](buf, pos)[0]


def field_target(buf: bytes, n: int, table: Table, slot: int, what: str) -> int | None:
    """Where the offset in ``slot`` points, or None when absent."""
    off = table.offset(slot)
    if not off:
        return None
    pos = table.pos + off
    if pos % 4 or pos + 4 > n:
        raise bad(f"{what} is not an aligned offset inside the buffer")
    rel: int = u32(buf, pos)[0]
    if rel == 0 or rel >= 2**31 or pos + rel >= n:
        raise bad(f"{what} points outside the buffer")
    return pos + rel


def vector_at(buf: bytes, n: int, pos: int, width: int, what: str) -> tuple[int, int]:
    """(length, start of the elements) of a vector at ``pos``."""
    if pos % 4 or pos + 4 > n:
        raise bad(f"{what} is not an aligned vector inside the buffer")
    length = u32(buf, pos)[0]
    if length >= MAX_BUFFER // width or pos + 4 + width * length > n:
        raise bad(f"{what} does not fit in the buffer")
    return length, pos + 4


def field_string(buf: bytes, n: int, table: Table, slot: int, what: str) -> str:
    pos = field_target(buf, n, table, slot, what)
    if pos is None:
        return ""
    length, start = vector_at(buf, n, pos, 1, what)
    end = start + length
    if end >= n or buf[end] != 0:
        raise bad(f"{what} does not end in a NUL byte")
    charge(table.counter, length, n)
    try:
        return buf[start:end].decode()
    except UnicodeDecodeError:
        raise unsupported(f"{what} is not UTF-8") from None


def field_numbers(
    buf: bytes, n: int, table: Table, slot: int, what: str, kind: Kind, cap: int = MAX_RANK
) -> Any:
    """The vector of ``kind`` (one of :data:`VECTOR_KINDS`) in ``slot``, empty when absent:
    ``bytes`` for a ``U8_VEC`` (any length the buffer holds), else a list of at most ``cap``
    integers."""
    code, width = VECTOR_KINDS[kind]
    pos = field_target(buf, n, table, slot, what)
    if pos is None:
        return b"" if kind is Kind.U8_VEC else []
    length, start = vector_at(buf, n, pos, width, what)
    if kind is not Kind.U8_VEC and length > cap:
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"{what} has {length} entries, more than {cap}")
    charge(table.counter, width * length, n)
    if kind is Kind.U8_VEC:
        return buf[start : start + length]
    if length <= MAX_RANK:
        return list(_SHORT_VECTORS[code][length](buf, start))
    return list(struct.unpack_from(f"<{length}{code}", buf, start))


def field_longs(
    buf: bytes, n: int, table: Table, slot: int, what: str, cap: int = MAX_RANK
) -> list[int]:
    """A vector of at most ``cap`` int64 (dims, strides, tensor uids)."""
    values: list[int] = field_numbers(buf, n, table, slot, what, Kind.I64_VEC, cap)
    return values


def field_tables(buf: bytes, n: int, table: Table, slot: int, what: str, cap: int) -> list[int]:
    """Positions of the tables a vector of tables points at (each entry checked in bounds)."""
    pos = field_target(buf, n, table, slot, what)
    if pos is None:
        return []
    length, start = vector_at(buf, n, pos, 4, what)
    if length > cap:
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"Graph has {length} {what}, more than {cap}")
    if length > 256:  # many entries: look for repeats before making an int object of each
        offsets = np.frombuffer(buf, dtype="<u4", count=length, offset=start)
        if (offsets >= n).any():
            raise bad(f"a {what[:-1]} entry points outside the buffer")
        rels = np.arange(start, start + 4 * length, 4, dtype=np.uint32)  # sums < 2**32
        rels += offsets
        ordered = np.sort(rels)
        if (ordered[1:] == ordered[:-1]).any():
            repeated(what)
        del ordered
        return rels.tolist()
    rels_ = struct.unpack_from(f"<{length}I", buf, start)
    positions = [start + 4 * i + rel for i, rel in enumerate(rels_)]
    if len(set(positions)) != length:
        repeated(what)
    return positions


def repeated(what: str) -> None:
    raise HipdnnError(ErrorCode.INVALID_VALUE, f"Graph lists one {what[:-1]} table more than once")


def field_struct(buf: bytes, n: int, t: Table, slot: int, size: int, align: int, what: str) -> Any:
    off = t.offset(slot)
    if not off:
        return None
    pos = t.pos + off
    if pos % align or pos + size > n:
        raise bad(f"{what} is not an aligned {size}-byte struct inside the buffer")
    return buf[pos : pos + size]

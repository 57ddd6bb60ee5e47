"""The FlatBuffers layout shared by the writer and the reader of serialized graphs.

Table specs (slot, struct code, default) mirror ``schema/graph.fbs``; a *chunk* is the contiguous
layout the writer gives a tensor (table, name, strides, dims; a *value chunk* adds the value
table), which the reader recognizes and reads with one ``struct`` call. See :mod:`.flatbuf` for the
format's rules.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from .records import SdpaBwdRecord, SdpaFwdRecord

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
    inner: tuple[int, int, int]  # the name, strides and dims uoffsets the writer gives them


_CHUNKS: dict[int, _Chunk] = {}  # key: name_bytes << 4 | rank


def _chunk(name_bytes: int, rank: int) -> _Chunk:
    chunk = _CHUNKS.get(name_bytes << 4 | rank)
    if chunk is None:
        strides_at = (48 + name_bytes) & ~7  # 8-aligned (chunk starts at 4 mod 8)
        dims_at = strides_at + 8 + 8 * rank
        fmt = f"<iqqIIIb??xI{name_bytes}s{strides_at - 40 - name_bytes}xI{rank}q4xI{rank}q4x"
        chunk = _Chunk(struct.Struct(fmt), strides_at, dims_at, (16, strides_at - 24, dims_at - 28))
        if len(_CHUNKS) < 4096:
            _CHUNKS[name_bytes << 4 | rank] = chunk
    return chunk


# A tensor holding a value is written as a "value chunk": the table (with value_type and value),
# name, strides, dims, then the value table's vtable and the value table (Float64Value, Int64Value
# or BoolValue). Table: soffset, uid, alignment, name, strides, dims, value (uoffsets), data_type,
# virtual, value_type, pass_by_value.
_VALUE_TENSOR_VTABLE = struct.pack("<13H", 26, 40, 4, 20, 36, 24, 28, 37, 38, 32, 39, 0, 12)
_VALUE_CODES = {_FLOAT64: "d", _INT64: "q", _BOOL: "?"}


class _ValueChunk(NamedTuple):
    body: struct.Struct
    strides_at: int
    dims_at: int
    value_at: int  # chunk-relative position of the value table
    value_size: int  # the value table's size (its vtable's second entry)


_VALUE_CHUNKS: dict[int, _ValueChunk] = {}  # key: name_bytes << 8 | rank << 4 | kind


def _value_chunk(name_bytes: int, rank: int, kind: int) -> _ValueChunk:
    key = name_bytes << 8 | rank << 4 | kind
    chunk = _VALUE_CHUNKS.get(key)
    if chunk is None:
        code = _VALUE_CODES[kind]
        size = _SIZES[code]
        strides_at = (52 + name_bytes) & ~7
        dims_at = strides_at + 8 + 8 * rank
        value_at = dims_at + 16 + 8 * rank  # after dims, a 6-byte vtable and padding
        end = (value_at + 4 + size + 7) & ~7
        fmt = (
            f"<iqqIIIIb?B?I{name_bytes}s{strides_at - 44 - name_bytes}xI{rank}q4xI{rank}q"
            f"HHH6xi{code}{end - value_at - 4 - size}x"
        )
        chunk = _ValueChunk(struct.Struct(fmt), strides_at, dims_at, value_at, 4 + size)
        if len(_VALUE_CHUNKS) < 4096:
            _VALUE_CHUNKS[key] = chunk
    return chunk

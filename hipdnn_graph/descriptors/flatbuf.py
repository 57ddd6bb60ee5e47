"""FlatBuffers encoding of :class:`~.records.GraphRecord`, by hand, fast and defensive.

The code lives in :mod:`.fb_layout` (table specs), :mod:`.fb_writer` and :mod:`.fb_reader`.

The layout is the one ``schema/graph.fbs`` describes (identifier ``HDGR``); the code generated from
that schema by ``flatc`` (package ``fbs``) reads what :func:`encode` writes and :func:`decode` reads
what its builders write (both checked by the tests). This module does not use the generated code:
the ``flatbuffers`` runtime costs about a microsecond per field, too slow for the lowering path.

Writer: objects are laid out front to back (root table first, children after their parent, so
every ``uoffset`` points forward), every non-optional field is written even when it equals its
default, vtables are shared between tables of equal layout, scalars are aligned to their size, any
NaN is written as the canonical NaN. Each tensor is one contiguous *chunk* (table, name, strides,
dims, then its value table if it holds a value). The output is therefore a deterministic function
of the record.

Reader: every position, length and offset is checked against the buffer before it is used, so a
malformed buffer raises :class:`~hipdnn_graph.errors.HipdnnError` and nothing else:
UNSUPPORTED_GRAPH_FORMAT for structure (bad identifier, version, offset, length, vtable),
INVALID_VALUE for content (unknown enum value, rank above the limit, bad UTF-8, and the record rules
of :func:`~.records.check_graph_record`). Nesting is fixed (graph → tensor/node → value/attributes),
so there is no recursion; a vector's claimed length is checked against the bytes that are really
there before anything is allocated; a string referenced many times is decoded once. Chunks are
recognized (vtable and every inner offset as the writer makes them) and read with one ``struct``
call each; anything else, e.g. a buffer built by the ``flatbuffers`` runtime, is read field by field
through its vtables.

Example:
    >>> from hipdnn_graph.descriptors.records import GraphRecord
    >>> blob = encode(GraphRecord(name="g"))
    >>> blob[4:8], decode(blob).name
    (b'HDGR', 'g')
"""

from __future__ import annotations

from .fb_layout import FILE_IDENTIFIER
from .fb_reader import RECORDS, TensorTarget, decode, decode_parts
from .fb_writer import encode, encode_fields

__all__ = [
    "FILE_IDENTIFIER",
    "RECORDS",
    "TensorTarget",
    "decode",
    "decode_parts",
    "encode",
    "encode_fields",
]

"""Public encode/decode functions for graph records: canonical JSON, FlatBuffers bytes, keys.

Both decoders are total: any input either gives a valid :class:`~.records.GraphRecord` or raises
:class:`~hipdnn_graph.errors.HipdnnError`, never another exception, never a hang:

* UNSUPPORTED_GRAPH_FORMAT: input larger than :data:`MAX_INPUT_BYTES` (64 MiB), not bytes/text,
  not JSON / not a FlatBuffer of ours (identifier ``HDGR``), a malformed structure, or a
  ``format_version`` other than :data:`~.records.FORMAT_VERSION` (missing counts as other);
* INVALID_VALUE: well-formed input whose content breaks a record rule (unknown enum name or
  value, wrong field type, dangling or duplicate uid, absurd dims, ...).

No pickle, no eval; the bytes reader allocates in proportion to the bytes it was given (see
:mod:`.flatbuf`); the JSON parser (pydantic's) bounds nesting depth.

Example:
    >>> from hipdnn_graph.descriptors.records import GraphRecord
    >>> rec = GraphRecord(name="g")
    >>> record_from_bytes(record_to_bytes(rec)) == rec
    True
    >>> record_from_json(record_to_json(rec)) == rec
    True
    >>> record_from_json("[]")
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: Graph JSON must be an object with a format_version
"""

from __future__ import annotations

import struct
from hashlib import blake2b
from typing import Any

from pydantic import ValidationError

from ..errors import HipdnnError
from ..types import ErrorCode
from . import flatbuf
from .records import GraphRecord, describe_validation_error

__all__ = [
    "MAX_INPUT_BYTES",
    "record_from_bytes",
    "record_from_json",
    "record_key",
    "record_to_bytes",
    "record_to_json",
]

#: Largest input either decoder accepts, in bytes (characters for ``str`` JSON).
MAX_INPUT_BYTES = 64 * 2**20


def _unsupported(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.UNSUPPORTED_GRAPH_FORMAT, message)


def record_to_json(rec: GraphRecord) -> str:
    """Canonical JSON of a record: fields in declaration order, compact, enums by name.

    Non-finite floats are written as ``NaN`` / ``Infinity`` / ``-Infinity`` (JSON5-style constants,
    which :func:`record_from_json` reads back).

    Args:
        rec: The record.

    Returns:
        The JSON text; equal records give equal text.
    """
    return rec.model_dump_json()


def record_from_json(text: str | bytes) -> GraphRecord:
    """Parse and check JSON written by :func:`record_to_json`.

    Args:
        text: JSON text (``str`` or UTF-8 ``bytes``), at most :data:`MAX_INPUT_BYTES`.

    Returns:
        The record.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT or INVALID_VALUE (see the module docstring).
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise _unsupported(f"Graph JSON must be str or bytes, not {type(text).__name__}")
    if len(text) > MAX_INPUT_BYTES:
        raise _unsupported(f"Graph JSON is larger than {MAX_INPUT_BYTES} bytes")
    try:
        return GraphRecord.model_validate_json(text)
    except HipdnnError:
        raise
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["type"] == "json_invalid" or first["loc"][:1] in ((), ("format_version",)):
            raise _unsupported(f"Undecodable graph JSON: {first['msg']}") from None
        raise HipdnnError(ErrorCode.INVALID_VALUE, describe_validation_error(exc)) from None
    except Exception as exc:  # safety net: the contract is HipdnnError only
        raise _unsupported(f"Undecodable graph JSON: {type(exc).__name__}") from None


def record_to_bytes(rec: GraphRecord) -> bytes:
    """FlatBuffers bytes of a record (``schema/graph.fbs``, identifier ``HDGR``); deterministic.

    Args:
        rec: The record.

    Returns:
        The serialized graph.

    Raises:
        HipdnnError: INVALID_VALUE for a record whose fields do not fit the format (only possible
            for records built without validation).
    """
    return fields_to_bytes(rec.__dict__)


def fields_to_bytes(
    fields: dict[str, Any], dims_key: str = "dims", strides_key: str = "strides"
) -> bytes:
    """:func:`record_to_bytes` of a record's fields, whose tensors may be other objects.

    Args:
        fields: A checked graph record's fields, in field order; each tensor's ``__dict__`` holds
            a tensor record's fields, with dims and strides under ``dims_key`` / ``strides_key``
            (``Graph.serialize`` writes the frontend's tensors directly).
        dims_key: The key of the dims.
        strides_key: The key of the strides.

    Returns:
        The serialized graph, equal to that of the record.

    Raises:
        HipdnnError: INVALID_VALUE for fields that do not fit the format.
    """
    try:
        return flatbuf.encode_fields(fields, dims_key, strides_key)
    except (struct.error, UnicodeEncodeError, TypeError, AttributeError, KeyError) as exc:
        # only reachable for records built without validation (model_copy, construct_record)
        # or for names that cannot be encoded as UTF-8
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"Graph record cannot be serialized: {exc}"
        ) from None


def _bytes_input(data: bytes | bytearray | memoryview) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise _unsupported(f"Serialized graph must be bytes, not {type(data).__name__}")
    size = data.nbytes if isinstance(data, memoryview) else len(data)
    if size > MAX_INPUT_BYTES:  # checked before any copy
        raise _unsupported(f"Serialized graph is larger than {MAX_INPUT_BYTES} bytes")
    return data if type(data) is bytes else bytes(data)


def record_from_bytes(data: bytes | bytearray | memoryview) -> GraphRecord:
    """Parse and check bytes written by :func:`record_to_bytes`.

    Args:
        data: The serialized graph, at most :data:`MAX_INPUT_BYTES`.

    Returns:
        The record.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT or INVALID_VALUE (see the module docstring).
    """
    data = _bytes_input(data)
    try:
        return flatbuf.decode(data)
    except HipdnnError:
        raise
    except Exception as exc:  # safety net: the contract is HipdnnError only
        raise _unsupported(f"Malformed serialized graph: {type(exc).__name__}") from None


def fields_from_bytes(
    data: bytes | bytearray | memoryview, target: flatbuf.TensorTarget
) -> dict[str, Any]:
    """:func:`record_from_bytes`, returning the record's fields with ``target`` tensors.

    For decoders that build other objects than records (``Graph.deserialize`` builds the
    frontend's tensors directly); the same checks apply.

    Args:
        data: The serialized graph, at most :data:`MAX_INPUT_BYTES`.
        target: What to build for each tensor.

    Returns:
        The fields of the :class:`~.records.GraphRecord` the bytes hold, in field order.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT or INVALID_VALUE (see the module docstring).
    """
    data = _bytes_input(data)
    try:
        return flatbuf.decode_parts(data, target)
    except HipdnnError:
        raise
    except Exception as exc:  # safety net: the contract is HipdnnError only
        raise _unsupported(f"Malformed serialized graph: {type(exc).__name__}") from None


def record_key(rec: GraphRecord) -> int:
    """A stable 64-bit key of a record's content: BLAKE2b-64 of its canonical JSON.

    Equal records have equal keys, across processes and machines; any change of a name, shape,
    flag, uid or type changes the key (up to 64-bit collisions).

    Args:
        rec: The record.

    Returns:
        An integer in ``[0, 2**64)``.
    """
    digest = blake2b(record_to_json(rec).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")

"""Backend descriptors and the serialized graph.

* :class:`BackendDescriptor` models hipDNN's backend C API descriptors (:mod:`.backend_descriptor`),
  keyed by :class:`AttributeName` and typed by :class:`AttributeType` with hipDNN's values
  (:mod:`.enums`).
* :class:`GraphRecord` is the serialized graph (:mod:`.records`); :func:`record_to_json` /
  :func:`record_from_json` and :func:`record_to_bytes` / :func:`record_from_bytes` are its two wire
  formats (:mod:`.codec`, :mod:`.flatbuf`, ``schema/graph.fbs``), :func:`record_key` its stable key.

Example:
    >>> from hipdnn_graph.descriptors import json_schema
    >>> sorted(json_schema()["properties"])[:3]
    ['compute_data_type', 'format_version', 'intermediate_data_type']
"""

from __future__ import annotations

from typing import Any

from ..types import DataType, DiagonalAlignment
from .backend_descriptor import BackendDescriptor, DescriptorError
from .codec import (
    MAX_INPUT_BYTES,
    record_from_bytes,
    record_from_json,
    record_key,
    record_to_bytes,
    record_to_json,
)
from .enums import AttributeName, AttributeType, DescriptorType, Status
from .flatbuf import FILE_IDENTIFIER
from .record_checks import check_graph_record, construct_record
from .records import (
    FORMAT_VERSION,
    GraphRecord,
    NodeRecord,
    SdpaBwdRecord,
    SdpaFwdRecord,
    TensorRecord,
)

__all__ = [
    "FILE_IDENTIFIER",
    "FORMAT_VERSION",
    "MAX_INPUT_BYTES",
    "AttributeName",
    "AttributeType",
    "BackendDescriptor",
    "DescriptorError",
    "DescriptorType",
    "GraphRecord",
    "NodeRecord",
    "SdpaBwdRecord",
    "SdpaFwdRecord",
    "Status",
    "TensorRecord",
    "check_graph_record",
    "construct_record",
    "json_schema",
    "record_from_bytes",
    "record_from_json",
    "record_key",
    "record_to_bytes",
    "record_to_json",
]


_ENUMS_BY_TITLE: dict[str, Any] = {"DataType": DataType, "DiagonalAlignment": DiagonalAlignment}


def _names_for_defaults(node: Any) -> None:
    """Write enum defaults by name, as the JSON itself does (pydantic writes their values)."""
    if isinstance(node, dict):
        enum_cls = _ENUMS_BY_TITLE.get(node.get("title", ""))
        if enum_cls is not None and type(node.get("default")) is int:
            node["default"] = enum_cls(node["default"]).name
        for child in node.values():
            _names_for_defaults(child)
    elif isinstance(node, list):
        for child in node:
            _names_for_defaults(child)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the serialized graph (:class:`GraphRecord`), as a new dict.

    Returns:
        A JSON Schema (draft 2020-12) document.
    """
    schema = GraphRecord.model_json_schema()
    _names_for_defaults(schema)
    return schema

"""Backend descriptors and hipDNN's wire formats; a leaf that knows no node type.

* :class:`BackendDescriptor` models hipDNN's backend C API descriptors (:mod:`.backend_descriptor`),
  keyed by :class:`AttributeName` and typed by :class:`AttributeType` with hipDNN's values
  (:mod:`.enums`); operation descriptors are packed and unpacked by :mod:`.packing`.
* :class:`NodeSpec` (:mod:`.node_spec`) is each node family's one declaration of where its slots
  and scalars live on every wire; node modules register theirs.
* :class:`WireGraph` (:mod:`.wire_model`) is a graph as hipDNN's serialized ``Graph`` holds it,
  with what both codecs share beside it: data type numbers and values (:mod:`.wire_values`),
  limits and content rules (:mod:`.wire_rules`), unvalidated construction (:mod:`.wire_trusted`);
  :func:`write_graph` / :func:`read_graph` are hipDNN's FlatBuffers bytes (:mod:`.fb_write`,
  :mod:`.fb_read`) and :func:`graph_to_json` / :func:`graph_from_json` its JSON
  (:mod:`.hipdnn_json`), with :func:`json_schema` (:mod:`.hipdnn_json_schema`).

Example:
    >>> from hipdnn_graph.descriptors import json_schema
    >>> sorted(json_schema()["properties"])[:3]
    ['compute_data_type', 'id', 'intermediate_data_type']
"""

from __future__ import annotations

from .backend_descriptor import BackendDescriptor, DescriptorError
from .enums import AttributeName, AttributeType, DescriptorType, Status
from .fb_read import CONTAINER_IDENTIFIER, read_graph
from .fb_write import write_graph
from .hipdnn_json import graph_from_json, graph_to_json
from .hipdnn_json_schema import json_schema
from .node_spec import Kind, NodeSpec, ScalarSpec, SlotSpec, UnmodelledSpec, node_specs
from .wire_model import (
    MAX_INPUT_BYTES,
    WIRE_DATA_TYPES,
    ValueMember,
    WireGraph,
    WireMetadata,
)

__all__ = [
    "CONTAINER_IDENTIFIER",
    "MAX_INPUT_BYTES",
    "WIRE_DATA_TYPES",
    "AttributeName",
    "AttributeType",
    "BackendDescriptor",
    "DescriptorError",
    "DescriptorType",
    "Kind",
    "NodeSpec",
    "ScalarSpec",
    "SlotSpec",
    "Status",
    "UnmodelledSpec",
    "ValueMember",
    "WireGraph",
    "WireMetadata",
    "graph_from_json",
    "graph_to_json",
    "json_schema",
    "node_specs",
    "read_graph",
    "write_graph",
]

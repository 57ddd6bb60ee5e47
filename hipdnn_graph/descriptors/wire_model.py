"""The graph as hipDNN's wire holds it; the facts both wire codecs share live beside it.

A :class:`WireGraph` is what hipDNN's serialized ``Graph`` holds: the graph's name, data types,
preferred engine and metadata (:class:`WireMetadata`), its tensors **in wire order** (frontend
:class:`~hipdnn_graph.TensorAttributes`) and its nodes as ``(spec, attributes)`` pairs, whose
slots hold those same tensor objects. The FlatBuffers codec (:mod:`.fb_write`, :mod:`.fb_read`)
and the JSON codec (:mod:`.hipdnn_json`) turn it into bytes and text and back; the bridge above
(``hipdnn_graph/wire.py``) turns it into a graph's parts (``GraphParts``) and back.

Shared facts, one module each (their names are re-exported here): hipDNN's DataType numbers and
TensorValue members (:mod:`.wire_values`, HIPDNN_WIRE.md A4, A5), the limits and content rules
every decoded graph must keep (:mod:`.wire_rules`), and how decoders build what they read
(:mod:`.wire_trusted`).

Example:
    >>> from hipdnn_graph.types import DataType
    >>> q = decoded_tensor(uid=1, name="Q", dim=[2, 4], stride=[4, 1], data_type=DataType.HALF)
    >>> graph = WireGraph(name="g", io_data_type=DataType.HALF, tensors=[q])
    >>> check_wire_graph(graph); [t.name for t in graph.tensors], graph.metadata.id
    (['Q'], None)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..tensor import TensorAttributes
from ..types import DataType
from .node_spec import NodeSpec
from .wire_rules import (
    MAX_DIM,
    MAX_INPUT_BYTES,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_RANK,
    MAX_STRIDE,
    MAX_TENSORS,
    MAX_VOLUME,
    check_node_names,
    check_wire_graph,
    unsupported,
    wide_text_encoding,
    wide_text_error,
)
from .wire_trusted import (
    attributes_template,
    decoded_attributes,
    decoded_tensor,
    new_trusted,
    refuse_unmodelled,
)
from .wire_values import (
    DATA_TYPE_NAMES,
    VALUE_CODES,
    WIRE_DATA_TYPES,
    ValueMember,
    data_type_from_wire,
    decode_value,
    encode_value,
    float32,
    wire_data_type,
)

__all__ = [
    "DATA_TYPE_NAMES",
    "MAX_DIM",
    "MAX_INPUT_BYTES",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_RANK",
    "MAX_STRIDE",
    "MAX_TENSORS",
    "MAX_VOLUME",
    "VALUE_CODES",
    "WIRE_DATA_TYPES",
    "ValueMember",
    "WireGraph",
    "WireMetadata",
    "attributes_template",
    "check_node_names",
    "check_wire_graph",
    "data_type_from_wire",
    "decode_value",
    "decoded_attributes",
    "decoded_tensor",
    "encode_value",
    "float32",
    "new_trusted",
    "refuse_unmodelled",
    "unsupported",
    "wide_text_encoding",
    "wide_text_error",
    "wire_data_type",
]


@dataclass
class WireMetadata:
    """Graph fields hipDNN's wire has and the frontend does not use, kept through round trips.

    Attributes:
        id: The graph's 16-byte UUID, when set (hipDNN mints one at finalization).
        min_required_engine_api_version: ``(major, minor, patch)``, when stamped.
        is_override_shape_enabled: hipDNN's override-shape flag.
    """

    id: bytes | None = None
    min_required_engine_api_version: tuple[int, int, int] | None = None
    is_override_shape_enabled: bool = False


@dataclass
class WireGraph:
    """One graph as hipDNN's serialized ``Graph`` holds it (see the module docstring).

    Attributes:
        name: The graph's name.
        compute_data_type: Graph compute type; likewise the next two.
        intermediate_data_type: Type of virtual tensors.
        io_data_type: Type of graph inputs and outputs.
        preferred_engine_id: The preferred engine as the signed 64-bit integer hipDNN stores.
        tensors: Every tensor once, in wire order, each with a uid.
        nodes: ``(spec, attributes)`` in topological order.
        metadata: The graph's id, engine-API floor and override flag.
    """

    name: str = ""
    compute_data_type: DataType = DataType.NOT_SET
    intermediate_data_type: DataType = DataType.NOT_SET
    io_data_type: DataType = DataType.NOT_SET
    preferred_engine_id: int | None = None
    tensors: list[TensorAttributes] = field(default_factory=list)
    nodes: list[tuple[NodeSpec, Any]] = field(default_factory=list)
    metadata: WireMetadata = field(default_factory=WireMetadata)

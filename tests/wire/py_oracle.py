"""The Python oracle: flatc's Python code for hipDNN's schemas (``autogen/``), reading and building.

The generated code comes from a copy of the schemas in which the TensorValue members are tables
(flatc refuses Python for a union of structs), so it cannot read or write those members as what
they are on the wire: structs, stored inline at the union's offset. :func:`read` takes the
union's position from the generated ``Value()`` and reads the struct's bytes there by hand, and
:func:`build` writes each struct inline (aligned to its size) before adding its offset.

:func:`build` uses the generated builder functions and the ``flatbuffers`` Python ``Builder``,
whose layouts differ from ``Graph::Pack``'s (another field order, vtable sharing on field offsets
only, optionally every default written, empty strings and vectors present, children in another
order): valid hipDNN blobs that are not canonical.
"""

from __future__ import annotations

import struct
from typing import Any

import flatbuffers
from flatbuffers.table import Table
from hipdnn_flatbuffers_sdk.data_objects import (
    BatchnormAttributes as BNA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    BatchnormBackwardAttributes as BNB,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    BatchnormInferenceAttributes as BNI,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    BatchnormInferenceAttributesVarianceExt as BNV,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    BlockScaleDequantizeAttributes as BSD,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    BlockScaleQuantizeAttributes as BSQ,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    ConvolutionBwdAttributes as CBA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    ConvolutionFwdAttributes as CFA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    ConvolutionWrwAttributes as CWA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    CustomOpAttributes as COA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    Graph as G,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    LayernormAttributes as LA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    LayernormBackwardAttributes as LNB,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    MatmulAttributes as MA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    MoeGroupedMatmulAttributes as MOE,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    MoeGroupedMatmulBwdAttributes as MOEB,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    Node as N,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    PointwiseAttributes as PA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    ReductionAttributes as RA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    ResampleBwdAttributes as RBA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    ResampleFwdAttributes as RFA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    RMSNormAttributes as RMS,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    RMSNormBackwardAttributes as RMB,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    SdpaAttributes as SA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    SdpaBackwardAttributes as SBA,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    SerializedGraphAndPlan as SGP,
)
from hipdnn_flatbuffers_sdk.data_objects import (
    TensorAttributes as TA,
)
from hipdnn_flatbuffers_sdk.data_objects.EngineApiVersion import CreateEngineApiVersion
from hipdnn_flatbuffers_sdk.data_objects.Uuid import CreateUuid
from wire_model import (
    BATCHNORM_BACKWARD_TAG,
    BATCHNORM_INFERENCE_TAG,
    BATCHNORM_INFERENCE_VARIANCE_TAG,
    BATCHNORM_TAG,
    BLOCK_SCALE_DEQUANTIZE_TAG,
    BLOCK_SCALE_QUANTIZE_TAG,
    CONV_BWD_TAG,
    CONV_FWD_TAG,
    CONV_WRW_TAG,
    CUSTOM_OP_TAG,
    FIELDS_BY_TAG,
    LAYERNORM_BACKWARD_TAG,
    LAYERNORM_TAG,
    MATMUL_TAG,
    MOE_BWD_TAG,
    MOE_TAG,
    POINTWISE_TAG,
    REDUCTION_TAG,
    RESAMPLE_BWD_TAG,
    RESAMPLE_FWD_TAG,
    RMSNORM_BACKWARD_TAG,
    RMSNORM_TAG,
    SDPA_BACKWARD_TAG,
    SDPA_TAG,
    TABLE_BY_TAG,
    VALUE_FORMAT_BY_TAG,
    VECTOR_WIDTHS,
    Desc,
    f32_bits,
)

_TABLE_CLASSES = {
    SDPA_TAG: SA.SdpaAttributes,
    SDPA_BACKWARD_TAG: SBA.SdpaBackwardAttributes,
    POINTWISE_TAG: PA.PointwiseAttributes,
    MATMUL_TAG: MA.MatmulAttributes,
    REDUCTION_TAG: RA.ReductionAttributes,
    RMSNORM_TAG: RMS.RMSNormAttributes,
    LAYERNORM_TAG: LA.LayernormAttributes,
    BATCHNORM_TAG: BNA.BatchnormAttributes,
    BATCHNORM_BACKWARD_TAG: BNB.BatchnormBackwardAttributes,
    BLOCK_SCALE_QUANTIZE_TAG: BSQ.BlockScaleQuantizeAttributes,
    BLOCK_SCALE_DEQUANTIZE_TAG: BSD.BlockScaleDequantizeAttributes,
    BATCHNORM_INFERENCE_TAG: BNI.BatchnormInferenceAttributes,
    BATCHNORM_INFERENCE_VARIANCE_TAG: BNV.BatchnormInferenceAttributesVarianceExt,
    CONV_FWD_TAG: CFA.ConvolutionFwdAttributes,
    CONV_BWD_TAG: CBA.ConvolutionBwdAttributes,
    CONV_WRW_TAG: CWA.ConvolutionWrwAttributes,
    RESAMPLE_FWD_TAG: RFA.ResampleFwdAttributes,
    RESAMPLE_BWD_TAG: RBA.ResampleBwdAttributes,
    LAYERNORM_BACKWARD_TAG: LNB.LayernormBackwardAttributes,
    RMSNORM_BACKWARD_TAG: RMB.RMSNormBackwardAttributes,
    MOE_TAG: MOE.MoeGroupedMatmulAttributes,
    MOE_BWD_TAG: MOEB.MoeGroupedMatmulBwdAttributes,
    CUSTOM_OP_TAG: COA.CustomOpAttributes,
}
_MODULES = {
    SDPA_TAG: SA,
    SDPA_BACKWARD_TAG: SBA,
    POINTWISE_TAG: PA,
    MATMUL_TAG: MA,
    REDUCTION_TAG: RA,
    RMSNORM_TAG: RMS,
    LAYERNORM_TAG: LA,
    BATCHNORM_TAG: BNA,
    BATCHNORM_BACKWARD_TAG: BNB,
    BLOCK_SCALE_QUANTIZE_TAG: BSQ,
    BLOCK_SCALE_DEQUANTIZE_TAG: BSD,
    BATCHNORM_INFERENCE_TAG: BNI,
    BATCHNORM_INFERENCE_VARIANCE_TAG: BNV,
    CONV_FWD_TAG: CFA,
    CONV_BWD_TAG: CBA,
    CONV_WRW_TAG: CWA,
    RESAMPLE_FWD_TAG: RFA,
    RESAMPLE_BWD_TAG: RBA,
    LAYERNORM_BACKWARD_TAG: LNB,
    RMSNORM_BACKWARD_TAG: RMB,
    MOE_TAG: MOE,
    MOE_BWD_TAG: MOEB,
    CUSTOM_OP_TAG: COA,
}


def camel(field: str) -> str:
    """The generated accessor name of a schema field (``q_tensor_uid`` -> ``QTensorUid``)."""
    return "".join(part.capitalize() for part in field.split("_"))


def _str(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8")


def _longs(obj: Any, name: str) -> list[int] | None:
    if getattr(obj, f"{name}IsNone")():
        return None
    return (
        [int(x) for x in getattr(obj, f"{name}AsNumpy")()]
        if getattr(obj, f"{name}Length")()
        else []
    )


def _read_tensor(t: TA.TensorAttributes) -> Desc:
    tag = t.ValueType()
    value = None
    union = t.Value()
    if union is not None and tag in VALUE_FORMAT_BY_TAG:
        size = struct.calcsize(VALUE_FORMAT_BY_TAG[tag])
        value = bytes(union.Bytes[union.Pos : union.Pos + size]).hex()  # the struct, inline
    return {
        "uid": t.Uid(),
        "name": _str(t.Name()),
        "data_type": t.DataType(),
        "strides": _longs(t, "Strides"),
        "dims": _longs(t, "Dims"),
        "virtual": t.Virtual(),
        "value_type": tag,
        "value": value,
        "is_runtime_pass_by_value": t.IsRuntimePassByValue(),
        "ragged_offset_tensor_uid": t.RaggedOffsetTensorUid(),
        "alignment": t.Alignment(),
        "ragged_offset_multiplier": t.RaggedOffsetMultiplier(),
    }


def _read_attributes(tag: int, union: Table | None) -> Desc | None:
    if union is None or tag not in _TABLE_CLASSES:
        return None
    table = _TABLE_CLASSES[tag]()
    table.Init(union.Bytes, union.Pos)
    out: Desc = {}
    for field, kind in FIELDS_BY_TAG[tag]:
        if kind in VECTOR_WIDTHS:  # read through the same accessors whatever the element type
            out[field] = _longs(table, camel(field))
            continue
        value = getattr(table, camel(field))()
        if kind == "ofloat" and value is not None:
            value = f32_bits(value)
        elif kind == "str":
            value = _str(value)
        out[field] = value
    return out


def read(blob: bytes) -> Desc:
    """Every field of a bare Graph blob, read with the generated Python code."""
    buf = bytearray(blob)
    g = G.Graph.GetRootAs(buf, 0)
    version = g.MinRequiredEngineApiVersion()
    uuid = g.Id()
    nodes = None
    if not g.NodesIsNone():
        nodes = []
        for i in range(g.NodesLength()):
            n = g.Nodes(i)
            tag = n.AttributesType()
            union = n.Attributes()
            nodes.append(
                {
                    "name": _str(n.Name()),
                    "compute_data_type": n.ComputeDataType(),
                    "attributes_type": tag,
                    "has_attributes": union is not None,
                    "attributes": _read_attributes(tag, union),
                }
            )
    return {
        "name": _str(g.Name()),
        "compute_data_type": g.ComputeDataType(),
        "intermediate_data_type": g.IntermediateDataType(),
        "io_data_type": g.IoDataType(),
        "tensors": None
        if g.TensorsIsNone()
        else [_read_tensor(g.Tensors(i)) for i in range(g.TensorsLength())],
        "nodes": nodes,
        "preferred_engine_id": g.PreferredEngineId(),
        "is_override_shape_enabled": g.IsOverrideShapeEnabled(),
        "min_required_engine_api_version": None
        if version is None
        else [version.Major(), version.Minor(), version.Patch()],
        "id": None if uuid is None else bytes(uuid.Bytes()).hex(),
    }


# ----- building: valid, non-canonical hipDNN blobs -----


#: number of fields (slots) of each table in hipDNN's schemas
KNOWN_SLOTS = {
    "Graph": 10,
    "TensorAttributes": 12,
    "Node": 4,
    "SdpaAttributes": 43,
    "SdpaBackwardAttributes": 28,
    "PointwiseAttributes": 12,
    "MatmulAttributes": 5,
    "ReductionAttributes": 4,
    "RMSNormAttributes": 7,
    "LayernormAttributes": 9,
    "BatchnormAttributes": 13,
    "BatchnormBackwardAttributes": 9,
    "BlockScaleQuantizeAttributes": 6,
    "BlockScaleDequantizeAttributes": 5,
    "BatchnormInferenceAttributes": 6,
    "BatchnormInferenceAttributesVarianceExt": 7,
    "ConvolutionFwdAttributes": 10,
    "ConvolutionBwdAttributes": 10,
    "ConvolutionWrwAttributes": 10,
    "ResampleFwdAttributes": 10,
    "ResampleBwdAttributes": 9,
    "LayernormBackwardAttributes": 10,
    "RMSNormBackwardAttributes": 7,
    "MoeGroupedMatmulAttributes": 8,
    "MoeGroupedMatmulBwdAttributes": 4,
    "CustomOpAttributes": 5,
}


class _Style:
    def __init__(
        self, force_defaults: bool, empty_as_present: bool, nodes_first: bool, newer: str | None
    ) -> None:
        self.force_defaults = force_defaults
        self.empty_as_present = empty_as_present
        self.nodes_first = nodes_first
        self.newer = newer  # the table that gets a field past hipDNN's last slot


def _start(b: flatbuffers.Builder, module: Any, table: str, style: _Style) -> None:
    if style.newer == table:
        b.StartObject(KNOWN_SLOTS[table] + 1)
    else:
        module.Start(b)


def _end(b: flatbuffers.Builder, module: Any, table: str, style: _Style) -> int:
    if style.newer == table:  # a field a newer schema would have: the next slot, a long 42
        b.PrependInt64Slot(KNOWN_SLOTS[table], 42, 0)
    return int(module.End(b))


def _string(b: flatbuffers.Builder, value: str | None, style: _Style) -> int | None:
    if value is None:
        return b.CreateString("") if style.empty_as_present else None
    if value == "" and not style.empty_as_present:
        return None
    return b.CreateString(value)


def _long_vector(
    b: flatbuffers.Builder, values: list[int] | None, style: _Style, width: int = 8
) -> int | None:
    """A vector of int64 (``width`` 8), int32 (``width`` 4) or ubyte (``width`` 1)."""
    if values is None:
        values = [] if style.empty_as_present else None
    if values is None or (not values and not style.empty_as_present):
        return None
    if width == 1:
        return int(b.CreateByteVector(bytes(values)))
    b.StartVector(width, len(values), width)
    for v in reversed(values):
        (b.PrependInt64 if width == 8 else b.PrependInt32)(v)
    return b.EndVector()


def _value_struct(b: flatbuffers.Builder, tag: int, hex_bytes: str) -> int:
    """The TensorValue struct, inline and aligned to its size, as hipDNN's code expects."""
    raw = bytes.fromhex(hex_bytes)
    assert len(raw) == struct.calcsize(VALUE_FORMAT_BY_TAG[tag])
    b.Prep(len(raw), 0)
    for byte in reversed(raw):
        b.PrependUint8(byte)
    return b.Offset()


def _tensor(b: flatbuffers.Builder, t: Desc, style: _Style) -> int:
    # children first (strings and vectors cannot be built inside a table), in another order
    # than Graph::Pack's (value struct first, then dims, strides, name)
    value = None  # a tag without a value is kept as such (hipDNN's Verifier rejects it)
    if t["value_type"] and t["value"] is not None:
        value = _value_struct(b, t["value_type"], t["value"])
    dims = _long_vector(b, t["dims"], style)
    strides = _long_vector(b, t["strides"], style)
    name = _string(b, t["name"], style)
    _start(b, TA, "TensorAttributes", style)  # fields in slot order (Graph::Pack adds them by size)
    TA.AddUid(b, t["uid"])
    if name is not None:
        TA.AddName(b, name)
    TA.AddDataType(b, t["data_type"])
    if strides is not None:
        TA.AddStrides(b, strides)
    if dims is not None:
        TA.AddDims(b, dims)
    TA.AddVirtual(b, t["virtual"])
    if t["value_type"]:
        TA.AddValueType(b, t["value_type"])
    if value is not None:
        TA.AddValue(b, value)
    TA.AddIsRuntimePassByValue(b, t["is_runtime_pass_by_value"])
    if t["ragged_offset_tensor_uid"] is not None:
        TA.AddRaggedOffsetTensorUid(b, t["ragged_offset_tensor_uid"])
    TA.AddAlignment(b, t["alignment"])
    TA.AddRaggedOffsetMultiplier(b, t["ragged_offset_multiplier"])
    return _end(b, TA, "TensorAttributes", style)


def _attributes(b: flatbuffers.Builder, tag: int, attrs: Desc, style: _Style) -> int:
    module = _MODULES[tag]
    strings = {
        field: _string(b, attrs[field], style)
        for field, kind in FIELDS_BY_TAG[tag]
        if kind == "str"
    }
    vectors = {
        field: _long_vector(b, attrs[field], style, VECTOR_WIDTHS[kind])
        for field, kind in FIELDS_BY_TAG[tag]
        if kind in VECTOR_WIDTHS
    }
    table = TABLE_BY_TAG[tag]
    _start(b, module, table, style)
    for field, kind in FIELDS_BY_TAG[tag]:
        value = attrs[field]
        add = getattr(module, f"Add{camel(field)}")
        if kind == "str":
            if strings[field] is not None:
                add(b, strings[field])
        elif kind in VECTOR_WIDTHS:
            if vectors[field] is not None:
                add(b, vectors[field])
        elif value is None:
            continue  # an absent optional
        elif kind == "ofloat":
            add(b, struct.unpack("<f", struct.pack("<I", value))[0])
        else:
            add(b, value)
    return _end(b, module, table, style)


def _node(b: flatbuffers.Builder, n: Desc, style: _Style) -> int:
    tag = n["attributes_type"]
    attrs = None
    if n["attributes"] is not None:
        attrs = _attributes(b, tag, n["attributes"], style)
    elif n["has_attributes"]:  # a table of an unmodelled kind: an empty table
        b.StartObject(0)
        attrs = b.EndObject()
    name = _string(b, n["name"], style)
    _start(b, N, "Node", style)
    if name is not None:
        N.AddName(b, name)
    N.AddComputeDataType(b, n["compute_data_type"])
    N.AddAttributesType(b, tag)
    if attrs is not None:
        N.AddAttributes(b, attrs)
    return _end(b, N, "Node", style)


def _table_vector(b: flatbuffers.Builder, offsets: list[int] | None) -> int | None:
    if offsets is None:
        return None
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def build(
    desc: Desc,
    *,
    force_defaults: bool = False,
    empty_as_present: bool = False,
    nodes_first: bool = False,
    newer_field_in: str | None = None,
) -> bytes:
    """A bare Graph blob of ``desc`` from the generated Python builder (non-canonical layout).

    Args:
        force_defaults: write every scalar even at its default (present-at-default fields).
        empty_as_present: write absent strings and vectors as present and empty.
        nodes_first: build the nodes (and their strings) before the tensors, as hipDNN's JSON
            reader does.
        newer_field_in: a table name of ``KNOWN_SLOTS``: every such table gets a field in the
            slot after hipDNN's last (as a newer schema would write).
    """
    style = _Style(force_defaults, empty_as_present, nodes_first, newer_field_in)
    b = flatbuffers.Builder(1024)
    b.ForceDefaults(force_defaults)

    def tensors() -> int | None:
        ts = desc["tensors"]
        return _table_vector(b, None if ts is None else [_tensor(b, t, style) for t in ts])

    def nodes() -> int | None:
        ns = desc["nodes"]
        return _table_vector(b, None if ns is None else [_node(b, n, style) for n in ns])

    if nodes_first:
        node_vec = nodes()
        tensor_vec = tensors()
    else:
        tensor_vec = tensors()
        node_vec = nodes()
    name = _string(b, desc["name"], style)
    _start(b, G, "Graph", style)
    if name is not None:
        G.AddName(b, name)
    G.AddComputeDataType(b, desc["compute_data_type"])
    G.AddIntermediateDataType(b, desc["intermediate_data_type"])
    G.AddIoDataType(b, desc["io_data_type"])
    if tensor_vec is not None:
        G.AddTensors(b, tensor_vec)
    if node_vec is not None:
        G.AddNodes(b, node_vec)
    if desc["preferred_engine_id"] is not None:
        G.AddPreferredEngineId(b, desc["preferred_engine_id"])
    G.AddIsOverrideShapeEnabled(b, desc["is_override_shape_enabled"])
    if desc["min_required_engine_api_version"] is not None:
        G.AddMinRequiredEngineApiVersion(
            b, CreateEngineApiVersion(b, *desc["min_required_engine_api_version"])
        )
    if desc["id"] is not None:
        G.AddId(b, CreateUuid(b, list(bytes.fromhex(desc["id"]))))
    b.Finish(_end(b, G, "Graph", style))
    return bytes(b.Output())


def build_container(
    graph_blob: bytes | None, plan_blob: bytes | None = None, pad: int = 0
) -> bytes:
    """An HDGP container (``serialized_graph_and_plan.fbs``) from the generated Python builder.

    Its byte vectors are only 4-aligned (unlike hipDNN's 8), so ``graph_blob`` may sit at an
    address that is not 8-aligned: a reader must copy it out before reading it. ``pad`` adds
    that many bytes of an ignored extra vector before the blobs, to move them.
    """
    b = flatbuffers.Builder(1024)
    if pad:
        b.CreateByteVector(bytes(pad))
    plan = None if plan_blob is None else b.CreateByteVector(plan_blob)
    graph = None if graph_blob is None else b.CreateByteVector(graph_blob)
    SGP.Start(b)
    if graph is not None:
        SGP.AddGraphBlob(b, graph)
    if plan is not None:
        SGP.AddPlanBlob(b, plan)
    b.Finish(SGP.End(b), file_identifier=b"HDGP")
    return bytes(b.Output())


def graph_blob_address(container: bytes) -> int:
    """Where the graph blob's first byte lies in ``container``."""
    root = SGP.SerializedGraphAndPlan.GetRootAs(bytearray(container), 0)
    return int(root._tab.Vector(root._tab.Offset(4)))

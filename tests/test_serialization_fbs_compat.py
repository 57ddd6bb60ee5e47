"""The hand-written codec and the flatc-generated code (schema/graph.fbs) agree on the format.

* bytes from ``record_to_bytes`` read correctly through the generated readers;
* bytes built with the generated builders (the ``flatbuffers`` runtime lays them out back to front,
  omits default values, shares nothing with our writer) decode to the same record.
"""

from __future__ import annotations

import math
from typing import Any

import flatbuffers
import pytest
from flatbuffers.table import Table

import hipdnn_graph.descriptors.fbs.BoolValue as BoolValueMod
import hipdnn_graph.descriptors.fbs.Float32Value as Float32ValueMod
import hipdnn_graph.descriptors.fbs.Float64Value as Float64ValueMod
import hipdnn_graph.descriptors.fbs.Graph as GraphMod
import hipdnn_graph.descriptors.fbs.Int32Value as Int32ValueMod
import hipdnn_graph.descriptors.fbs.Int64Value as Int64ValueMod
import hipdnn_graph.descriptors.fbs.Node as NodeMod
import hipdnn_graph.descriptors.fbs.SdpaAttributes as FwdMod
import hipdnn_graph.descriptors.fbs.SdpaBackwardAttributes as BwdMod
import hipdnn_graph.descriptors.fbs.TensorAttributes as TensorMod
from hipdnn_graph.descriptors import (
    FORMAT_VERSION,
    GraphRecord,
    NodeRecord,
    SdpaBwdRecord,
    SdpaFwdRecord,
    TensorRecord,
    record_from_bytes,
    record_to_bytes,
    record_to_json,
)
from hipdnn_graph.descriptors.fbs.Graph import Graph
from hipdnn_graph.descriptors.fbs.NodeAttributes import NodeAttributes
from hipdnn_graph.descriptors.fbs.SdpaAttributes import SdpaAttributes
from hipdnn_graph.descriptors.fbs.SdpaBackwardAttributes import SdpaBackwardAttributes
from hipdnn_graph.descriptors.fbs.TensorValue import TensorValue
from hipdnn_graph.errors import HipdnnError
from hipdnn_graph.types import DataType, DiagonalAlignment, ErrorCode

# The generated add-function of each record field whose name is not the camel-cased field name.
RENAMED = {"attn_scale": "ScaleTensorUid", "bias": "AttnMaskTensorUid"}


def camel(field: str) -> str:
    return "".join(part.capitalize() for part in field.split("_"))


def adder(field: str, uid: bool) -> str:
    return "Add" + RENAMED.get(field, camel(field) + ("TensorUid" if uid else ""))


def sample() -> GraphRecord:
    def t(uid: int, name: str, **kw: Any) -> TensorRecord:
        fields: dict[str, Any] = {
            "uid": uid,
            "name": name,
            "data_type": DataType.HALF,
            "dims": [1, 2, 16, 8],
            "strides": [256, 128, 8, 1],
        }
        fields.update(kw)
        return TensorRecord(**fields)

    names = [*SdpaBwdRecord.REQUIRED_UIDS, *SdpaBwdRecord.OPTIONAL_UIDS]
    tensors = [t(100 + i, f"t{i}:{name}") for i, name in enumerate(names)]
    tensors[9] = t(109, "scale", dims=[1], strides=[1], is_pass_by_value=True, value=0.5)
    tensors[13] = t(113, "seed", dims=[1], strides=[1], data_type=DataType.INT64, value=42)
    tensors[14] = t(114, "offset", dims=[1], strides=[1], data_type=DataType.BOOLEAN, value=False)
    tensors[15] = t(115, "mask", is_virtual=True, alignment=64)
    bwd = SdpaBwdRecord(
        **{name: 100 + i for i, name in enumerate(names)},
        padding_mask=True,
        causal_mask_bottom_right=True,
        dropout_probability=0.25,
        left_bound=3,
        right_bound=0,
        diagonal_alignment=DiagonalAlignment.BOTTOM_RIGHT,
    )
    fwd = SdpaFwdRecord(
        q=100, k=101, v=102, o=103, stats=105, bias=110, generate_stats=True, attn_scale_value=0.3
    )
    return GraphRecord(
        name="compat",
        compute_data_type=DataType.FLOAT,
        intermediate_data_type=DataType.FLOAT,
        io_data_type=DataType.HALF,
        preferred_engine_id=-1,
        tensors=tensors,
        nodes=[
            NodeRecord(name="fwd", compute_data_type=DataType.FLOAT, attributes=fwd),
            NodeRecord(name="bwd", compute_data_type=DataType.FLOAT, attributes=bwd),
        ],
    )


def build_with_generated_code(rec: GraphRecord, *, narrow_values: bool = False) -> bytes:
    """Serialize ``rec`` through the flatc-generated builders."""
    b = flatbuffers.Builder(256)

    def longs(start: Any, values: list[int]) -> int:
        start(b, len(values))
        for v in reversed(values):
            b.PrependInt64(v)
        return int(b.EndVector())

    def offsets(start: Any, items: list[int]) -> int:
        start(b, len(items))
        for item in reversed(items):
            b.PrependUOffsetTRelative(item)
        return int(b.EndVector())

    tensor_offsets = []
    for t in rec.tensors:
        name = b.CreateString(t.name)
        strides = longs(TensorMod.StartStridesVector, t.strides)
        dims = longs(TensorMod.StartDimsVector, t.dims)
        value = None
        if t.value is not None:
            if isinstance(t.value, bool):
                mod, kind = BoolValueMod, TensorValue.BoolValue
            elif isinstance(t.value, int):
                mod, kind = (
                    (Int32ValueMod, TensorValue.Int32Value)
                    if narrow_values
                    else (Int64ValueMod, TensorValue.Int64Value)
                )
            else:
                mod, kind = (
                    (Float32ValueMod, TensorValue.Float32Value)
                    if narrow_values
                    else (Float64ValueMod, TensorValue.Float64Value)
                )
            mod.Start(b)
            mod.AddValue(b, t.value)
            value = (kind, mod.End(b))
        TensorMod.Start(b)
        TensorMod.AddUid(b, t.uid)
        TensorMod.AddName(b, name)
        TensorMod.AddDataType(b, t.data_type)
        TensorMod.AddStrides(b, strides)
        TensorMod.AddDims(b, dims)
        TensorMod.AddVirtual(b, t.is_virtual)
        if value is not None:
            TensorMod.AddValueType(b, value[0])
            TensorMod.AddValue(b, value[1])
        TensorMod.AddIsRuntimePassByValue(b, t.is_pass_by_value)
        TensorMod.AddAlignment(b, t.alignment)
        tensor_offsets.append(TensorMod.End(b))

    node_offsets = []
    for node in rec.nodes:
        attrs = node.attributes
        mod, kind = (
            (BwdMod, NodeAttributes.SdpaBackwardAttributes)
            if isinstance(attrs, SdpaBwdRecord)
            else (FwdMod, NodeAttributes.SdpaAttributes)
        )
        name = b.CreateString(node.name)
        mod.Start(b)
        uid_fields = {*attrs.REQUIRED_UIDS, *attrs.OPTIONAL_UIDS}
        for field, value in attrs:
            if field != "type" and value is not None:
                getattr(mod, adder(field, field in uid_fields))(b, value)
        body = mod.End(b)
        NodeMod.Start(b)
        NodeMod.AddName(b, name)
        NodeMod.AddComputeDataType(b, node.compute_data_type)
        NodeMod.AddAttributesType(b, kind)
        NodeMod.AddAttributes(b, body)
        node_offsets.append(NodeMod.End(b))

    graph_name = b.CreateString(rec.name)
    tensors = offsets(GraphMod.StartTensorsVector, tensor_offsets)
    nodes = offsets(GraphMod.StartNodesVector, node_offsets)
    GraphMod.Start(b)
    GraphMod.AddName(b, graph_name)
    GraphMod.AddComputeDataType(b, rec.compute_data_type)
    GraphMod.AddIntermediateDataType(b, rec.intermediate_data_type)
    GraphMod.AddIoDataType(b, rec.io_data_type)
    GraphMod.AddTensors(b, tensors)
    GraphMod.AddNodes(b, nodes)
    if rec.preferred_engine_id is not None:
        GraphMod.AddPreferredEngineId(b, rec.preferred_engine_id)
    GraphMod.AddFormatVersion(b, FORMAT_VERSION)
    b.Finish(GraphMod.End(b), file_identifier=b"HDGR")
    return bytes(b.Output())


def test_generated_builders_decode_to_the_same_record() -> None:
    rec = sample()
    blob = build_with_generated_code(rec)
    assert blob != record_to_bytes(rec)  # a different layout ...
    back = record_from_bytes(blob)  # ... of the same content
    assert back == rec
    assert record_to_json(back) == record_to_json(rec)
    assert record_to_bytes(back) == record_to_bytes(rec)


def test_narrow_value_variants_are_read() -> None:
    rec = sample()
    back = record_from_bytes(build_with_generated_code(rec, narrow_values=True))
    assert [t.value for t in back.tensors if t.value is not None] == [0.5, 42, False]
    assert type(back.tensors[13].value) is int


def test_generated_readers_read_our_bytes() -> None:
    rec = sample()
    blob = record_to_bytes(rec)
    assert Graph.GraphBufferHasIdentifier(blob, 0)
    g = Graph.GetRootAs(blob, 0)
    assert g.Name() == b"compat"
    assert g.FormatVersion() == FORMAT_VERSION
    assert (g.ComputeDataType(), g.IoDataType()) == (DataType.FLOAT, DataType.HALF)
    assert g.PreferredEngineId() == -1
    assert g.TensorsLength() == len(rec.tensors)
    for i, t in enumerate(rec.tensors):
        ft = g.Tensors(i)
        assert ft.Uid() == t.uid and ft.Name().decode() == t.name
        assert ft.DataType() == t.data_type
        assert [ft.Dims(j) for j in range(ft.DimsLength())] == t.dims
        assert [ft.Strides(j) for j in range(ft.StridesLength())] == t.strides
        assert ft.Virtual() == t.is_virtual
        assert ft.IsRuntimePassByValue() == t.is_pass_by_value
        assert ft.Alignment() == t.alignment
        if t.value is None:
            assert ft.ValueType() == TensorValue.NONE
        else:
            table: Table = ft.Value()
            cls = {
                TensorValue.Float64Value: Float64ValueMod.Float64Value,
                TensorValue.Int64Value: Int64ValueMod.Int64Value,
                TensorValue.BoolValue: BoolValueMod.BoolValue,
            }[ft.ValueType()]
            value = cls()
            value.Init(table.Bytes, table.Pos)
            assert value.Value() == t.value
    fwd_node, bwd_node = g.Nodes(0), g.Nodes(1)
    assert fwd_node.AttributesType() == NodeAttributes.SdpaAttributes == 12
    assert bwd_node.AttributesType() == NodeAttributes.SdpaBackwardAttributes == 15
    fwd, bwd = SdpaAttributes(), SdpaBackwardAttributes()
    table = fwd_node.Attributes()
    fwd.Init(table.Bytes, table.Pos)
    table = bwd_node.Attributes()
    bwd.Init(table.Bytes, table.Pos)
    assert (fwd.QTensorUid(), fwd.StatsTensorUid(), fwd.AttnMaskTensorUid()) == (100, 105, 110)
    assert fwd.ScaleTensorUid() is None and fwd.GenerateStats() is True
    assert math.isclose(fwd.AttnScaleValue(), 0.3)
    assert (bwd.DoTensorUid(), bwd.DbiasTensorUid(), bwd.ScaleTensorUid()) == (104, 118, 109)
    assert bwd.PaddingMask() and not bwd.AlibiMask() and bwd.CausalMaskBottomRight()
    assert bwd.DropoutProbability() == 0.25 and bwd.AttnScaleValue() is None
    assert (bwd.LeftBound(), bwd.RightBound()) == (3, 0)
    assert bwd.DiagonalAlignment() == DiagonalAlignment.BOTTOM_RIGHT


@pytest.mark.parametrize("version", [0, 2])
def test_generated_builder_with_other_version_is_rejected(version: int) -> None:
    b = flatbuffers.Builder(64)
    GraphMod.Start(b)
    if version:
        GraphMod.AddFormatVersion(b, version)
    b.Finish(GraphMod.End(b), file_identifier=b"HDGR")
    with pytest.raises(HipdnnError) as info:
        record_from_bytes(bytes(b.Output()))
    assert info.value.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT

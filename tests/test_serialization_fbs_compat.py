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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


# ------------------------------------------------------------------------------------------------
# structurally valid buffers with wrong content (built with the generated builders)
# ------------------------------------------------------------------------------------------------


def tiny(
    *,
    node_kind: int = NodeAttributes.SdpaAttributes,
    value_kind: int = 0,
    data_type: int = DataType.HALF,
    alignment: int = DiagonalAlignment.TOP_LEFT,
    name: bytes = b"t",
    dims: tuple[int, ...] = (2, 2),
    with_vectors: bool = True,
) -> bytes:
    """A one-tensor, one-node graph with raw field values."""
    b = flatbuffers.Builder(64)
    if not with_vectors:
        GraphMod.Start(b)
        GraphMod.AddFormatVersion(b, FORMAT_VERSION)
        b.Finish(GraphMod.End(b), file_identifier=b"HDGR")
        return bytes(b.Output())
    tensor_name = b.CreateString(name)
    TensorMod.StartDimsVector(b, len(dims))
    for d in reversed(dims):
        b.PrependInt64(d)
    dims_vec = b.EndVector()
    TensorMod.StartStridesVector(b, len(dims))
    for _ in dims:
        b.PrependInt64(1)
    strides_vec = b.EndVector()
    value = None
    if value_kind:
        Float64ValueMod.Start(b)
        value = Float64ValueMod.End(b)
    TensorMod.Start(b)
    TensorMod.AddUid(b, 1)
    TensorMod.AddName(b, tensor_name)
    TensorMod.AddDataType(b, data_type)
    TensorMod.AddDims(b, dims_vec)
    TensorMod.AddStrides(b, strides_vec)
    if value is not None:
        TensorMod.AddValueType(b, value_kind)
        TensorMod.AddValue(b, value)
    tensor = TensorMod.End(b)
    FwdMod.Start(b)
    for uid in ("AddQTensorUid", "AddKTensorUid", "AddVTensorUid", "AddOTensorUid"):
        getattr(FwdMod, uid)(b, 1)
    FwdMod.AddDiagonalAlignment(b, alignment)
    attrs = FwdMod.End(b)
    NodeMod.Start(b)
    if node_kind:
        NodeMod.AddAttributesType(b, node_kind)
        NodeMod.AddAttributes(b, attrs)
    node = NodeMod.End(b)
    GraphMod.StartTensorsVector(b, 1)
    b.PrependUOffsetTRelative(tensor)
    tensors = b.EndVector()
    GraphMod.StartNodesVector(b, 1)
    b.PrependUOffsetTRelative(node)
    nodes = b.EndVector()
    GraphMod.Start(b)
    GraphMod.AddTensors(b, tensors)
    GraphMod.AddNodes(b, nodes)
    GraphMod.AddFormatVersion(b, FORMAT_VERSION)
    b.Finish(GraphMod.End(b), file_identifier=b"HDGR")
    return bytes(b.Output())


def test_tiny_graph_decodes() -> None:
    rec = record_from_bytes(tiny())
    assert rec.tensors[0].dims == [2, 2] and rec.nodes[0].attributes.type == "SDPA_FWD"
    assert record_from_bytes(tiny(with_vectors=False)) == GraphRecord()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"node_kind": 0}, "unsupported attributes type 0"),
        ({"node_kind": 3}, "unsupported attributes type 3"),
        ({"value_kind": 4}, "unsupported value type 4"),
        ({"data_type": 99}, "Unknown DataType value 99"),
        ({"alignment": 7}, "Unknown DiagonalAlignment value 7"),
        ({"name": b"\xff\xfe"}, "not valid UTF-8"),
        ({"dims": (1,) * 9}, "has 9 entries, more than 8"),
        ({"dims": (0, 1)}, "must have only positive dimensions"),
    ],
)
def test_wrong_content_is_invalid_value(options: dict[str, Any], message: str) -> None:
    with pytest.raises(HipdnnError, match=message) as info:
        record_from_bytes(tiny(**options))
    assert info.value.code == ErrorCode.INVALID_VALUE


def test_limits_on_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    from hipdnn_graph.descriptors import fb_reader, record_checks

    blob = record_to_bytes(sample())
    monkeypatch.setattr(fb_reader, "MAX_TENSORS", 3)
    with pytest.raises(HipdnnError, match="more than 3") as info:
        record_from_bytes(blob)
    assert info.value.code == ErrorCode.INVALID_VALUE
    monkeypatch.setattr(record_checks, "MAX_NODES", 1)
    with pytest.raises(HipdnnError, match="2 nodes, more than 1"):
        GraphRecord(nodes=sample().nodes, tensors=sample().tensors)


def test_overlapping_fields_are_malformed() -> None:
    from hipdnn_graph.descriptors import fb_reader

    with pytest.raises(HipdnnError, match="overlapping") as info:
        fb_reader._plan(fb_reader._NODE, (4, 5, 0, 0), 12)
    assert info.value.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT


FUZZ_BLOBS = [build_with_generated_code(sample()), tiny(), tiny(value_kind=6)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_generated_layouts(data: st.DataObject) -> None:
    """Bit flips and byte edits of buffers laid out by the flatbuffers runtime."""
    blob = bytearray(data.draw(st.sampled_from(FUZZ_BLOBS)))
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(blob) - 1))
        if data.draw(st.booleans()):
            blob[at] ^= 1 << data.draw(st.integers(0, 7))
        else:
            blob[at] = data.draw(st.integers(0, 255))
    try:
        rec = record_from_bytes(bytes(blob))
    except HipdnnError as err:
        assert err.code in (ErrorCode.UNSUPPORTED_GRAPH_FORMAT, ErrorCode.INVALID_VALUE)
    else:
        data = record_to_bytes(rec)
        assert record_to_bytes(record_from_bytes(data)) == data  # NaN-safe: canonical bytes
        has_nan = any(isinstance(t.value, float) and math.isnan(t.value) for t in rec.tensors)
        assert has_nan or record_from_bytes(data) == rec

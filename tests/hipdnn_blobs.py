"""An independent writer of hipDNN blobs, for tests: hipDNN's JSON document → FlatBuffers bytes.

Written against HIPDNN_WIRE.md's tables with the ``flatbuffers`` Python runtime (not the project's
writer), in an order of its own (nodes before tensors, fields in slot order), so the layouts it
makes are valid but not canonical: reading them and writing them back must give hipDNN's
canonical bytes. It can also write what the project never writes (other node kinds, unmodelled
fields, unknown DataType numbers, newer fields, containers) to test refusals.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import flatbuffers

# hipDNN's DataType numbers (data_types.fbs) by JSON name
DATA_TYPES = {
    "unset": 0, "float": 1, "half": 2, "bfloat16": 3, "double": 4, "uint8": 5, "int32": 6,
    "int8": 7, "fp8_e4m3": 8, "fp8_e5m2": 9, "fp8_e8m0": 10, "fp4_e2m1": 11, "fp6_e2m3": 12,
    "fp6_e3m2": 13, "int4": 14, "int64": 15, "boolean": 16, "fp8_e4m3_fnuz": 17,
    "fp8_e5m2_fnuz": 18,
}  # fmt: skip
VALUE_MEMBERS = {
    "Float32Value": (1, "f", 4), "Float16Value": (2, "f", 4), "BFloat16Value": (3, "f", 4),
    "Float8Value": (4, "B", 1), "Int32Value": (5, "i", 4), "Float64Value": (6, "d", 8),
    "Int64Value": (7, "q", 8), "BoolValue": (8, "?", 1),
}  # fmt: skip
_FWD_UIDS = [
    "q", "k", "v", "o", "attn_mask", "scale", "seq_len_q", "seq_len_kv", "seed", "offset",
    "dropout_mask", "dropout_scale", "page_table_k", "page_table_v", "block_mask", "sink_token",
    "descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o", "stats", "max",
    "sum_exp", "rng_dump", "amax_s", "amax_o",
]  # fmt: skip
_BWD_UIDS = [
    "q", "k", "v", "o", "do", "stats", "dq", "dk", "dv", "scale", "attn_mask", "seq_len_q",
    "seq_len_kv", "seed", "offset", "dropout_mask", "dropout_scale", "dropout_scale_inv",
    "dbias",
]  # fmt: skip
# (field, slot, kind) of each node table, from HIPDNN_WIRE.md A7 and A8
FIELDS: dict[str, tuple[int, list[tuple[str, int, str]]]] = {
    "SdpaAttributes": (
        12,
        [(f"{n}_tensor_uid", i, "uid" if i < 4 else "uid?") for i, n in enumerate(_FWD_UIDS)]
        + [
            ("generate_stats", 28, "bool?"),
            ("alibi_mask", 29, "bool"),
            ("padding_mask", 30, "bool"),
            ("causal_mask", 31, "bool"),
            ("causal_mask_bottom_right", 32, "bool"),
            ("dropout_probability", 33, "float?"),
            ("attn_scale_value", 34, "float?"),
            ("left_bound", 35, "long?"),
            ("right_bound", 36, "long?"),
            ("max_seq_len_kv", 37, "int?"),
            ("diagonal_alignment", 38, "align"),
            ("mma_core_mode", 39, "dtype"),
            ("implementation", 40, "impl"),
        ],
    ),
    "SdpaBackwardAttributes": (
        15,
        [(f"{n}_tensor_uid", i, "uid" if i < 9 else "uid?") for i, n in enumerate(_BWD_UIDS)]
        + [
            ("alibi_mask", 19, "bool"),
            ("padding_mask", 20, "bool"),
            ("causal_mask", 21, "bool"),
            ("causal_mask_bottom_right", 22, "bool"),
            ("dropout_probability", 23, "float?"),
            ("attn_scale_value", 24, "float?"),
            ("left_bound", 25, "long?"),
            ("right_bound", 26, "long?"),
            ("diagonal_alignment", 27, "align"),
        ],
    ),
}


def _flat(node: dict[str, Any]) -> dict[str, Any]:
    """Every field of a JSON node by its schema name."""
    scalars = node.get("attributes", node.get("parameters", {}))
    return {**node["inputs"], **node["outputs"], **scalars}


def _longs(b: flatbuffers.Builder, values: list[int]) -> int:
    b.StartVector(8, len(values), 8)
    for v in reversed(values):
        b.PrependInt64(v)
    return int(b.EndVector())


def _node(b: flatbuffers.Builder, node: dict[str, Any], extra: dict[int, Any]) -> int:
    tag, fields = FIELDS[node["type"]]
    values = _flat(node)
    name = b.CreateString(node["name"]) if node["name"] else 0
    b.StartObject(max([s for _, s, _ in fields] + list(extra)) + 1)
    for field, slot, kind in fields:
        value = values.get(field)
        if kind == "uid":
            b.PrependInt64Slot(slot, value, 0)
        elif value is None:
            continue
        elif kind in ("uid?", "long?"):
            b.PrependInt64Slot(slot, value, None)
        elif kind == "int?":
            b.PrependInt32Slot(slot, value, None)
        elif kind == "float?":
            b.PrependFloat32Slot(slot, value, None)
        elif kind in ("bool", "bool?"):
            b.PrependBoolSlot(slot, value, False if kind == "bool" else None)
        elif kind == "align":
            b.PrependInt8Slot(slot, ["TOP_LEFT", "BOTTOM_RIGHT"].index(value), 0)
        elif kind == "dtype":
            b.PrependInt8Slot(slot, DATA_TYPES[value], 0)
        elif kind == "impl":
            b.PrependInt8Slot(slot, ["AUTO", "COMPOSITE", "UNIFIED"].index(value), 0)
    for slot, value in extra.items():
        b.PrependInt64Slot(slot, value, None)
    body = b.EndObject()
    b.StartObject(4)
    if name:
        b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependInt8Slot(1, DATA_TYPES[node["compute_data_type"]], 0)
    b.PrependUint8Slot(2, node.get("tag", tag), 0)
    b.PrependUOffsetTRelativeSlot(3, body, 0)
    return int(b.EndObject())


def _tensor(b: flatbuffers.Builder, t: dict[str, Any]) -> int:
    name = b.CreateString(t["name"]) if t["name"] else 0
    dims = _longs(b, t["dims"]) if t["dims"] else 0
    strides = _longs(b, t["strides"]) if t["strides"] else 0
    value = 0
    member = VALUE_MEMBERS.get(t.get("value_type", ""))
    if member is not None:
        _, code, size = member
        b.Prep(size, 0)
        b.head -= size
        struct.pack_into("<" + code, b.Bytes, b.head, t["value"])
        value = b.Offset()
    b.StartObject(12)
    b.PrependInt64Slot(0, t["uid"], 0)
    if name:
        b.PrependUOffsetTRelativeSlot(1, name, 0)
    b.PrependInt8Slot(2, DATA_TYPES.get(t["data_type"], t["data_type"]), 0)
    if strides:
        b.PrependUOffsetTRelativeSlot(3, strides, 0)
    if dims:
        b.PrependUOffsetTRelativeSlot(4, dims, 0)
    b.PrependBoolSlot(5, t["virtual"], False)
    if member is not None:
        b.PrependUint8Slot(6, member[0], 0)
        b.PrependUOffsetTRelativeSlot(7, value, 0)
    b.PrependBoolSlot(8, t["is_runtime_pass_by_value"], False)
    if "ragged_offset_tensor_uid" in t:
        b.PrependInt64Slot(9, t["ragged_offset_tensor_uid"], None)
    b.PrependInt64Slot(10, t.get("alignment", 16), 16)
    b.PrependInt64Slot(11, t.get("ragged_offset_multiplier", 1), 1)
    return int(b.EndObject())


def _offsets(b: flatbuffers.Builder, refs: list[int]) -> int:
    b.StartVector(4, len(refs), 4)
    for ref in reversed(refs):
        b.PrependUOffsetTRelative(ref)
    return int(b.EndVector())


def blob_from_doc(doc: dict[str, Any], *, node_extra: dict[int, Any] | None = None) -> bytes:
    """hipDNN bytes of a hipDNN JSON document, laid out by the flatbuffers Python runtime.

    ``node_extra`` adds optional long fields at the given slots to every node table (to write
    fields a newer schema would have).
    """
    b = flatbuffers.Builder(1024)
    nodes = [_node(b, n, node_extra or {}) for n in doc["nodes"]]
    tensors = [_tensor(b, t) for t in doc["tensors"]]
    nodes_ref = _offsets(b, nodes) if nodes else 0
    tensors_ref = _offsets(b, tensors) if tensors else 0
    name = b.CreateString(doc["name"]) if doc["name"] else 0
    b.StartObject(10)
    if name:
        b.PrependUOffsetTRelativeSlot(0, name, 0)
    for slot, key in ((1, "compute_data_type"), (2, "intermediate_data_type"), (3, "io_data_type")):
        b.PrependInt8Slot(slot, DATA_TYPES[doc[key]], 0)
    if tensors_ref:
        b.PrependUOffsetTRelativeSlot(4, tensors_ref, 0)
    if nodes_ref:
        b.PrependUOffsetTRelativeSlot(5, nodes_ref, 0)
    if doc.get("preferred_engine_id") is not None:
        b.PrependInt64Slot(6, doc["preferred_engine_id"], None)
    b.PrependBoolSlot(7, doc.get("is_override_shape_enabled", False), False)
    version = doc.get("min_required_engine_api_version")
    if version is not None:
        b.Prep(4, 12)
        for part in ("patch", "minor", "major"):
            b.PrependUint32(version[part])
        b.PrependStructSlot(8, b.Offset(), 0)
    if doc.get("id") is not None:
        b.Prep(1, 16)
        for byte in reversed(uuid.UUID(doc["id"]).bytes):
            b.PrependUint8(byte)
        b.PrependStructSlot(9, b.Offset(), 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def container(graph_blob: bytes, plan_blob: bytes | None = None) -> bytes:
    """hipDNN's ``HDGP`` graph-and-plan container around a graph blob."""
    b = flatbuffers.Builder(len(graph_blob) + 64)
    plan = 0
    if plan_blob is not None:
        b.StartVector(1, len(plan_blob), 8)
        b.head -= len(plan_blob)
        b.Bytes[b.head : b.head + len(plan_blob)] = plan_blob
        plan = b.EndVector()
    b.StartVector(1, len(graph_blob), 8)
    b.head -= len(graph_blob)
    b.Bytes[b.head : b.head + len(graph_blob)] = graph_blob
    graph = b.EndVector()
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, graph, 0)
    if plan:
        b.PrependUOffsetTRelativeSlot(1, plan, 0)
    b.Finish(b.EndObject(), file_identifier=b"HDGP")
    return bytes(b.Output())

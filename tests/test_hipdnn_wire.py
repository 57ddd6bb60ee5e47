"""hipDNN's wire, both ways (HIPDNN_WIRE.md): the spec's anchors, blobs laid out by another
writer, JSON details, refusals, the container, metadata, order, and the JSON Schema."""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hipdnn_blobs import DATA_TYPES, blob_from_doc, container
from sdpa_graph_cases import WIRE_CASES

import hipdnn_graph as hg
from hipdnn_graph.descriptors import json_schema, node_specs, read_graph
from hipdnn_graph.descriptors.fb_read import NODE_KINDS
from hipdnn_graph.descriptors.hipdnn_json import format_number
from hipdnn_graph.types import ErrorCode

SPEC = Path(__file__).resolve().parents[2] / "shared" / "HIPDNN_WIRE.md"
ANCHORS = {  # (JSON chars, JSON SHA-256, bytes, bytes SHA-256), from HIPDNN_WIRE.md B8 and A11
    1: (
        2260,
        "415e07b11c9a4dc6df8b196d4ca614dad31eba90168d665ac05db239b7d73f1c",
        1336,
        "a6fb16f321741129409312373c7cd9c926441ce71cbb6ade526bcbb21afb1626",
    ),
    2: (
        3799,
        "ba0d4cd464d978d53eeed0eeb62610393fa972d8c8dca4a04831b6d94d7447af",
        1816,
        "b406e8cdca74fe0e9011284ec480c72c833b2f79775dd3338474cfc383506d0c",
    ),
}
EXAMPLES = Path(__file__).resolve().parent / "data"
CASE_IDS = sorted(WIRE_CASES)


def _sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _example(n: int) -> str:
    return (EXAMPLES / f"hipdnn_example_{n}.json").read_text().strip()


def _refused(call: Any, *args: Any, code: ErrorCode = ErrorCode.UNSUPPORTED_GRAPH_FORMAT) -> str:
    with pytest.raises(hg.HipdnnError) as err:
        call(*args)
    assert err.value.code == code, err.value.message
    return err.value.message


def _doc(case: str) -> dict[str, Any]:
    g = WIRE_CASES[case]()
    g.validate()
    result: dict[str, Any] = json.loads(g.to_json())
    return result


# ----- the spec's two example graphs -------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2])
def test_spec_examples_read_and_write_back_identically(n: int) -> None:
    chars, json_sha, size, bytes_sha = ANCHORS[n]
    text = _example(n)
    assert (len(text), _sha(text)) == (chars, json_sha)
    g = hg.Graph.from_json(text)
    assert g.to_json() == text
    blob = g.serialize()
    assert (len(blob), _sha(blob)) == (size, bytes_sha)
    back = hg.Graph.deserialize(blob)
    assert back.serialize() == blob and back.to_json() == text


@pytest.mark.skipif(not SPEC.exists(), reason="the spec lies beside the checkout")
def test_example_files_are_the_spec_examples() -> None:
    blocks = re.findall(r"```json\n(.*?)```", SPEC.read_text(), re.S)
    for n, block in enumerate(blocks, start=1):
        assert "".join(line.strip() for line in block.splitlines()) == _example(n)


def test_spec_example_2_keeps_order_virtual_values_id_and_engine() -> None:
    g = hg.Graph.from_json(_example(2))
    assert [t.uid for t in g.tensors] == [1, 2, 3, 10, 11, 20, 21, 5, 7, 8, 9]
    seed = next(t for t in g.tensors if t.name == "Seed")
    assert seed.get_value() == 1234 and seed.get_data_type() == hg.DataType.INT64
    assert [t.get_is_virtual() for t in g.tensors][3:5] == [True, True]
    assert g.wire_metadata.id == bytes.fromhex("6f1c2a9e3b7d4c529a1e0d4b8e7f5a21")
    assert g.get_preferred_engine_id_ext() == 7
    fwd, bwd = (n.attributes for n in g.nodes)
    assert fwd.get_dropout_probability() == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert bwd.get_causal_mask() and fwd.get_generate_stats() is True


# ----- every graph case, and layouts of another writer -------------------------------------------


@pytest.mark.parametrize("case", CASE_IDS)
def test_other_layouts_read_equal_and_write_back_canonical(case: str) -> None:
    g = WIRE_CASES[case]()
    g.validate()
    canonical, text = g.serialize(), g.to_json()
    other = blob_from_doc(json.loads(text))
    assert other != canonical  # another layout of the same content
    back = hg.Graph.deserialize(other)
    assert back.to_json() == text
    assert back.serialize() == canonical


@pytest.mark.parametrize("case", CASE_IDS)
def test_bytes_json_and_key_agree(case: str) -> None:
    g = WIRE_CASES[case]()
    blob, text = g.serialize(), g.to_json()
    assert hg.Graph.from_json(text).serialize() == blob
    assert hg.Graph.deserialize(blob).to_json() == text
    assert hg.Graph.deserialize(blob).key() == g.key()
    assert g.serialize(format="hipdnn") == blob and g.to_json(format="hipdnn") == text
    assert hg.Graph.deserialize(blob, format="hipdnn").to_json() == text
    assert hg.Graph.from_json(text, format="hipdnn").to_json() == text


def test_an_unknown_format_is_refused() -> None:
    g = WIRE_CASES["fwd"]()
    message = _refused(g.serialize, "HDGR")
    assert message == "Unknown graph format 'HDGR'; supported: hipdnn"
    _refused(hg.Graph.deserialize, g.serialize(), "cudnn")


def test_tensor_order_is_kept_as_read() -> None:
    doc = _doc("fwd_bwd")
    doc["tensors"].reverse()
    text = json.dumps(doc, separators=(",", ":"), sort_keys=True)
    g = hg.Graph.from_json(text)
    assert [t.uid for t in g.tensors] == [t["uid"] for t in doc["tensors"]]
    assert g.to_json() == text
    assert [t.uid for t in hg.Graph.deserialize(g.serialize()).tensors] == [
        t["uid"] for t in doc["tensors"]
    ]


def test_graph_metadata_survives_both_ways() -> None:
    doc = _doc("bwd")
    doc["id"] = "0123abcd-0000-4000-8000-00000000beef"
    doc["min_required_engine_api_version"] = {"major": 1, "minor": 2, "patch": 3}
    doc["is_override_shape_enabled"] = True
    text = json.dumps(doc, separators=(",", ":"), sort_keys=True)
    g = hg.Graph.from_json(text)
    assert g.wire_metadata.min_required_engine_api_version == (1, 2, 3)
    assert g.wire_metadata.is_override_shape_enabled
    assert g.to_json() == text
    assert hg.Graph.deserialize(blob_from_doc(doc)).to_json() == text
    assert hg.Graph.deserialize(g.serialize()).to_json() == text


# ----- the bytes ---------------------------------------------------------------------------------


def test_no_file_identifier_and_8_byte_fields_8_aligned() -> None:
    blob = WIRE_CASES["bwd_full"]().serialize()
    assert b"HDGR" not in blob[:8]
    graph = read_graph(blob)
    assert graph.tensors and graph.nodes  # read with every alignment check on


def test_float_attributes_are_binary32() -> None:
    g = WIRE_CASES["fwd_full"]()
    a = g.nodes[0].attributes
    a.dropout_probability = 0.1  # a double, written as the nearest binary32
    back = hg.Graph.deserialize(g.serialize()).nodes[0].attributes
    assert back.get_dropout_probability() == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    a.attn_scale_value = 1e300
    message = _refused(g.serialize)
    assert "does not fit a 32-bit float" in message


@pytest.mark.parametrize(
    ("dtype", "value", "member"),
    [
        ("float", 0.5, "Float32Value"),
        ("half", 0.1, "Float16Value"),
        ("bfloat16", 0.3, "BFloat16Value"),
        ("double", 0.1, "Float64Value"),
        ("int32", -7, "Int32Value"),
        ("int64", 2**40, "Int64Value"),
        ("uint8", 200, "Float8Value"),
        ("int8", -3, "Float8Value"),
        ("fp8_e4m3", 0.375, "Float8Value"),
    ],
)
def test_value_member_follows_the_data_type(dtype: str, value: Any, member: str) -> None:
    doc = _doc("scalar_float")
    scale = next(t for t in doc["tensors"] if t["name"] == "Scale")
    g = hg.Graph.from_json(json.dumps(doc))
    t = next(t for t in g.tensors if t.name == "Scale")
    t.set_data_type(hg.DataType[dtype.upper()]).value = value
    written = json.loads(g.to_json())
    scale = next(t for t in written["tensors"] if t["name"] == "Scale")
    assert scale["value_type"] == member and scale["data_type"] == dtype
    assert hg.Graph.deserialize(g.serialize()).to_json() == g.to_json()
    if member == "Float8Value":
        assert 0 <= scale["value"] <= 255


def test_a_mismatched_value_member_is_refused() -> None:
    doc = _doc("scalar_float")
    scale = next(t for t in doc["tensors"] if t["name"] == "Scale")
    scale["value_type"] = "Float64Value"  # hipDNN's "mismatched tensor value type"
    expected = "Tensor Scale: a FLOAT tensor stores its value as Float32Value, not Float64Value"
    assert _refused(hg.Graph.from_json, json.dumps(doc)) == expected
    assert _refused(hg.Graph.deserialize, blob_from_doc(doc)) == expected


def test_data_type_numbers_are_hipdnns() -> None:
    # the other writer numbers data types from the spec's table: equal reads mean equal numbers
    g = WIRE_CASES["scalar_float"]()
    q = next(t for t in g.tensors if t.name == "Q")
    for name in DATA_TYPES:
        if name != "unset":
            q.set_data_type(hg.DataType[name.upper()])
            text = g.to_json()
            assert json.loads(text)["tensors"][0]["data_type"] == name
            assert hg.Graph.deserialize(blob_from_doc(json.loads(text))).to_json() == text


def test_data_type_numbers_past_the_schema_are_refused() -> None:
    doc = _doc("fwd")
    doc["tensors"][0]["data_type"] = 19
    assert _refused(hg.Graph.deserialize, blob_from_doc(doc)) == (
        "Tensor Q: DataType 19 is not in hipDNN's schema"
    )


def test_boolean_tensors_are_number_16_and_json_boolean() -> None:
    """A5: BOOLEAN is hipDNN's DataType 16 (the FNUZ types 17 and 18), "boolean" in JSON."""
    g = WIRE_CASES["fwd"]()
    next(t for t in g.tensors if t.name == "Q").set_data_type(hg.DataType.BOOLEAN)
    text = g.to_json()
    assert json.loads(text)["tensors"][0]["data_type"] == "boolean"
    doc = json.loads(text)
    doc["tensors"][0]["data_type"] = 16
    back = hg.Graph.deserialize(blob_from_doc(doc))
    assert next(t for t in back.tensors if t.name == "Q").get_data_type() is hg.DataType.BOOLEAN
    assert back.to_json() == text
    assert hg.Graph.deserialize(g.serialize()).to_json() == text
    for name, number in (("FP8_E4M3_FNUZ", 17), ("FP8_E5M2_FNUZ", 18)):
        doc["tensors"][0]["data_type"] = number
        q = hg.Graph.deserialize(blob_from_doc(doc)).tensors[0]
        assert q.get_data_type() is hg.DataType[name]


# ----- refusals: other nodes, newer fields, unmodelled content -----------------------------------


def test_other_node_kinds_are_refused_by_name() -> None:
    """A node of a kind no family models is refused naming its kind and the supported ones: the
    first unmodelled ``NodeAttributes`` member found at run time (families keep being added),
    else a tag past hipDNN's union."""
    specs = node_specs()
    unmodelled = [tag for tag in range(1, len(NODE_KINDS)) if tag not in specs]
    tag = unmodelled[0] if unmodelled else len(NODE_KINDS)
    doc = _doc("fwd")
    doc["nodes"][0]["tag"] = tag
    doc["nodes"][0]["name"] = "mm"
    message = _refused(hg.Graph.deserialize, blob_from_doc(doc))
    # the supported kinds are the registered families, by union tag
    supported = ", ".join(f"{s.table} ({t})" for t, s in sorted(specs.items()))
    supported = " and ".join(supported.rsplit(", ", 1))
    kind = NODE_KINDS[tag] if unmodelled else "an unknown kind"
    assert message == f'hipDNN node "mm" has kind {kind} ({tag}); only {supported} are supported'
    assert "(9), RMSNormAttributes (10), LayernormAttributes (11), SdpaAttributes (12)" in message
    assert (
        "(9), RMSNormAttributes (10), LayernormAttributes (11), SdpaAttributes (12), "
        "BlockScaleDequantizeAttributes (13), BlockScaleQuantizeAttributes (14), "
        "SdpaBackwardAttributes (15), CustomOpAttributes (16), RMSNormBackwardAttributes (17), "
        "ReductionAttributes (18), ResampleFwdAttributes (19), LayernormBackwardAttributes (20), "
        "ResampleBwdAttributes (21), MoeGroupedMatmulAttributes (22) and "
        "MoeGroupedMatmulBwdAttributes (23) are supported" in message
    )
    if unmodelled:
        doc["nodes"][0]["type"] = NODE_KINDS[tag]
        assert _refused(hg.Graph.from_json, json.dumps(doc)) == message
    doc["nodes"][0]["type"] = "PoolingAttributes"
    assert _refused(hg.Graph.from_json, json.dumps(doc)) == (
        f"hipDNN node \"mm\" has kind 'PoolingAttributes'; only {supported} are supported"
    )


def test_fields_of_a_newer_schema_are_refused() -> None:
    doc = _doc("bwd")
    message = _refused(hg.Graph.deserialize, blob_from_doc(doc, node_extra={40: 5}))
    assert message == (
        'hipDNN node "grad": SdpaBackwardAttributes field 40 is not in hipDNN\'s schema as known '
        "here (written by a newer hipDNN?)"
    )


@pytest.mark.parametrize(
    ("group", "key", "value"),
    [
        ("inputs", "page_table_k_tensor_uid", 1),
        ("outputs", "max_tensor_uid", 1),
        ("attributes", "max_seq_len_kv", 64),
        ("attributes", "mma_core_mode", "half"),
        ("attributes", "implementation", "UNIFIED"),
    ],
)
def test_unmodelled_forward_content_is_refused_not_dropped(
    group: str, key: str, value: Any
) -> None:
    doc = _doc("fwd")
    doc["nodes"][0][group][key] = value
    message = _refused(hg.Graph.from_json, json.dumps(doc))
    assert f"SdpaAttributes.{key} = " in message and "is not supported" in message
    assert _refused(hg.Graph.deserialize, blob_from_doc(doc)) == message


def test_ragged_offsets_read_from_json_and_bytes_alike() -> None:
    doc = _doc("fwd")
    doc["tensors"][0]["ragged_offset_multiplier"] = 2
    doc["tensors"][0]["ragged_offset_tensor_uid"] = doc["tensors"][1]["uid"]
    for g in (hg.Graph.from_json(json.dumps(doc)), hg.Graph.deserialize(blob_from_doc(doc))):
        q = g.tensors[0]
        assert q.get_ragged_offset_multiplier() == 2
        assert q.get_ragged_offset() is g.tensors[1]
    doc["tensors"][0]["ragged_offset_tensor_uid"] = 999
    message = _refused(hg.Graph.from_json, json.dumps(doc), code=ErrorCode.INVALID_VALUE)
    assert message == (
        "Tensor Q refers to ragged offset tensor uid 999, which is not a tensor of the graph"
    )
    assert _refused(hg.Graph.deserialize, blob_from_doc(doc), code=ErrorCode.INVALID_VALUE) == (
        message
    )


# ----- the HDGP container ------------------------------------------------------------------------


def test_container_reads_as_its_graph_blob() -> None:
    g = WIRE_CASES["fwd_bwd"]()
    blob = g.serialize()
    for wrapped in (container(blob), container(blob, b"opaque plan bytes")):
        assert wrapped[4:8] == b"HDGP"
        assert hg.Graph.deserialize(wrapped).serialize() == blob
    empty = container(b"")
    assert _refused(hg.Graph.deserialize, empty).endswith("container has no graph blob.")


# ----- JSON details ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"), (0.5, "0.5"), (123.0, "123.0"), (0.0001, "0.0001"), (1e-05, "1e-05"),
        (1e15, "1e+15"), (1e16, "1e+16"), (123456789012345.0, "123456789012345.0"),
        (-0.0, "-0.0"), (0.10000000149011612, "0.10000000149011612"), (1.5e300, "1.5e+300"),
        (-2.5e-7, "-2.5e-07"),
    ],
)  # fmt: skip
def test_numbers_are_written_as_nlohmann_writes_them(value: float, text: str) -> None:
    assert format_number(value) == text
    assert float(text) == value


def test_nan_and_infinity_are_refused_not_written_as_null() -> None:
    g = WIRE_CASES["scalar_double"]()
    g.build_operation_graph()  # uids assigned: the graph is written as it stands
    next(t for t in g.tensors if t.name == "Scale").value = float("nan")
    assert "cannot be written in JSON" in _refused(g.to_json)
    assert hg.Graph.deserialize(g.serialize()).serialize() == g.serialize()  # bytes hold NaN


def test_strings_are_escaped_as_hipdnn_does() -> None:
    g = WIRE_CASES["fwd"]()
    g.set_name('a"b\\c\n\x01\x7f/é')
    text = g.to_json()
    assert '"name":"a\\"b\\\\c\\n\\u0001\x7f/é"' in text
    assert hg.Graph.from_json(text).get_name() == 'a"b\\c\n\x01\x7f/é'


def test_json_reader_accepts_whitespace_key_order_bom_and_legacy_backward_group() -> None:
    doc = _doc("bwd")
    g = hg.Graph.from_json(json.dumps(doc, indent=3))
    text = g.to_json()
    assert hg.Graph.from_json(("\ufeff" + json.dumps(doc)).encode()).to_json() == text
    doc["nodes"][0]["attributes"] = doc["nodes"][0].pop("parameters")
    assert hg.Graph.from_json(json.dumps(doc)).to_json() == text
    doc["nodes"][0]["parameters"] = doc["nodes"][0]["attributes"]
    assert "both 'parameters' and 'attributes'" in _refused(hg.Graph.from_json, json.dumps(doc))


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d.pop("tensors"), "key 'tensors' not found in graph"),
        (lambda d: d["nodes"][0]["inputs"].pop("q_tensor_uid"), "key 'q_tensor_uid' not found"),
        (lambda d: d["tensors"][0].update(uid=1.0), "tensors[0].uid must be an integer"),
        (lambda d: d["tensors"][0].update(dims=[1, "2"]), "dims must be an array of 64-bit"),
        (lambda d: d.update(io_data_type="BFLOAT16"), "'BFLOAT16' is not a hipDNN data type"),
        (lambda d: d["nodes"][0]["parameters"].update(causal_mask=1), "must be true or false"),
    ],
)
def test_json_shape_errors_name_the_key(edit: Any, expected: str) -> None:
    doc = _doc("bwd")
    edit(doc)
    assert expected in _refused(hg.Graph.from_json, json.dumps(doc))


def test_json_reads_as_hipdnns_reader_unknown_keys_ignored_optional_keys_defaulted() -> None:
    """nlohmann::json ignores keys hipDNN's reader does not ask for (``_comment``); the keys it
    reads with ``.value`` or ``contains`` (is_runtime_pass_by_value, alignment, the graph's
    is_override_shape_enabled) take its defaults; ``"UNSET"`` reads as UNSET."""
    text = WIRE_CASES["bwd"]().to_json()
    doc = json.loads(text)
    doc["_comment"] = "written by hand"
    doc["nodes"][0]["colour"] = "red"
    doc["nodes"][0]["parameters"]["umd_flops"] = 7
    for tensor in doc["tensors"]:
        tensor["colour"] = "red"
        del tensor["is_runtime_pass_by_value"], tensor["alignment"]
    del doc["is_override_shape_enabled"]
    doc["compute_data_type"] = "UNSET"
    read = hg.Graph.from_json(json.dumps(doc))
    assert read.get_compute_data_type() is hg.DataType.NOT_SET
    assert all(t.alignment == 16 and not t.is_pass_by_value for t in read.wire_tensors())
    unset = text.replace('"compute_data_type":"float"', '"compute_data_type":"unset"', 1)
    assert read.to_json() == unset


def test_duplicate_keys_and_constants_are_refused() -> None:
    text = WIRE_CASES["fwd"]().to_json()
    assert "duplicate key 'name'" in _refused(hg.Graph.from_json, '{"name":"a",' + text[1:])
    assert "NaN is not a JSON number" in _refused(
        hg.Graph.from_json, text.replace('"alignment":16', '"alignment":NaN', 1)
    )


@pytest.mark.parametrize("case", CASE_IDS)
def test_json_validates_against_the_exported_schema(case: str) -> None:
    jsonschema.validate(_doc(case), json_schema())


def test_schema_rejects_what_the_reader_rejects() -> None:
    doc = _doc("fwd")
    doc["nodes"][0]["inputs"]["page_table_k_tensor_uid"] = "x"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json_schema())

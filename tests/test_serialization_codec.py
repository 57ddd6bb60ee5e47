"""Graph records and their two wire formats: round trips, keys, limits and malformed input.

Every decoder call must either return a valid record or raise HipdnnError with
UNSUPPORTED_GRAPH_FORMAT or INVALID_VALUE; the fuzz tests check exactly that.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sdpa_graph_cases import json_paths

from hipdnn_graph.descriptors import (
    FORMAT_VERSION,
    MAX_INPUT_BYTES,
    GraphRecord,
    NodeRecord,
    SdpaBwdRecord,
    SdpaFwdRecord,
    TensorRecord,
    fb_reader,
    json_schema,
    record_from_bytes,
    record_from_json,
    record_key,
    record_to_bytes,
    record_to_json,
)
from hipdnn_graph.errors import HipdnnError
from hipdnn_graph.types import DataType, DiagonalAlignment, ErrorCode

DECODE_ERRORS = {ErrorCode.UNSUPPORTED_GRAPH_FORMAT, ErrorCode.INVALID_VALUE}
BWD_UIDS = (*SdpaBwdRecord.REQUIRED_UIDS, *SdpaBwdRecord.OPTIONAL_UIDS)
FWD_UIDS = (*SdpaFwdRecord.REQUIRED_UIDS, *SdpaFwdRecord.OPTIONAL_UIDS)
OPTIONAL_SCALARS = {
    "dropout_probability": 0.1,
    "attn_scale_value": 0.125,
    "left_bound": 64,
    "right_bound": 0,
}
FLAGS = ("alibi_mask", "padding_mask", "causal_mask", "causal_mask_bottom_right")

# ------------------------------------------------------------------------------------------------
# builders
# ------------------------------------------------------------------------------------------------


def tensor(uid: int, name: str, **kw: Any) -> TensorRecord:
    scalar = kw.pop("scalar", False)
    fields: dict[str, Any] = {
        "uid": uid,
        "name": name,
        "data_type": DataType.FLOAT if scalar else DataType.BFLOAT16,
        "dims": [1] if scalar else [2, 4, 64, 32],
        "strides": [1] if scalar else [8192, 2048, 32, 1],
        "is_pass_by_value": scalar,
    }
    fields.update(kw)
    return TensorRecord(**fields)


def bwd_record(*, optional: bool, name: str = "SdpaBwd_0") -> GraphRecord:
    """An SDPA-backward graph; with every optional slot, flag and scalar set, or none."""
    slots = BWD_UIDS if optional else SdpaBwdRecord.REQUIRED_UIDS
    tensors = [
        tensor(uid, f"{name}::{slot}", scalar=slot in ("attn_scale", "seed", "offset"))
        for uid, slot in enumerate(slots, start=1)
    ]
    if optional:  # a compile-time scalar of every kind
        tensors[9] = tensor(10, "scale", scalar=True, value=0.125)
        tensors[13] = tensor(14, "seed", scalar=True, data_type=DataType.INT64, value=-7)
        tensors[14] = tensor(15, "offset", scalar=True, data_type=DataType.BOOLEAN, value=True)
    attrs: dict[str, Any] = {slot: uid for uid, slot in enumerate(slots, start=1)}
    if optional:
        attrs.update(OPTIONAL_SCALARS)
        attrs.update(dict.fromkeys(FLAGS, True))
        attrs["diagonal_alignment"] = DiagonalAlignment.BOTTOM_RIGHT
    return GraphRecord(
        name="g",
        compute_data_type=DataType.FLOAT,
        intermediate_data_type=DataType.FLOAT,
        io_data_type=DataType.BFLOAT16,
        preferred_engine_id=7 if optional else None,
        tensors=tensors,
        nodes=[
            NodeRecord(
                name=name, compute_data_type=DataType.FLOAT, attributes=SdpaBwdRecord(**attrs)
            )
        ],
    )


def fwd_bwd_record(*, optional: bool) -> GraphRecord:
    """SDPA forward feeding SDPA backward through O and Stats."""
    bwd = bwd_record(optional=optional)
    b = bwd.nodes[0].attributes
    assert isinstance(b, SdpaBwdRecord)
    fwd_attrs: dict[str, Any] = {"q": b.q, "k": b.k, "v": b.v, "o": b.o, "stats": b.stats}
    if optional:
        for slot in SdpaFwdRecord.OPTIONAL_UIDS:
            if slot != "stats":
                fwd_attrs[slot] = getattr(b, slot)
        fwd_attrs.update(OPTIONAL_SCALARS, generate_stats=True)
        fwd_attrs.update(dict.fromkeys(FLAGS, True))
    fwd = NodeRecord(name="SdpaFwd_0", attributes=SdpaFwdRecord(**fwd_attrs))
    return bwd.model_copy(update={"nodes": [fwd, *bwd.nodes]})


RECORDS = {
    "empty": GraphRecord(),
    "bwd-required": bwd_record(optional=False),
    "bwd-every-optional": bwd_record(optional=True),
    "fwd-bwd-required": fwd_bwd_record(optional=False),
    "fwd-bwd-every-optional": fwd_bwd_record(optional=True),
    "fwd-inference": GraphRecord(
        tensors=[tensor(u, n) for u, n in ((1, "q"), (2, "k"), (3, "v"), (4, "o"))],
        nodes=[
            NodeRecord(
                name="fwd",
                attributes=SdpaFwdRecord(q=1, k=2, v=3, o=4, generate_stats=False),
            )
        ],
    ),
}


def assert_same(a: GraphRecord, b: GraphRecord) -> None:
    assert record_to_json(a) == record_to_json(b)
    assert record_to_bytes(a) == record_to_bytes(b)
    assert record_key(a) == record_key(b)


def decodes_or_fails_cleanly(fn: Any, data: Any) -> GraphRecord | None:
    try:
        rec = fn(data)
    except HipdnnError as err:
        assert err.code in DECODE_ERRORS, err
        return None
    assert isinstance(rec, GraphRecord)
    assert_same(record_from_bytes(record_to_bytes(rec)), rec)  # what decodes is valid
    return rec


# ------------------------------------------------------------------------------------------------
# round trips and keys
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", list(RECORDS))
def test_round_trips_are_exact(which: str) -> None:
    rec = RECORDS[which]
    from_bytes = record_from_bytes(record_to_bytes(rec))
    from_json = record_from_json(record_to_json(rec))
    assert from_bytes == rec and from_json == rec
    assert_same(from_bytes, rec)
    assert_same(from_json, rec)
    # bytes from JSON and JSON from bytes, too
    assert record_to_bytes(from_json) == record_to_bytes(rec)
    assert record_to_json(from_bytes) == record_to_json(rec)


def test_json_writes_enums_by_name_and_reads_them_back() -> None:
    text = record_to_json(RECORDS["bwd-every-optional"])
    data = json.loads(text)
    assert data["io_data_type"] == "BFLOAT16"
    assert data["format_version"] == FORMAT_VERSION
    attrs = data["nodes"][0]["attributes"]
    assert attrs["type"] == "SDPA_BWD"
    assert attrs["diagonal_alignment"] == "BOTTOM_RIGHT"
    assert data["tensors"][13]["value"] == -7 and data["tensors"][14]["value"] is True
    assert " " not in text.replace("SdpaBwd_0::", "")  # compact
    schema = json_schema()
    assert schema["properties"]["io_data_type"]["enum"][3] == "BFLOAT16"
    assert "SdpaBwdRecord" in schema["$defs"]


def test_value_types_survive() -> None:
    rec = record_from_bytes(record_to_bytes(RECORDS["bwd-every-optional"]))
    values = [t.value for t in rec.tensors if t.value is not None]
    assert [type(v) for v in values] == [float, int, bool]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, -0.0, 5e-324, 2**63 - 1])
def test_extreme_scalars_round_trip(value: float) -> None:
    rec = GraphRecord(tensors=[tensor(1, "x", scalar=True, value=value)])
    assert_same(record_from_json(record_to_json(rec)), rec)
    assert_same(record_from_bytes(record_to_bytes(rec)), rec)


def test_key_is_stable_and_content_sensitive() -> None:
    rec = RECORDS["bwd-every-optional"]
    key = record_key(rec)
    assert key == record_key(bwd_record(optional=True))
    assert 0 <= key < 2**64
    t0 = rec.tensors[0]
    node = rec.nodes[0]
    attrs = node.attributes

    def with_tensor0(**update: Any) -> GraphRecord:
        return rec.model_copy(update={"tensors": [t0.model_copy(update=update), *rec.tensors[1:]]})

    new_attrs = attrs.model_copy(update={"causal_mask": False})
    variants = [
        rec.model_copy(update={"name": "h"}),
        with_tensor0(name="Q2"),
        with_tensor0(dims=[2, 4, 64, 16]),
        with_tensor0(uid=99),
        rec.model_copy(update={"nodes": [node.model_copy(update={"attributes": new_attrs})]}),
        rec.model_copy(update={"io_data_type": DataType.HALF}),
    ]
    assert len({key, *(record_key(v) for v in variants)}) == len(variants) + 1


def test_known_bytes_layout() -> None:
    blob = record_to_bytes(GraphRecord(name="g"))
    assert blob[4:8] == b"HDGR"
    assert len(blob) % 4 == 0 or blob.endswith(b"\0")
    assert record_to_bytes(GraphRecord(name="g")) == blob  # deterministic


# ------------------------------------------------------------------------------------------------
# record rules
# ------------------------------------------------------------------------------------------------


def dump(rec: GraphRecord) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(record_to_json(rec))
    return data


def fails_json(data: Any, code: ErrorCode, match: str = "") -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(HipdnnError) as info:
        record_from_json(text)
    assert info.value.code == code, info.value
    assert match in str(info.value)


def test_duplicate_uids() -> None:
    data = dump(RECORDS["bwd-required"])
    data["tensors"][1]["uid"] = 1
    data["tensors"][3]["uid"] = 3
    fails_json(data, ErrorCode.INVALID_VALUE, "Duplicate tensor UIDs found in the graph: 1, 3")
    with pytest.raises(HipdnnError, match="Duplicate tensor UIDs"):
        GraphRecord(tensors=[tensor(1, "a"), tensor(1, "b")])


def test_dangling_uid() -> None:
    data = dump(RECORDS["bwd-required"])
    data["nodes"][0]["attributes"]["dv"] = 1234
    fails_json(data, ErrorCode.INVALID_VALUE, "refers to tensor uid 1234 (dv)")


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("dims", [2, -4, 64, 32], "must have only positive dimensions"),
        ("dims", [2, 0, 64, 32], "must have only positive dimensions"),
        ("dims", [2**41, 1, 1, 1], "dimension larger than"),
        ("dims", [2**40, 2**40, 1, 1], "more than 4611686018427387904 elements"),
        ("strides", [1, 1, 1], "dims and strides have different sizes"),
        ("strides", [1, 1, 1, -1], "strides must be in"),
        ("dims", [1] * 9, "rank 9"),
        ("alignment", 0, "alignment must be >= 1"),
        ("uid", 2**63, "Invalid graph record at tensors.0.uid"),
        ("data_type", "BFLOAT17", "unknown DataType"),
        ("data_type", 3, "unknown DataType"),
        ("is_virtual", "yes", "Invalid graph record"),
        ("name", "x" * 5000, "Invalid graph record"),
        ("surprise", 1, "Extra inputs are not permitted"),
    ],
)
def test_bad_tensor_fields(field: str, value: Any, match: str) -> None:
    data = dump(RECORDS["bwd-required"])
    data["tensors"][0][field] = value
    if field == "dims" and len(value) == 9:
        data["tensors"][0]["strides"] = [1] * 9
    fails_json(data, ErrorCode.INVALID_VALUE, match)


@pytest.mark.parametrize(
    ("edit", "code"),
    [
        (lambda d: d.update(format_version=2), ErrorCode.UNSUPPORTED_GRAPH_FORMAT),
        (lambda d: d.update(format_version="1"), ErrorCode.UNSUPPORTED_GRAPH_FORMAT),
        (lambda d: d.pop("format_version"), ErrorCode.UNSUPPORTED_GRAPH_FORMAT),
        (lambda d: d["nodes"][0]["attributes"].update(type="CONV"), ErrorCode.INVALID_VALUE),
        (lambda d: d["nodes"][0]["attributes"].pop("q"), ErrorCode.INVALID_VALUE),
        (lambda d: d["nodes"][0].update(compute_data_type="FLOAT64"), ErrorCode.INVALID_VALUE),
        (lambda d: d.update(preferred_engine_id=10**30), ErrorCode.INVALID_VALUE),
        (lambda d: d.update(tensors={}), ErrorCode.INVALID_VALUE),
        (
            lambda d: d["nodes"][0]["attributes"].update(diagonal_alignment="MIDDLE"),
            ErrorCode.INVALID_VALUE,
        ),
    ],
)
def test_bad_graph_json(edit: Any, code: ErrorCode) -> None:
    data = dump(RECORDS["bwd-required"])
    edit(data)
    fails_json(data, code)


@pytest.mark.parametrize(
    "text", ["", "{", "[]", "null", "17", '"x"', "{" * 100_000, "\xff", b"\xff\xfe"]
)
def test_undecodable_json(text: Any) -> None:
    with pytest.raises(HipdnnError) as info:
        record_from_json(text)
    assert info.value.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT


def test_huge_integer_text_is_rejected() -> None:
    data = dump(RECORDS["bwd-required"])
    text = json.dumps(data).replace('"uid":1,', '"uid":' + "9" * 5000 + ",", 1)
    text = text.replace('"uid": 1,', '"uid": ' + "9" * 5000 + ",", 1)
    with pytest.raises(HipdnnError) as info:
        record_from_json(text)
    assert info.value.code in DECODE_ERRORS


def test_inputs_of_wrong_type_or_size() -> None:
    for fn, bad in ((record_from_json, 3), (record_from_bytes, "text"), (record_from_bytes, None)):
        with pytest.raises(HipdnnError) as info:
            fn(bad)
        assert info.value.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    big = bytes(MAX_INPUT_BYTES + 1)
    for fn, data in ((record_from_bytes, big), (record_from_bytes, memoryview(big))):
        with pytest.raises(HipdnnError, match="larger than"):
            fn(data)
    with pytest.raises(HipdnnError, match="larger than"):
        record_from_json(" " * (MAX_INPUT_BYTES + 1))


def test_direct_construction_raises_hipdnn_errors() -> None:
    with pytest.raises(HipdnnError) as info:
        TensorRecord(uid="one")  # type: ignore[arg-type]
    assert info.value.code == ErrorCode.INVALID_VALUE
    with pytest.raises(HipdnnError) as info:
        TensorRecord(uid=1, name="\ud800")
    assert info.value.code == ErrorCode.INVALID_VALUE


# ------------------------------------------------------------------------------------------------
# malformed bytes
# ------------------------------------------------------------------------------------------------


def graph_fields(blob: bytes) -> tuple[tuple[Any, ...], tuple[int, ...], int]:
    root = struct.unpack_from("<I", blob, 0)[0]
    values, rel = fb_reader._read(blob, len(blob), root, fb_reader._GRAPH, 0)
    return values, rel, root


def test_bytes_identifier_version_and_lengths() -> None:
    blob = record_to_bytes(RECORDS["bwd-every-optional"])
    with pytest.raises(HipdnnError, match="identifier") as info:
        record_from_bytes(blob[:4] + b"XXXX" + blob[8:])
    assert info.value.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    values, rel, root = graph_fields(blob)
    version_at = root + rel[7]
    bumped = bytearray(blob)
    struct.pack_into("<I", bumped, version_at, 2)
    with pytest.raises(HipdnnError, match="version 2") as info:
        record_from_bytes(bytes(bumped))
    assert info.value.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    # a tensor vector claiming 4 billion entries is rejected before anything is allocated
    vector = root + rel[4] + values[4]
    claimed = bytearray(blob)
    struct.pack_into("<I", claimed, vector, 0xFFFFFFFF)
    with pytest.raises(HipdnnError, match="out of bounds") as info:
        record_from_bytes(bytes(claimed))
    assert info.value.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    for cut in (0, 7, 11, 12, len(blob) // 2, len(blob) - 1):
        with pytest.raises(HipdnnError) as info:
            record_from_bytes(blob[:cut])
        assert info.value.code in DECODE_ERRORS


def test_shared_strings_are_decoded_once() -> None:
    """Many references to one string cost one decode (no amplification)."""
    strings = fb_reader._Strings(b"\0" * 4 + struct.pack("<I", 3) + b"abc\0", 12)
    assert strings.get(0, 4, "name") == "abc"
    assert strings.get(0, 4, "name") is strings.get(0, 4, "name")


# ------------------------------------------------------------------------------------------------
# fuzzing
# ------------------------------------------------------------------------------------------------

BLOBS = [record_to_bytes(r) for r in RECORDS.values()]
FUZZ = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)


@st.composite
def mutated_blob(draw: st.DrawFn) -> bytes:
    blob = bytearray(draw(st.sampled_from(BLOBS)))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "byte", "word", "cut", "insert", "delete"]))
        at = draw(st.integers(0, max(len(blob) - 1, 0)))
        if not blob:
            break
        if kind == "flip":
            blob[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte":
            blob[at] = draw(st.integers(0, 255))
        elif kind == "word" and at + 4 <= len(blob):
            word = draw(st.sampled_from([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, len(blob)]))
            struct.pack_into("<I", blob, at, word)
        elif kind == "cut":
            del blob[at:]
        elif kind == "insert":
            blob[at:at] = draw(st.binary(max_size=16))
        else:
            del blob[at : at + draw(st.integers(1, 16))]
    return bytes(blob)


@FUZZ
@given(mutated_blob())
def test_fuzz_mutated_bytes(blob: bytes) -> None:
    decodes_or_fails_cleanly(record_from_bytes, blob)


@FUZZ
@given(st.binary(max_size=512), st.booleans())
def test_fuzz_random_bytes(tail: bytes, with_header: bool) -> None:
    blob = (struct.pack("<I", 8) + b"HDGR" + tail) if with_header else tail
    decodes_or_fails_cleanly(record_from_bytes, blob)


JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["BFLOAT16", "BFLOAT17", "SDPA_BWD", "SDPA_FWD", "BOTTOM_RIGHT", "NaN"]),
    st.lists(st.integers(-3, 3), max_size=10),
    st.builds(dict),  # a fresh {} per draw: a later edit may add keys to it
)


@st.composite
def mutated_json(draw: st.DrawFn) -> str:
    data = dump(draw(st.sampled_from(list(RECORDS.values()))))
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(json_paths(data)))
        if not where:
            continue
        parent = data
        for step in where[:-1]:
            parent = parent[step]
        kind = draw(st.sampled_from(["replace", "delete", "add"]))
        if kind == "delete":
            del parent[where[-1]]
        elif kind == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(JSON_VALUES)
        else:
            parent[where[-1]] = draw(JSON_VALUES)
    return json.dumps(data)


@FUZZ
@given(mutated_json())
def test_fuzz_json_edits(text: str) -> None:
    decodes_or_fails_cleanly(record_from_json, text)


@FUZZ
@given(st.text(max_size=200))
def test_fuzz_random_text(text: str) -> None:
    decodes_or_fails_cleanly(record_from_json, text)


# ------------------------------------------------------------------------------------------------
# property: generated records round-trip exactly
# ------------------------------------------------------------------------------------------------

NAMES = st.text(max_size=12)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@st.composite
def records(draw: st.DrawFn) -> GraphRecord:
    uids = draw(st.lists(INT64, min_size=0, max_size=8, unique=True))
    tensors = []
    for uid in uids:
        rank = draw(st.integers(0, 8))
        tensors.append(
            TensorRecord(
                uid=uid,
                name=draw(NAMES),
                data_type=draw(st.sampled_from(list(DataType))),
                dims=draw(st.lists(st.integers(1, 64), min_size=rank, max_size=rank)),
                strides=draw(st.lists(st.integers(0, 2**62), min_size=rank, max_size=rank)),
                is_virtual=draw(st.booleans()),
                is_pass_by_value=draw(st.booleans()),
                value=draw(st.none() | st.booleans() | INT64 | st.floats()),
                alignment=draw(st.integers(1, 2**63 - 1)),
            )
        )
    nodes = []
    for _ in range(draw(st.integers(0, 3)) if uids else 0):
        fwd = draw(st.booleans())
        cls = SdpaFwdRecord if fwd else SdpaBwdRecord
        ref = st.sampled_from(uids)
        fields: dict[str, Any] = {slot: draw(ref) for slot in cls.REQUIRED_UIDS}
        fields.update({slot: draw(st.none() | ref) for slot in cls.OPTIONAL_UIDS})
        fields.update({flag: draw(st.booleans()) for flag in FLAGS})
        fields.update(
            dropout_probability=draw(st.none() | st.floats()),
            attn_scale_value=draw(st.none() | st.floats()),
            left_bound=draw(st.none() | INT64),
            right_bound=draw(st.none() | INT64),
            diagonal_alignment=draw(st.sampled_from(list(DiagonalAlignment))),
        )
        if fwd:
            fields["generate_stats"] = draw(st.none() | st.booleans())
        nodes.append(
            NodeRecord(
                name=draw(NAMES),
                compute_data_type=draw(st.sampled_from(list(DataType))),
                attributes=cls(**fields),
            )
        )
    return GraphRecord(
        name=draw(NAMES),
        compute_data_type=draw(st.sampled_from(list(DataType))),
        intermediate_data_type=draw(st.sampled_from(list(DataType))),
        io_data_type=draw(st.sampled_from(list(DataType))),
        preferred_engine_id=draw(st.none() | INT64),
        tensors=tensors,
        nodes=nodes,
    )


@settings(max_examples=200, deadline=None)
@given(records())
def test_generated_records_round_trip(rec: GraphRecord) -> None:
    assert_same(record_from_bytes(record_to_bytes(rec)), rec)
    assert_same(record_from_json(record_to_json(rec)), rec)


def test_construct_record_matches_validation() -> None:
    from hipdnn_graph.descriptors.record_checks import construct_record

    fields = {"uid": 5, "name": "x", "dims": [2, 3], "strides": [3, 1], "value": 1.5}
    fast = construct_record(TensorRecord, **fields)
    assert fast == TensorRecord(**fields)
    assert record_to_json(GraphRecord(tensors=[fast])) == record_to_json(
        GraphRecord(tensors=[TensorRecord(**fields)])
    )
    every = construct_record(TensorRecord, **TensorRecord(**fields).model_dump())
    assert every == fast
    assert construct_record(TensorRecord, uid=1).dims == []
    assert (
        construct_record(TensorRecord, uid=1).dims is not construct_record(TensorRecord, uid=2).dims
    )
    with pytest.raises(HipdnnError, match="needs a value for uid"):
        construct_record(TensorRecord, name="x")
    with pytest.raises(HipdnnError, match="no fields"):
        construct_record(TensorRecord, uid=1, colour="red")


def test_unvalidated_records_that_do_not_fit_raise_hipdnn_errors() -> None:
    from hipdnn_graph.descriptors.record_checks import construct_record

    huge = construct_record(TensorRecord, uid=1, data_type=3, dims=[2**64], strides=[1])
    assert '"data_type":"BFLOAT16"' in huge.model_dump_json()  # ints serialize by name too
    rec = GraphRecord().model_copy(update={"tensors": [huge]})
    with pytest.raises(HipdnnError) as info:
        record_to_bytes(rec)
    assert info.value.code == ErrorCode.INVALID_VALUE


def test_json_schema_describes_the_canonical_json() -> None:
    schema = json_schema()
    assert schema["properties"]["format_version"]["const"] == FORMAT_VERSION
    assert schema["properties"]["compute_data_type"]["default"] == "NOT_SET"
    bwd = schema["$defs"]["SdpaBwdRecord"]["properties"]
    assert bwd["diagonal_alignment"]["default"] == "TOP_LEFT"
    assert bwd["type"]["const"] == "SDPA_BWD"
    assert json.loads(json.dumps(schema)) == schema


def test_canonical_json_validates_against_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")  # not a dependency; checked where installed
    for rec in RECORDS.values():
        jsonschema.validate(json.loads(record_to_json(rec)), json_schema())


def test_tensor_uids_lists_set_slots_required_first() -> None:
    attrs = SdpaFwdRecord(q=1, k=2, v=3, o=4, bias=9)
    assert list(attrs.tensor_uids()) == [("q", 1), ("k", 2), ("v", 3), ("o", 4), ("bias", 9)]

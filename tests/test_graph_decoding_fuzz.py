"""Graph-level fuzzing of both decoders of hipDNN's wire (bytes and JSON).

``Graph.deserialize`` on mutated, spliced, truncated, length-inflated or random bytes and
``Graph.from_json`` on randomly edited JSON
either return a graph or raise ``HipdnnError`` with code UNSUPPORTED_GRAPH_FORMAT or
INVALID_VALUE, never another exception; a graph that loads either validates or raises
``HipdnnError``, and once validated it round-trips losslessly.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sdpa_graph_cases import CASES, json_paths

import hipdnn_graph as hg
from hipdnn_graph.types import ErrorCode

DECODE_CODES = {ErrorCode.UNSUPPORTED_GRAPH_FORMAT, ErrorCode.INVALID_VALUE}
FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
SEEDS = [
    "bwd_full", "fwd_full", "fwd_bwd", "user_uids", "engine_by_name", "scalar_bfloat16",
    "scalar_fp8_e4m3", "scalar_int8", "explicit_layouts",
]  # fmt: skip


def _graph(case: str) -> hg.Graph:
    g = CASES[case]()
    g.validate()
    return g


BLOBS = [_graph(case).serialize() for case in SEEDS]
TEXTS = [_graph(case).to_json() for case in SEEDS]


def _check_loaded(g: hg.Graph) -> None:
    """A loaded graph validates or raises HipdnnError; a valid one round-trips."""
    try:
        g.validate()
    except hg.HipdnnError:
        return
    try:
        blob, text = g.serialize(), g.to_json()
    except hg.HipdnnError:
        return  # e.g. a node whose compute type stayed NOT_SET cannot be lowered
    assert hg.Graph.deserialize(blob).to_json() == text
    assert hg.Graph.from_json(text).serialize() == blob


def _deserialize(data: bytes) -> None:
    try:
        g = hg.Graph.deserialize(data)
    except hg.HipdnnError as err:
        assert err.code in DECODE_CODES, (err.code, err.message)
        return
    _check_loaded(g)


def _from_json(text: str | bytes) -> None:
    try:
        g = hg.Graph.from_json(text)
    except hg.HipdnnError as err:
        assert err.code in DECODE_CODES, (err.code, err.message)
        return
    _check_loaded(g)


# ----- bytes -------------------------------------------------------------------------------------


@st.composite
def _flipped(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(BLOBS)))
    for _ in range(draw(st.integers(1, 8))):
        i = draw(st.integers(0, len(data) - 1))
        data[i] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


@st.composite
def _overwritten(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(BLOBS)))
    i = draw(st.integers(0, len(data) - 1))
    patch = draw(st.binary(min_size=1, max_size=8))
    data[i : i + len(patch)] = patch
    return bytes(data)


@st.composite
def _truncated(draw: st.DrawFn) -> bytes:
    data = draw(st.sampled_from(BLOBS))
    return data[: draw(st.integers(0, len(data) - 1))]


@st.composite
def _spliced(draw: st.DrawFn) -> bytes:
    """A piece of one blob written over, or inserted into, another."""
    a, b = draw(st.sampled_from(BLOBS)), draw(st.sampled_from(BLOBS))
    start = draw(st.integers(0, len(b) - 1))
    piece = b[start : start + draw(st.integers(1, 64))]
    at = draw(st.integers(0, len(a)))
    if draw(st.booleans()):
        return a[:at] + piece + a[at + len(piece) :]
    return a[:at] + piece + a[at:]


@st.composite
def _inflated(draw: st.DrawFn) -> bytes:
    """A 4-aligned u32 (a vector or string length, an offset, a vtable entry) made large."""
    data = bytearray(draw(st.sampled_from(BLOBS)))
    at = 4 * draw(st.integers(0, len(data) // 4 - 1))
    value = draw(
        st.sampled_from([len(data), len(data) + 1, 2**16, 2**24, 2**30, 2**31 - 1, 2**32 - 1])
    )
    data[at : at + 4] = value.to_bytes(4, "little")
    return bytes(data)


@given(_spliced())
@FUZZ
def test_splices(data: bytes) -> None:
    _deserialize(data)


@given(_inflated())
@FUZZ
def test_length_inflation(data: bytes) -> None:
    _deserialize(data)


@given(_flipped())
@FUZZ
def test_bit_flips(data: bytes) -> None:
    _deserialize(data)


@given(_overwritten())
@FUZZ
def test_overwritten_bytes(data: bytes) -> None:
    _deserialize(data)


@given(_truncated())
@FUZZ
def test_truncations(data: bytes) -> None:
    _deserialize(data)


@given(st.binary(max_size=256), st.booleans())
@FUZZ
def test_random_bytes(tail: bytes, with_header: bool) -> None:
    _deserialize((b"\x0c\x00\x00\x00HDGR" if with_header else b"") + tail)


def test_every_truncation_of_a_small_graph() -> None:
    blob = BLOBS[SEEDS.index("fwd_bwd")]
    for end in range(len(blob)):
        _deserialize(blob[:end])


def test_every_single_byte_change_of_a_small_graph_header() -> None:
    blob = BLOBS[SEEDS.index("fwd_bwd")]
    for i in range(min(len(blob), 160)):
        for value in (0x00, 0x7F, 0xFF):
            data = bytearray(blob)
            data[i] = value
            _deserialize(bytes(data))


# ----- JSON --------------------------------------------------------------------------------------


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([-1, 0, 1, 2**31, 2**62, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(["FLOAT", "BFLOAT16", "FLOAT128", "BOTTOM_RIGHT", "SIDEWAYS", "SDPA_FWD", ""]),
    st.lists(st.integers(-3, 2**41), max_size=10),
    # fresh containers each time: an edit may later write into them, and st.just would hand
    # the same (by then mutated) object to the next example
    st.builds(dict),
    st.builds(lambda: [[]]),
)


@st.composite
def _edited_json(draw: st.DrawFn) -> str:
    doc = json.loads(draw(st.sampled_from(TEXTS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in json_paths(doc) if p]
        path = draw(st.sampled_from(paths))
        parent = _parent(doc, path)
        if draw(st.booleans()):
            del parent[path[-1]]  # delete a key or a list element
        else:
            parent[path[-1]] = draw(_VALUES)
        if not isinstance(doc, dict) or not doc.get("tensors"):
            break
    return json.dumps(doc)


@st.composite
def _semantic_json(draw: st.DrawFn) -> str:
    """Targeted content errors: dangling or duplicate uids, bad dims, unknown enum names."""
    doc = json.loads(draw(st.sampled_from(TEXTS)))
    tensors, nodes = doc["tensors"], doc["nodes"]
    t = draw(st.sampled_from(tensors))
    node = draw(st.sampled_from(nodes))
    scalars = node.get("parameters", node.get("attributes"))
    slots = node["inputs"] | node["outputs"]
    uid_slots = [k for k, v in slots.items() if isinstance(v, int)]
    kind = draw(st.integers(0, 9))
    if kind == 0:
        key = draw(st.sampled_from(uid_slots))
        group = node["inputs"] if key in node["inputs"] else node["outputs"]
        group[key] = draw(st.integers(-(2**63), 2**63 - 1))
    elif kind == 1:
        t["uid"] = draw(st.sampled_from(tensors))["uid"]
    elif kind == 2:
        t["dims"] = [draw(st.integers(-(2**64), 2**64)) for _ in t["dims"]]
    elif kind == 3:
        t["strides"] = draw(st.lists(st.integers(-5, 2**63), max_size=10))
    elif kind == 4:
        t["data_type"] = draw(st.sampled_from(["FLOAT128", "FLOAT", "half ", "boolean", 3, None]))
    elif kind == 5:
        scalars["diagonal_alignment"] = draw(st.sampled_from(["MIDDLE", 1, "TOP_LEFT", None]))
    elif kind == 6:
        t["value_type"] = draw(st.sampled_from(["Float64Value", "BoolValue", "Int8Value", 4]))
    elif kind == 7:
        node["type"] = draw(
            st.sampled_from(
                ["SdpaAttributes", "SdpaBackwardAttributes", "ResampleBwdAttributes", 12]
            )
        )
    elif kind == 8:
        t["value"] = draw(_VALUES)
    else:
        doc["preferred_engine_id"] = draw(st.sampled_from([2**64 - 1, 2**63, -(2**63), "x"]))
    return json.dumps(doc)


@given(_edited_json())
@FUZZ
def test_random_json_edits(text: str) -> None:
    _from_json(text)


@given(_semantic_json())
@FUZZ
def test_targeted_json_edits(text: str) -> None:
    _from_json(text)


@given(st.sampled_from(TEXTS), st.integers(0, 5000), st.text(max_size=4))
@FUZZ
def test_json_text_splices(text: str, at: int, insert: str) -> None:
    at %= len(text)
    _from_json(text[:at] + insert + text[at + len(insert) :])
    _from_json(text[:at])


@given(st.one_of(st.text(max_size=64), st.binary(max_size=64)))
@FUZZ
def test_random_json_text(text: str | bytes) -> None:
    _from_json(text)


def test_dangling_and_duplicate_uids_are_invalid_value() -> None:
    doc = json.loads(TEXTS[0])
    doc["nodes"][0]["inputs"]["q_tensor_uid"] = 10**6
    for text in (json.dumps(doc),):
        try:
            hg.Graph.from_json(text)
        except hg.HipdnnError as err:
            assert err.code == ErrorCode.INVALID_VALUE
            assert "10000" in err.message
        else:
            raise AssertionError("dangling uid accepted")
    doc = json.loads(TEXTS[0])
    doc["tensors"][1]["uid"] = doc["tensors"][0]["uid"]
    try:
        hg.Graph.from_json(json.dumps(doc))
    except hg.HipdnnError as err:
        assert err.code == ErrorCode.INVALID_VALUE
        assert err.message.startswith("Duplicate tensor UIDs found in the graph: ")
    else:
        raise AssertionError("duplicate uid accepted")


def test_buffer_types_and_wrong_input_types() -> None:
    blob, text = BLOBS[0], TEXTS[0]
    for data in (bytearray(blob), memoryview(blob)):
        assert hg.Graph.deserialize(data).serialize() == blob
    assert hg.Graph.from_json(text.encode()).to_json() == text
    for bad in (None, 3, "HDGP", [1, 2]):
        try:
            hg.Graph.deserialize(bad)  # type: ignore[arg-type]
        except hg.HipdnnError as err:
            assert err.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        else:
            raise AssertionError(f"{bad!r} accepted")
    for bad_text in (None, 3, [text]):
        try:
            hg.Graph.from_json(bad_text)  # type: ignore[arg-type]
        except hg.HipdnnError as err:
            assert err.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        else:
            raise AssertionError(f"{bad_text!r} accepted")


def test_oversized_input_is_refused_without_decoding() -> None:
    from hipdnn_graph.descriptors import MAX_INPUT_BYTES

    huge = BLOBS[0] + bytes(MAX_INPUT_BYTES)
    try:
        hg.Graph.deserialize(huge)
    except hg.HipdnnError as err:
        assert err.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        assert "larger than" in err.message
    else:
        raise AssertionError("oversized input accepted")

"""Decoding stays bounded: memory a small multiple of the input, refusals before building
anything from entries that repeat one table, limits checked on the way in."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import flatbuffers
import pytest
from hipdnn_blobs import blob_from_doc
from sdpa_graph_cases import WIRE_CASES

import hipdnn_graph as hg
from hipdnn_graph.types import ErrorCode


def _peak(fn: Callable[[], Any]) -> tuple[int, hg.HipdnnError | None]:
    """Peak bytes allocated while ``fn`` runs, and the HipdnnError it raised (if any)."""
    tracemalloc.start()
    try:
        fn()
        error = None
    except hg.HipdnnError as err:
        error = err
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, error


def _doc() -> dict[str, Any]:
    g = WIRE_CASES["bwd"]()
    g.validate()
    doc: dict[str, Any] = json.loads(g.to_json())
    return doc


def _one_table_many_times(count: int) -> bytes:
    """A graph whose tensors vector lists one tensor table ``count`` times."""
    b = flatbuffers.Builder(1024)
    b.StartObject(12)
    b.PrependInt64Slot(0, 1, 0)
    tensor = b.EndObject()
    b.StartVector(4, count, 4)
    for _ in range(count):
        b.PrependUOffsetTRelative(tensor)
    tensors = b.EndVector()
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(4, tensors, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def test_tensor_entries_sharing_one_table_are_refused_before_decoding() -> None:
    blob = _one_table_many_times(65_536)
    start = time.perf_counter()
    peak, error = _peak(lambda: hg.Graph.deserialize(blob))
    assert time.perf_counter() - start < 5
    assert error is not None and error.code == ErrorCode.INVALID_VALUE
    assert error.message == "Graph lists one tensor table more than once"
    assert peak < 6 * len(blob), (peak, len(blob))


def test_a_huge_dims_list_in_json_costs_a_small_multiple_of_the_input() -> None:
    doc = _doc()
    doc["tensors"][0]["dims"] = list(range(10**6, 10**6 + 200_000))
    text = json.dumps(doc)
    peak, error = _peak(lambda: hg.Graph.from_json(text))
    assert error is not None and error.code == ErrorCode.INVALID_VALUE
    assert "dims has 200000 entries, more than 8" in error.message
    assert peak < 8 * len(text), (peak, len(text))


@pytest.mark.parametrize("what", ["tensors", "nodes"])
def test_too_many_json_entries_are_refused_within_a_small_multiple(what: str) -> None:
    doc = _doc()
    entry = doc[what][0]
    doc[what] = [entry] * 65_537
    text = json.dumps(doc)
    peak, error = _peak(lambda: hg.Graph.from_json(text))
    assert error is not None and error.code == ErrorCode.INVALID_VALUE
    assert error.message == f"Graph has 65537 {what}, more than 65536"
    assert peak < 8 * len(text), (peak, len(text))


def _sharing_blob(nodes: int, name: str, *, share_attributes: bool = False) -> bytes:
    """A graph of ``nodes`` forward nodes over four tensors each, where every tensor and node
    table points at one shared ``name`` string (and, if asked, every node at one attributes
    table), as a flatbuffers builder that dedupes writes them."""
    b = flatbuffers.Builder(1 << 20)
    shared = b.CreateSharedString(name)
    tensors = []
    for uid in range(1, 4 * nodes + 1):
        b.StartObject(12)
        b.PrependInt64Slot(0, uid, 0)
        b.PrependUOffsetTRelativeSlot(1, shared, 0)
        b.PrependInt8Slot(2, 1, 0)
        tensors.append(b.EndObject())
    node_tables = []
    body = 0
    for j in range(nodes):
        if not (share_attributes and body):
            b.StartObject(4)
            for slot in range(4):  # q, k, v, o
                b.PrependInt64Slot(slot, 4 * j + slot + 1, 0)
            body = b.EndObject()
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, shared, 0)
        b.PrependUOffsetTRelativeSlot(3, body, 0)
        b.PrependInt8Slot(1, 1, 0)
        b.PrependUint8Slot(2, 12, 0)  # SdpaAttributes
        node_tables.append(b.EndObject())
    vectors = []
    for refs in (tensors, node_tables):
        b.StartVector(4, len(refs), 4)
        for ref in reversed(refs):
            b.PrependUOffsetTRelative(ref)
        vectors.append(b.EndVector())
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(4, vectors[0], 0)
    b.PrependUOffsetTRelativeSlot(5, vectors[1], 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def test_a_name_string_shared_by_every_table_is_refused_within_the_input_size() -> None:
    blob = _sharing_blob(16_384, "n" * 4096)  # 65,536 tensors and 16,384 nodes
    start = time.perf_counter()
    peak, error = _peak(lambda: hg.Graph.deserialize(blob))
    assert time.perf_counter() - start < 5
    assert error is not None and error.code == ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    assert error.message == (
        "Invalid hipDNN graph: its tables share strings or vectors that decode to more than "
        f"the buffer's {len(blob)} bytes"
    )
    assert peak < 6 * len(blob), (peak, len(blob))


def test_nodes_sharing_one_attributes_table_are_refused() -> None:
    blob = _sharing_blob(2, "n", share_attributes=True)
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.deserialize(blob)
    assert info.value.code == ErrorCode.INVALID_VALUE
    assert info.value.message == "Graph lists one node attribute table more than once"


def test_strings_shared_within_the_input_size_read_and_write_back_unshared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = _doc()
    for tensor in doc["tensors"]:
        tensor["name"] = "x"  # every tensor the same name: a deduping writer stores it once
    canonical = hg.Graph.from_json(json.dumps(doc)).serialize()
    create = flatbuffers.Builder.CreateString
    made: dict[str, int] = {}

    def create_once(builder: flatbuffers.Builder, text: str) -> int:
        if text not in made:
            made[text] = create(builder, text)
        return made[text]

    monkeypatch.setattr(flatbuffers.Builder, "CreateString", create_once)
    shared = blob_from_doc(doc)
    monkeypatch.undo()
    assert len(shared) < len(canonical) - 8 * 4  # the name is stored once
    assert hg.Graph.deserialize(shared).serialize() == canonical

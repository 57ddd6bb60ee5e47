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

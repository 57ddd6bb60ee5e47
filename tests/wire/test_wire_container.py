"""(d) The "HDGP" container (HIPDNN_WIRE.md A9): unwrapped on read, refused when broken."""

from __future__ import annotations

import py_oracle
import pytest
from cpp_oracle import CppOracle
from hipdnn_cases import MODELLED
from wire_model import normalized

import hipdnn_graph as hg
from hipdnn_graph.descriptors.compiled_plan import write_container

CASES = ["b8_1", "b8_2", "backward_every_field", "graph_extras"]


@pytest.mark.parametrize("plan", [None, b"opaque plan \x00\x01"], ids=["graph_only", "with_plan"])
@pytest.mark.parametrize("case", CASES)
def test_hipdnn_container_reads_as_its_graph_blob(
    cpp: CppOracle, case: str, plan: bytes | None
) -> None:
    desc = MODELLED[case]()
    bare = cpp.pack(desc)
    container = cpp.pack(desc, container=True, plan=plan)  # as SerializedGraphContainer
    assert container[4:8] == b"HDGP"
    read = cpp.read(container)  # the oracle unwraps it as hipDNN's extractGraphBlob does
    assert read["verified"] is True and read["plan_blob"] == (None if plan is None else plan.hex())
    graph = read["graph"]
    assert graph.pop("verified") is True
    assert normalized(graph) == normalized(desc)
    assert hg.Graph.deserialize(container).serialize() == bare


@pytest.mark.parametrize("case", CASES)
def test_container_with_a_graph_blob_off_8_alignment_is_copied_out(
    cpp: CppOracle, case: str
) -> None:
    bare = cpp.pack(MODELLED[case]())
    containers = [py_oracle.build_container(bare, pad=pad) for pad in range(8)]
    odd = [c for c in containers if py_oracle.graph_blob_address(c) % 8 != 0]
    assert odd, "no padding put the graph blob off 8-alignment"
    for container in odd:
        read = cpp.read(container)
        assert read["verified"] is True and read["graph"]["verified"] is True
        assert hg.Graph.deserialize(container).serialize() == bare


@pytest.mark.parametrize(
    "container",
    [
        pytest.param(lambda bare: py_oracle.build_container(None), id="no_graph_blob"),
        pytest.param(lambda bare: py_oracle.build_container(b""), id="empty_graph_blob"),
        pytest.param(lambda bare: py_oracle.build_container(bytes(16)), id="graph_blob_zeros"),
        pytest.param(lambda bare: py_oracle.build_container(bare[:-8]), id="truncated_graph"),
        pytest.param(lambda bare: py_oracle.build_container(bare)[:-4], id="truncated_container"),
    ],
)
def test_broken_container_is_refused(cpp: CppOracle, container: object) -> None:
    bare = cpp.pack(MODELLED["b8_1"]())
    blob = container(bare)  # type: ignore[operator]
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.deserialize(blob)
    assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT


@pytest.mark.parametrize("plan", [None, b"opaque plan \x00\x01", bytes(range(37))])
@pytest.mark.parametrize("case", CASES)
def test_container_writer_matches_hipdnns_bytes_and_its_plan_is_kept(
    cpp: CppOracle, case: str, plan: bytes | None
) -> None:
    """``write_container`` writes hipDNN's ``SerializedGraphContainer`` bytes exactly, and a
    read keeps the plan blob (``Graph.embedded_plan``) instead of dropping it."""
    desc = MODELLED[case]()
    bare = cpp.pack(desc)
    expected = cpp.pack(desc, container=True, plan=plan)
    assert write_container(bare, plan) == expected
    assert hg.Graph.deserialize(expected).embedded_plan == plan

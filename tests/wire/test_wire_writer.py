"""(a) Every blob ``Graph.serialize()`` writes is a hipDNN Graph that hipDNN reads as the graph.

For each graph of ``project_graphs.WRITABLE``: hipDNN's Verifier (C++, default options) accepts
the blob; the C++ generated code and the Python generated code read every field equal to what the
graph's own public API says (uids, names, hipDNN's data-type numbers, dims, strides, flags,
binary32 bits of the float attributes, the TensorValue member chosen by the data type and its
exact bytes, optional presence, node order, the engine id); the bytes are canonical (what
hipDNN's ``Graph::Pack`` writes for the same content); and a read and write gives them back.
"""

from __future__ import annotations

import json
from typing import Any

import py_oracle
import pytest
from cpp_oracle import CppOracle
from project_graphs import UNWRITABLE, WRITABLE
from wire_model import Desc, expected_description, normalized

import hipdnn_graph as hg


def _by_uid(desc: Desc) -> tuple[Desc, dict[int, Desc]]:
    """``desc`` without its tensors, and its tensors by uid (each uid once)."""
    rest = {k: v for k, v in desc.items() if k != "tensors"}
    tensors = {t["uid"]: t for t in desc["tensors"]}
    assert len(tensors) == len(desc["tensors"]), "duplicate tensor uids"
    return rest, tensors


def _assert_same_content(read: Desc, expected: Desc) -> None:
    read_rest, read_tensors = _by_uid(normalized(read))
    exp_rest, exp_tensors = _by_uid(normalized(expected))
    assert sorted(read_tensors) == sorted(exp_tensors), "the blob's tensors are not the graph's"
    for uid, tensor in exp_tensors.items():
        assert read_tensors[uid] == tensor, f"tensor {uid}"
    for index, node in enumerate(exp_rest.pop("nodes")):
        assert read_rest["nodes"][index] == node, f"node {index}"
    assert len(read_rest.pop("nodes")) == index + 1
    assert read_rest == exp_rest


@pytest.fixture(scope="module", params=sorted(WRITABLE))
def written(request: Any) -> tuple[hg.Graph, bytes]:
    g = WRITABLE[request.param]()
    return g, g.serialize()


def test_blob_passes_hipdnn_verifier_and_reads_as_the_graph(
    cpp: CppOracle, written: tuple[hg.Graph, bytes]
) -> None:
    g, blob = written
    read = cpp.read(blob)
    assert read.pop("verified") is True, "hipDNN's flatbuffers::Verifier rejects the blob"
    _assert_same_content(read, expected_description(g))


def test_python_generated_code_reads_the_same(
    cpp: CppOracle, written: tuple[hg.Graph, bytes]
) -> None:
    g, blob = written
    read = cpp.read(blob)
    assert read.pop("verified") is True
    assert py_oracle.read(blob) == read  # every field, tensor order included
    _assert_same_content(py_oracle.read(blob), expected_description(g))


def test_blob_is_canonical(cpp_oracles: list[CppOracle], written: tuple[hg.Graph, bytes]) -> None:
    """The exact bytes Graph::Pack writes for the blob's own content (A11), with both runtimes."""
    _, blob = written
    for oracle in cpp_oracles:
        read = oracle.read(blob)
        assert read.pop("verified") is True
        assert oracle.pack(read) == blob, oracle.version


def test_read_and_write_back_is_identical(written: tuple[hg.Graph, bytes]) -> None:
    _, blob = written
    assert hg.Graph.deserialize(blob).serialize() == blob
    assert hg.Graph.deserialize(blob, format="hipdnn").serialize(format="hipdnn") == blob


@pytest.mark.parametrize("case", sorted(UNWRITABLE))
def test_content_hipdnn_cannot_carry_is_refused(case: str) -> None:
    build, word = UNWRITABLE[case]
    g = build()
    with pytest.raises(hg.HipdnnError) as info:
        g.serialize()
    assert info.value.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    assert word.lower() in str(info.value).lower()


def _pooling(generate_index: bool | None) -> hg.Graph:
    f32 = hg.DataType.FLOAT
    g = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
    attrs = (
        hg.ResampleFwdAttributes()
        .set_resample_mode(hg.ResampleMode.MAXPOOL)
        .set_padding_mode(hg.PaddingMode.ZERO_PAD)
        .set_pre_padding([0, 0])
        .set_post_padding([0, 0])
        .set_stride([2, 2])
        .set_window([2, 2])
    )
    if generate_index is not None:
        attrs.set_generate_index(generate_index)
    y, index = g.resample(g.tensor(name="x", dim=[1, 1, 4, 4]), attrs)
    y.set_output(True)
    if index is not None:
        index.set_output(True).set_data_type(hg.DataType.INT32)
    return g


@pytest.mark.parametrize("generate_index", [None, False, True])
def test_generate_index_is_written_whenever_set(
    cpp_oracles: list[CppOracle], generate_index: bool | None
) -> None:
    """ResampleFwdAttributes.generate_index is on the wire whenever it is set, false included,
    and absent when unset: the oracles, built with the forks' ``bool = null`` declaration, read
    the written ``false`` as ``false`` (as ROCm's ``bool = false`` reads it) where an absent
    field would read as unset; the bytes are what Graph::Pack writes for that content."""
    blob = _pooling(generate_index).serialize()
    for oracle in cpp_oracles:
        read = oracle.read(blob)
        assert read.pop("verified") is True
        assert read["nodes"][0]["attributes"]["generate_index"] is generate_index
        assert oracle.pack(read) == blob, oracle.version
    assert py_oracle.read(blob)["nodes"][0]["attributes"]["generate_index"] is generate_index
    again = hg.Graph.deserialize(blob)
    assert again.nodes[0].attributes.generate_index is generate_index
    assert again.serialize() == blob and hg.Graph.from_json(again.to_json()).serialize() == blob
    json_node = json.loads(again.to_json())["nodes"][0]
    assert json_node.get("generate_index", "absent") == (
        "absent" if generate_index is None else generate_index
    )

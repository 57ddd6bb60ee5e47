"""(b) Blobs hipDNN writes read here, and write back byte for byte (HIPDNN_WIRE.md C1, C2, C4, C6).

* Canonical blobs (``Graph::Pack`` of hipDNN's generated C++ code) of ``hipdnn_cases.MODELLED``
  read as graphs whose public API shows the blob's content, and ``serialize()`` gives the same
  bytes back, tensor order and all; so do ``to_json`` -> ``from_json`` -> ``serialize``.
* Non-canonical blobs of the same content from the generated Python builder (another field
  order, defaults written, empty strings and vectors present, nodes built first) read as the
  same graph and write back canonical.
* Content the project does not model (A12) is kept through the round trip or refused with
  ``UNSUPPORTED_GRAPH_FORMAT`` naming the field, never dropped.
"""

from __future__ import annotations

import py_oracle
import pytest
from cpp_oracle import CppOracle
from hipdnn_cases import MODELLED, UNMODELLED
from wire_model import Desc, expected_description, normalized

import hipdnn_graph as hg

#: what a refusal of each UNMODELLED case must name
UNMODELLED_FIELD = {
    "mismatched_value_member": "Float64Value",
    "page_table_k": "page_table_k",
    "descale_q": "descale_q",
    "max_tensor": "max_tensor_uid",
    "max_seq_len_kv": "max_seq_len_kv",
    "mma_core_mode": "mma_core_mode",
    "implementation": "implementation",
    "umd_flops": "umd_",
    "matmul_umd_bytes": "MatmulAttributes.umd_bytes",
    "custom_op_marker": "CustomOpAttributes.test_generation_marker",
}

#: content only the bytes show (no public accessor): compared through the byte-exact round trip
_BYTES_ONLY = ("id", "min_required_engine_api_version", "is_override_shape_enabled")


def _model_view(desc: Desc) -> tuple[Desc, dict[int, Desc]]:
    d = normalized(desc)
    tensors = {t["uid"]: t for t in d.pop("tensors")}
    for key in _BYTES_ONLY:
        d.pop(key)
    return d, tensors


@pytest.mark.parametrize("case", sorted(MODELLED))
def test_canonical_hipdnn_blob_reads_as_its_content_and_writes_back(
    cpp: CppOracle, case: str
) -> None:
    desc = MODELLED[case]()
    blob = cpp.pack(desc)
    g = hg.Graph.deserialize(blob)
    assert g.serialize() == blob
    assert hg.Graph.deserialize(blob, format="hipdnn").serialize() == blob
    # the graph's public API shows the blob's content (the same view the writer tests use)
    seen, seen_tensors = _model_view(expected_description(g))
    want, want_tensors = _model_view(desc)
    assert seen_tensors == want_tensors
    assert seen == want


@pytest.mark.parametrize("case", sorted(MODELLED))
def test_canonical_blob_through_json_writes_back_identical(cpp: CppOracle, case: str) -> None:
    blob = cpp.pack(MODELLED[case]())
    text = hg.Graph.deserialize(blob).to_json()
    assert hg.Graph.from_json(text).serialize() == blob
    assert hg.Graph.from_json(text).to_json() == text


@pytest.mark.parametrize(
    "style",
    [{}, {"force_defaults": True}, {"empty_as_present": True, "nodes_first": True}],
    ids=["plain", "force_defaults", "empty_present_nodes_first"],
)
@pytest.mark.parametrize("case", sorted(MODELLED))
def test_non_canonical_hipdnn_blob_reads_equal_and_writes_canonical(
    cpp: CppOracle, case: str, style: dict[str, bool]
) -> None:
    desc = MODELLED[case]()
    blob = py_oracle.build(desc, **style)
    assert cpp.read(blob)["verified"] is True  # a valid hipDNN blob
    assert hg.Graph.deserialize(blob).serialize() == cpp.pack(desc)


@pytest.mark.parametrize("case", sorted(UNMODELLED))
def test_unmodelled_content_is_kept_or_refused_never_dropped(cpp: CppOracle, case: str) -> None:
    blob = cpp.pack(UNMODELLED[case]())
    try:
        g = hg.Graph.deserialize(blob)
    except hg.HipdnnError as error:
        assert error.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT, error
        assert UNMODELLED_FIELD[case].lower() in str(error).lower(), error
        return
    assert g.serialize() == blob  # kept: every bit of it


@pytest.mark.parametrize("case", sorted(UNMODELLED))
def test_unmodelled_content_from_python_builder_is_kept_or_refused(
    cpp: CppOracle, case: str
) -> None:
    desc = UNMODELLED[case]()
    blob = py_oracle.build(desc, force_defaults=True)
    try:
        g = hg.Graph.deserialize(blob)
    except hg.HipdnnError as error:
        assert error.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT, error
        assert UNMODELLED_FIELD[case].lower() in str(error).lower(), error
        return
    assert g.serialize() == cpp.pack(desc)

